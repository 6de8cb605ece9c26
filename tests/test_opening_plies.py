"""Opening diversity (selfplay.opening_random_plies): each self-play game starts with 0..N
uniformly random legal plies, drawn from its own stream, in its record (KIF, hcpe3) but not as
training positions; the walk never ends a game. (The setting's check: test_resignation.py.)"""
from __future__ import annotations

import cshogi
import numpy as np
from test_resignation import ValueSearch, play
from test_training_targets import HELPMATE

from azshogi.formats.dlshogi import Hcpe3Writer, positions_from_file
from azshogi.selfplay.actors import SelfPlay
from azshogi.shogi.rules import Rules, random_plies


def neutral(turn: int, ply: int) -> float:
    return 0.0


def opening_selfplay(seed: int, plies: int = 6, actors: int = 8) -> SelfPlay:
    return SelfPlay(ValueSearch(neutral), Rules(max_plies=16), actors, seed=seed, opening_plies=plies)


def test_opening_plies_are_random_legal_recorded_and_no_training_positions(tmp_path):
    games = play(opening_selfplay(0), 40)
    openings = []
    for game in games:
        k = int(game.positions.plies[0])  # the first searched ply: the opening's length
        assert 0 <= k <= 6 and game.positions.plies.tolist() == list(range(k, len(game.record)))
        board = cshogi.Board()
        for usi in game.record.moves:  # the record holds the opening: legal from the initial position
            move = board.move_from_usi(usi)
            assert move and board.is_legal(move)
            board.push(move)
        openings.append(tuple(game.record.moves[:k]))
    lengths = [len(o) for o in openings]
    assert set(lengths) == set(range(7))  # every length in 0..6 drawn
    assert len(set(o for o in openings if len(o) >= 2)) == sum(n >= 2 for n in lengths)  # all different
    # hcpe3 keeps the whole game from the initial position, and the same training positions.
    writer = Hcpe3Writer()
    for game in games[:5]:
        writer.add(game)
    back = positions_from_file(writer.flush(tmp_path / "g.hcpe3"), range(5))
    for game, read in zip(games[:5], back):
        assert read.plies.tolist() == game.positions.plies.tolist()
        assert np.array_equal(read.hcps, game.positions.hcps)


def test_reproducible_with_a_seed():
    def records(seed):
        return [(g.game_id, g.record.moves) for g in play(opening_selfplay(seed), 10)]

    assert records(3) == records(3) != records(4)


def test_off_plays_from_the_initial_position():
    games = play(opening_selfplay(0, plies=0, actors=2), 3)
    assert all(g.positions.plies[0] == 0 for g in games)


class Picks:
    """A stand-in random stream that picks given moves (USI) among the legal ones, in turn."""

    def __init__(self, board: cshogi.Board, moves: list[str]):
        self.board, self.moves = board, iter(moves)

    def integers(self, n: int) -> int:
        legal = list(self.board.legal_moves)
        assert len(legal) == n
        return legal.index(self.board.move_from_usi(next(self.moves)))


def test_a_random_ply_that_would_end_the_game_is_taken_back():
    board = cshogi.Board()
    moves = random_plies(board, 10, Picks(board, HELPMATE), Rules())
    assert moves == HELPMATE[:-1] and board.move_number == len(HELPMATE)  # the mating move taken back
    assert not board.is_game_over()
