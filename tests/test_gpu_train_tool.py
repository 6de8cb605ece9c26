"""docs/tools/gpu_train.sh, dry-run on the CPU (GPU_TRAIN_DEVICE=cpu): it trains the run it is given and
brings back what matches elsewhere need, the networks of its checkpoints in one tar and its log without the
hcpe3 records."""
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from azshogi.play.models import load_model

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "tools" / "gpu_train.sh"
TINY = ("+experiment=smoke", "selfplay.num_actors=8", "rules.max_plies=12", "loop.positions_per_checkpoint=40",
        "loop.steps_per_checkpoint=2", "train.batch_size=8", "loop.max_checkpoints=3")


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
def test_a_dry_run_brings_back_the_networks_and_the_log(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, GPU_TRAIN_DEVICE="cpu", GPU_TRAIN_EVERY="2")
    done = subprocess.run(["bash", str(SCRIPT), str(out), "240", "dry", *TINY], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "dry-train.txt").read_text()
    assert log.startswith("$ azshogi device=cpu run=dry") and "[exit 0 after" in log, log

    with tarfile.open(out / "dry-networks.tar") as tar:
        names = sorted(tar.getnames())
        tar.extractall(tmp_path / "back", filter="data")
    # four spread over three checkpoints are all three, and every second one is among them
    assert names == [f"dry/ckpt-{n:05d}.pt" for n in (1, 2, 3)]
    model, cfg = load_model(tmp_path / "back" / "dry" / "ckpt-00003.pt")
    assert (cfg.model.blocks, cfg.model.channels) == (1, 16) and not model.training

    with tarfile.open(out / "dry-logs.tgz") as tar:
        logs = tar.getnames()
    assert "logs/dry/azshogi.log" in logs and not any("hcpe3" in name for name in logs)
    assert (tmp_path / "logs" / "dry" / "hcpe3").is_dir()  # the records were written, only not packed
