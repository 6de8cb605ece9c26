"""docs/tools/target_entropy.py: the search targets' entropy that docs/experiments/2026-11-28-sharper-targets.md
reads from a run's records."""
from __future__ import annotations

import contextlib
import io
import math
import re

import numpy as np
import pytest
from conftest import docs_tool
from interop_helpers import selfplay_games

TOOL = docs_tool("docs/tools/target_entropy.py")


def test_entropy_is_in_nats_over_each_positions_own_candidates():
    visits = np.array([5, 5, 5, 5, 0, 9, 0, 0, 0, 3, 1], np.uint16)
    offsets = np.array([0, 4, 6, 8, 11])  # uniform over 4; one move; no visits (left out); 3:1
    h = TOOL.entropies(visits, offsets)
    assert h == pytest.approx([math.log(4), 0.0, -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))])


def test_it_reads_a_runs_records_by_checkpoint(tmp_path):
    games, path, _ = selfplay_games(tmp_path, 2, "rules.max_plies=12")
    folder = path.parent
    path.rename(folder / "ckpt-00003.hcpe3")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        TOOL.main([str(folder), "--from", "3", "--to", "3"])
    m = re.search(r"checkpoints 3-3: (\d+) positions in (\d+) games, target entropy ([\d.]+) nats", out.getvalue())
    assert m and int(m.group(2)) == len(games) and int(m.group(1)) == sum(len(g.record.moves) for g in games)
    # the targets the games were trained on, before they were written as whole visit counts
    expected = np.concatenate([TOOL.entropies(g.positions.probs, np.cumsum([0, *g.positions.entry_counts]))
                               for g in games]).mean()
    assert float(m.group(3)) == pytest.approx(expected, abs=0.01)
    with pytest.raises(SystemExit, match="no ckpt-NNNNN.hcpe3 files for checkpoints 4-9"):
        TOOL.main([str(folder), "--from", "4", "--to", "9"])
