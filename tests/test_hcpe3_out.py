"""Self-play games written as dlshogi hcpe3, checked by a reader written here from the format
description alone (numpy structured dtypes), not with azshogi's reader."""
from __future__ import annotations

import math

import cshogi
import numpy as np
import pytest
from cshogi import dlshogi
from interop_helpers import (
    CHECKMATE,
    IMPASSE,
    PERPETUAL_CHECK,
    REPETITION,
    play_script,
    selfplay_games,
)

from azshogi.formats.dlshogi import Hcpe3Writer, load_positions, read_hcpe3
from azshogi.shogi import features
from azshogi.shogi.rules import Rules, Termination, outcome

# --- the format, as REFERENCE.md and dlshogi's cppshogi.h describe it ---
HEADER = np.dtype([("hcp", "u1", 32), ("moveNum", "<u2"), ("result", "u1"), ("opponent", "u1")])
MOVE_INFO = np.dtype([("selectedMove16", "<u2"), ("eval", "<i2"), ("candidateNum", "<u2")])
MOVE_VISITS = np.dtype([("move16", "<u2"), ("visitNum", "<u2")])
SENNICHITE, NYUGYOKU, MAXMOVE = 0x4, 0x8, 0x10
EXPECTED_FLAGS = {Termination.REPETITION: SENNICHITE, Termination.IMPASSE: NYUGYOKU,
                  Termination.MAX_PLIES: MAXMOVE}  # every other ending: the winner bits only


def read_games(data: bytes) -> list[dict]:
    games, pos = [], 0
    while pos < len(data):
        header = np.frombuffer(data, HEADER, count=1, offset=pos)[0]
        pos += HEADER.itemsize
        moves = []
        for _ in range(int(header["moveNum"])):
            info = np.frombuffer(data, MOVE_INFO, count=1, offset=pos)[0]
            pos += MOVE_INFO.itemsize
            k = int(info["candidateNum"])
            candidates = np.frombuffer(data, MOVE_VISITS, count=k, offset=pos)
            pos += k * MOVE_VISITS.itemsize
            moves.append((int(info["selectedMove16"]), int(info["eval"]), candidates))
        games.append({"hcp": header["hcp"].copy(), "result": int(header["result"]),
                      "opponent": int(header["opponent"]), "moves": moves})
    assert pos == len(data)
    return games


def check_game(game: dict, finished, rules: Rules) -> None:
    """The record replays legally to the same end; result byte, evals and candidate visits
    agree with what self-play kept; the moves that are no training position (playout caps'
    cheap searches) have no candidates and eval 0."""
    record = finished.positions
    board = cshogi.Board()
    board.set_hcp(game["hcp"])
    recorded_start = len(record) and record.plies[0] == 0  # else the initial position, self-play's
    np.testing.assert_array_equal(game["hcp"], record.hcps[0] if recorded_start else features.hcp_of(cshogi.Board()))
    assert game["opponent"] == 0
    assert len(game["moves"]) == finished.length
    position = {int(ply): r for r, ply in enumerate(record.plies)}
    for ply, (move16, score, candidates) in enumerate(game["moves"]):
        legal = {m & 0xFFFF: m for m in board.legal_moves}
        assert move16 in legal, f"move {ply} is illegal"
        assert cshogi.move_to_usi(legal[move16]) == finished.record.moves[ply]
        if ply not in position:
            assert score == 0 and len(candidates) == 0
            board.push(legal[move16])
            continue
        i = position[ply]
        np.testing.assert_array_equal(features.hcp_of(board), record.hcps[i])
        p = (float(record.root_values[i]) + 1) / 2
        expected = 30000 if p >= 1 else -30000 if p <= 0 else 756.0864962951762 * math.log(p / (1 - p))
        assert abs(score - max(-30000, min(30000, expected))) <= 1
        # Candidate visits reproduce the stored (improved-policy) target.
        lo, hi = record.offsets()[i], record.offsets()[i + 1]
        target = dict(zip(record.labels[lo:hi].tolist(), record.probs[lo:hi].tolist()))
        visits = candidates["visitNum"].astype(np.float64)
        assert len(candidates) >= 1 and visits.min() >= 1
        got = {}
        for c16, v in zip(candidates["move16"].tolist(), visits / visits.sum()):
            assert c16 in legal, f"move {ply}: illegal candidate"
            got[dlshogi.make_move_label(legal[c16], board.turn)] = v
        assert set(got) <= set(target)
        for label, prob in target.items():
            assert abs(got.get(label, 0.0) - prob) < 3e-5
        board.push(legal[move16])
    end = outcome(board, len(game["moves"]), rules)
    assert end is not None and end.termination == finished.record.termination
    win = {None: 0, cshogi.BLACK: 1, cshogi.WHITE: 2}[finished.record.winner]
    assert game["result"] & 0x3 == win
    assert game["result"] & ~0x3 == EXPECTED_FLAGS.get(finished.record.termination, 0)


def test_gumbel_selfplay_games_read_back_with_an_independent_reader(tmp_path):
    finished, path, rules = selfplay_games(tmp_path, 3, "rules.max_plies=12")
    games = read_games(path.read_bytes())
    assert len(games) == len(finished)
    for game, done in zip(games, finished):
        check_game(game, done, rules)
    assert [g.record.moves for g in read_hcpe3(path)] == [f.record.moves for f in finished]


def test_cheap_searches_are_written_as_moves_without_candidates(tmp_path):
    # Playout-cap randomization: about half the moves are cheap searches, no training positions.
    # Each game is written whole (it replays to its end), its training positions with their
    # targets; azshogi's reader (the loop's seeding, azshogi-pretrain) takes back exactly those.
    finished, path, rules = selfplay_games(tmp_path, 4, "rules.max_plies=16", "selfplay.cheap_search_prob=0.5",
                                           "selfplay.cheap_simulations=1")
    for game, done in zip(read_games(path.read_bytes()), finished):
        check_game(game, done, rules)
    recorded, moves = sum(len(f.positions) for f in finished), sum(f.length for f in finished)
    assert 0.25 * moves < recorded < 0.75 * moves
    assert [g.record.moves for g in read_hcpe3(path)] == [f.record.moves for f in finished]
    back = load_positions([path])
    kept = [f.positions for f in finished if len(f.positions)]
    assert len(back) == len(kept)
    for ours, record in zip(back, kept):
        assert ours.plies.tolist() == record.plies.tolist()
        np.testing.assert_array_equal(ours.hcps, record.hcps)
        np.testing.assert_array_equal(ours.results, record.results)


@pytest.mark.parametrize("script", [PERPETUAL_CHECK, IMPASSE, CHECKMATE, REPETITION,
                                    (None, ["7g7f", "3c3d", "8h2b+", "3a2b", "B*4e", "8c8d"])],
                         ids=["perpetual_check", "impasse", "checkmate", "repetition", "max_plies"])
def test_result_flags_follow_the_termination(tmp_path, script):
    rules = Rules(max_plies=6)
    finished = play_script(*script, rules, np.random.default_rng(1))
    writer = Hcpe3Writer()
    writer.add(finished)
    path = writer.flush(tmp_path / "g.hcpe3")
    (game,) = read_games(path.read_bytes())
    check_game(game, finished, rules)
    (ours,) = read_hcpe3(path)  # azshogi's reader finds the same ending
    assert ours.record == finished.record  # the same moves, start, ending and winner


def test_a_stop_appends_to_the_partial_file(tmp_path):
    rules = Rules(max_plies=6)
    path = tmp_path / "ckpt-00003-partial.hcpe3"
    writer = Hcpe3Writer()
    for script in (CHECKMATE, IMPASSE):
        writer.add(play_script(*script, rules, np.random.default_rng(2)))
        writer.flush(path, append=True)
    assert [g.termination for g in read_hcpe3(path)] == [Termination.CHECKMATE, Termination.IMPASSE]
    writer.add(play_script(*REPETITION, rules, np.random.default_rng(2)))
    writer.flush(path)  # a full checkpoint's file replaces
    assert [g.termination for g in read_hcpe3(path)] == [Termination.REPETITION]
