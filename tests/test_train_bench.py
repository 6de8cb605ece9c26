"""azshogi-bench bench.train=true (train/train_bench.py): the training step's parts and its host
syncs, as the loop takes them (speed itself is measured, not tested)."""
import io
import json
import subprocess
import sys

import numpy as np
from conftest import TINY

from azshogi.train import train_bench

SHORT = ["bench.train=true", "bench.seconds=0.2", "bench.warmup_seconds=0.1", "bench.repeats=1",
         "bench.train_positions=300", "train.log_every=4"]


def test_the_training_bench_times_the_step_and_counts_one_sync_per_read_back(tiny_config):
    out = io.StringIO()
    result = train_bench.run(tiny_config(*SHORT, "train.mirror=true", "bench.warmup_seconds=0"), out)
    assert json.loads(out.getvalue().strip().splitlines()[-1]) == result
    assert result["mode"] == "train" and result["replay_window"] == "host" and result["positions"] == 300
    assert result["ms_per_step"] > 0 and result["assemble_ms"] > 0 and result["step_ms"] > 0
    # 8 steps as the loop takes them, the losses read back at 2 of them: one sync each
    assert result["host_syncs_per_step"] == 0.25 and result["host_syncs_max_step"] == 1
    assert result["host_sync_ops"] == {"read_back": 2}


def test_random_game_positions_are_legal_training_positions():
    games = train_bench.random_game_positions(300, seed=1)
    assert sum(len(g) for g in games) == 300 and len(games) >= 2  # games of at most 256 plies
    for g in games:
        assert np.all((1 <= g.entry_counts) & (g.entry_counts <= train_bench.POLICY_MOVES))
        assert np.allclose(np.add.reduceat(g.probs, g.offsets()[:-1]), 1.0, atol=1e-5)


def test_azshogi_bench_runs_it_with_the_window_on_the_device_and_draws_by_surprise_without_a_sync(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", *TINY, *SHORT, "device=cpu",
                           "train.replay_window=device", "train.surprise_weight=0.5"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["replay_window"] == "device" and result["upload_us_per_position"] > 0
    assert result["surprise_weight"] == 0.5 and result["score_us_per_position"] > 0
    assert result["host_syncs_per_step"] == 0.25 and result["host_syncs_max_step"] == 1
