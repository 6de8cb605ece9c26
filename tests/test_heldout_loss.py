"""docs/tools/heldout_loss.py, the held-out loss diagnostic docs/strength.md quotes."""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import docs_tool, replay_window

from azshogi.formats import checkpoint as ckpt
from azshogi.train.loop import train

TOOL = Path(__file__).resolve().parents[1] / "docs" / "tools" / "heldout_loss.py"


class SureOfTheSideToMove(torch.nn.Module):
    """A network that says the side to move wins (win rate sigmoid(30)) and knows no move."""

    def forward(self, features1, features2):
        n = features1.shape[0]
        return torch.zeros(n, 2187), torch.full((n, 1), 30.0)


def test_scores_the_newest_positions_of_a_run_from_the_side_to_move(tiny_config, tmp_path, tiny_run, capsys,
                                                                   monkeypatch):
    train(tiny_config("loop.max_checkpoints=2"), show_progress=False)  # tiny_run goes on to checkpoint 2
    run = tmp_path / "checkpoints" / "t"
    last = run / "ckpt-00002.pt"
    segments = ckpt.load(last)["replay"]["segments"]
    heldout = docs_tool("docs/tools/heldout_loss.py")
    batch, weight, read = heldout.newest_positions(last, 1)
    assert read == 1 and weight == 0.0  # the tiny run's value target is the result alone
    assert len(batch.result) == segments[-1]["count"]
    window = replay_window(last)
    assert np.array_equal(batch.result, window.results[-len(batch.result):].astype(np.float32))

    # the side to move "always wins": nothing lost on its wins, 30 nats on its losses, 15 on draws
    scores = heldout.scores(SureOfTheSideToMove(), batch, weight)
    losses, draws = np.mean(batch.result == -1), np.mean(batch.result == 0)
    assert scores["result"] == scores["value"]
    assert math.isclose(scores["result"], 30 * losses + 15 * draws, rel_tol=1e-4, abs_tol=1e-4)
    assert math.isclose(scores["policy"], math.log(2187), rel_tol=1e-5)  # uniform over the labels

    done = subprocess.run([sys.executable, str(TOOL), "--positions", str(last), "--newest", "2",
                           str(run / "ckpt-00001.pt"), str(last)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    total = sum(s["count"] for s in segments[-2:])
    assert re.search(rf"^positions: {total} from the newest 2 segment", done.stdout, re.M), done.stdout
    figures = re.findall(r"value loss ([\d.]+), vs result ([\d.]+), policy ([\d.]+)$", done.stdout, re.M)
    assert len(figures) == 2 and all(0 < float(x) < 20 for row in figures for x in row), done.stdout

    # growth_check.py (nn/growth.py's diagnostic) on the same run: trained on checkpoint 1's
    # window, scored on checkpoint 2's newest segment; the grown net starts at the old one's loss
    monkeypatch.syspath_prepend(str(TOOL.parent))
    growth = docs_tool("docs/tools/growth_check.py")
    assert growth.main([str(run / "ckpt-00001.pt"), "--positions", str(last), "--blocks", "2", "--channels", "24",
                        "--steps", "2", "--every", "1"]) == 0
    rows = re.findall(r"^\s*(\d+)((?:\s+[\d.]+ / [\d.]+){4})$", capsys.readouterr().out, re.M)
    assert [int(step) for step, _ in rows] == [0, 1, 2]
    start = [float(x) for x in re.findall(r"[\d.]+", rows[0][1])]  # old, grown, fresh, distilled: value / policy
    assert start[2:4] == pytest.approx(start[0:2], abs=2e-3) and start[4:6] != pytest.approx(start[0:2], abs=2e-3)
    assert start[6:8] == start[4:6]  # the distilled network starts as the fresh one; only its targets differ
    moved = [float(x) for x in re.findall(r"[\d.]+", rows[2][1])]
    assert moved[6:8] != moved[4:6]

    # distilled targets: the teacher's share of them is the teacher's policy and value, from the
    # side to move; the rest the run's own
    batch, weight, _ = heldout.newest_positions(last, 1)
    teacher = SureOfTheSideToMove()
    own = heldout.value_target(batch, weight)
    for share in (0.0, 0.25, 1.0):
        taught = growth.distilled(batch, teacher, share, weight)
        assert np.allclose(heldout.value_target(taught, weight), share * 1.0 + (1 - share) * own, atol=1e-6)
        assert np.allclose(heldout.value_target(taught, 0.7), heldout.value_target(taught, weight))
        assert np.allclose(taught.policy, share / 2187 + (1 - share) * batch.policy, atol=1e-7)
        assert np.allclose(taught.policy.sum(axis=1), 1.0, atol=1e-5)
