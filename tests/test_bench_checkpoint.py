"""docs/tools/bench_checkpoint.py keeps running (a few positions, in process)."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "docs" / "tools" / "bench_checkpoint.py"


def test_the_checkpoint_benchmark_runs():
    out = subprocess.run([sys.executable, str(SCRIPT), "--positions", "2000", "--phase-positions", "300",
                          "--actors", "4", "--plies", "12", "--workers", "0", "--repeats", "1"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    assert report["window_positions"] == 2000 and report["plies_in_flight"] > 0
    assert 0 < report["checkpoint_bytes_written_median"] < report["run_folder_bytes"]
    assert report["pause_resume_s_median"] > 0
