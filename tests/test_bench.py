"""azshogi-bench runs and ends with its JSON line (speed itself is measured, not tested)."""
import json
import subprocess
import sys

from conftest import TINY


def test_bench_prints_a_json_last_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", *TINY, "search=puct", "search.leaves_per_step=2",
                           "bench.seconds=0.3", "bench.warmup_seconds=0.3", "bench.repeats=2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("model", "device", "dtype", "batch", "simulations", "nn_positions_per_s",
                "selfplay_positions_per_s", "selfplay_nn_evals_per_s", "efficiency"):
        assert key in result
    assert result["batch"] == 12  # 6 actors x 2 leaves: the batch self-play forms
    assert abs(result["efficiency"] - result["selfplay_nn_evals_per_s"] / result["nn_positions_per_s"]) < 0.002
