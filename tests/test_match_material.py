"""docs/tools/match_material.py: the material a player gave away in its matches, which
docs/experiments/2026-11-28-sharper-targets.md reads from an arena's records."""
from __future__ import annotations

import contextlib
import io

import cshogi
import pytest
from conftest import docs_tool

from azshogi.formats.records import csa_text
from azshogi.shogi.rules import Termination

TOOL = docs_tool("docs/tools/match_material.py")
# black's bishop takes white's and promotes (+8 on the board, +8 into the hand, +2 promoting),
# white's silver takes the horse back (+10 on the board, +8 into the hand: a bishop in hand)
TRADE = ["7g7f", "3c3d", "8h2b+", "3a2b"]


def test_the_balance_is_the_players_own_gain_ply_by_ply():
    board = cshogi.Board()
    moves = []
    for usi in TRADE:
        moves.append(board.move_from_usi(usi))
        board.push(moves[-1])
    assert TOOL.balances(moves, 0, [2, 3, 4, 40]) == [0, 18, 0, 0]
    assert TOOL.balances(moves, 1, [3]) == [-18]
    assert TOOL.balances(moves[1:], 1, [2], first=1) == [-18]  # a record whose first mover is white


def test_it_reads_results_and_sides_from_the_records(tmp_path):
    # after 3 plies white (to move) resigns, a bishop down: "search" wins as black, loses as white
    (tmp_path / "a.csa").write_text(csa_text(TRADE[:3], Termination.RESIGN, names=("search:x", "greedy")))
    (tmp_path / "b.csa").write_text(csa_text(TRADE[:3], Termination.RESIGN, names=("greedy", "search:x")))
    (tmp_path / "c.csa").write_text(csa_text(TRADE, Termination.MAX_PLIES, names=("search:x", "greedy")))
    skipped: list = []
    games = sorted(TOOL.read_games(tmp_path, "search", [3, 4], skipped))
    assert games == [("draw", [18, 0]), ("loss", [-18, -18]), ("win", [18, 18])] and not skipped
    # every game of a file (/ between games) is read; one that gives no result is left out, not a draw
    two = csa_text(TRADE[:3], Termination.RESIGN, names=("search:x", "greedy"))
    (tmp_path / "d.csa").write_text(two + "/\n" + two.split("\n", 1)[1] + "/\n"
                                    + csa_text(TRADE[:2], Termination.REPETITION, names=("search:x", "greedy")))
    assert sorted(TOOL.read_games(tmp_path, "search", [3], skipped)) == [
        ("draw", [18]), ("loss", [-18]), ("win", [18]), ("win", [18]), ("win", [18])]
    assert skipped == [tmp_path / "d.csa"]  # the first recurrence: %CHUDAN
    (tmp_path / "d.csa").unlink()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        TOOL.main([str(tmp_path), "--player", "greedy", "--plies", "1,3,4"])
    assert "loss: 1 games, median 0, -18, -18; 100% more than 10 behind at ply 3" in out.getvalue()
    with pytest.raises(SystemExit, match="no game .* has a player named nobody"):
        TOOL.main([str(tmp_path), "--player", "nobody"])
