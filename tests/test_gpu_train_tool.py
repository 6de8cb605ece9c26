"""docs/tools/gpu_train.sh, dry-run on the CPU (GPU_TRAIN_DEVICE=cpu): it trains the run it is given and
brings back what matches elsewhere need, the networks of its checkpoints in one tar and its log without the
hcpe3 records; stopped by its time limit, it still does; it refuses to train over a run that exists."""
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "tools" / "gpu_train.sh"
TINY = ("+experiment=smoke", "search.num_simulations=2", "search.max_num_considered_actions=2", "selfplay.num_actors=8",
        "rules.max_plies=12", "loop.positions_per_checkpoint=16", "loop.steps_per_checkpoint=2", "train.batch_size=8")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a bash script")


def gpu_train(folder: Path, seconds: int, run: str, *overrides: str, **env: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, GPU_TRAIN_DEVICE="cpu", **env)
    return subprocess.run(["bash", str(SCRIPT), str(folder / "out"), str(seconds), run, *overrides], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)


def networks(tar_file: Path) -> dict[str, dict]:
    with tarfile.open(tar_file) as tar:
        return {m.name: torch.load(io.BytesIO(tar.extractfile(m).read()), weights_only=False)
                for m in tar.getmembers()}


def test_a_run_that_ends_brings_back_its_networks_and_its_log(tmp_path):
    done = gpu_train(tmp_path, 240, "dry", *TINY, "loop.max_checkpoints=7", GPU_TRAIN_EVERY="3")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "out" / "dry-train.txt").read_text()
    assert log.startswith("$ azshogi device=cpu run=dry") and "[exit 0 after" in log, log

    # four spread over seven checkpoints (1, 3, 5, 7) and every third (3, 6): the networks alone
    back = networks(tmp_path / "out" / "dry-networks.tar")
    assert sorted(back) == [f"dry/ckpt-{n:05d}.pt" for n in (1, 3, 5, 6, 7)]
    assert all(set(state) == {"model", "config"} for state in back.values())
    assert back["dry/ckpt-00007.pt"]["config"]["model"]["channels"] == 16

    with tarfile.open(tmp_path / "out" / "dry-logs.tgz") as tar:
        logs = tar.getnames()
    assert "logs/dry/azshogi.log" in logs and not any("hcpe3" in name for name in logs)
    assert (tmp_path / "logs" / "dry" / "hcpe3").is_dir()  # the records were written, only not packed


def test_a_run_stopped_by_the_time_limit_leaves_its_partial_checkpoint_out(tmp_path):
    done = gpu_train(tmp_path, 10, "cut", *TINY, "loop.max_checkpoints=0")  # started in 2-4 s
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[exit 124 after" in (tmp_path / "out" / "cut-train.txt").read_text()
    assert any(p.name.endswith("-partial.pt") for p in (tmp_path / "checkpoints" / "cut").iterdir())
    assert not any("partial" in name for name in networks(tmp_path / "out" / "cut-networks.tar"))


def test_it_refuses_to_train_over_a_run_or_outside_its_folders(tmp_path):
    kept = tmp_path / "checkpoints" / "mine" / "ckpt-00001.pt"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"a user's checkpoint")
    done = gpu_train(tmp_path, 60, "mine", *TINY)
    assert done.returncode == 1 and "checkpoints/mine or logs/mine exists" in done.stderr
    assert kept.read_bytes() == b"a user's checkpoint"
    done = gpu_train(tmp_path, 60, "other", *TINY, f"checkpoint_root={tmp_path / 'elsewhere'}")
    assert done.returncode == 1 and "checkpoint_root=" in done.stderr
    assert not (tmp_path / "out").exists()
