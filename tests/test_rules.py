"""How games end, from SFEN fixtures."""
import cshogi
import pytest

from azshogi.shogi.rules import Rules, Termination, outcome, winner

RULES = Rules(max_plies=320, impasse_rule=27)


def board_after(sfen, moves=()):
    board = cshogi.Board(sfen) if sfen else cshogi.Board()
    for usi in moves:
        board.push_usi(usi)
    return board


def test_checkmate_loses_for_the_side_to_move():
    # White king 5a, black gold 5b protected by the pawn on 5c: white has no legal move.
    board = board_after("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    end = outcome(board, 10, RULES)
    assert end.termination == Termination.CHECKMATE and end.value == -1
    assert winner(board.turn, end.value) == cshogi.BLACK


def test_repetition_is_a_draw():
    board = board_after(None, ["5i5h", "5a5b", "5h5i", "5b5a"])
    end = outcome(board, 4, RULES)
    assert end.termination == Termination.REPETITION
    assert end.value == 0 and winner(board.turn, end.value) is None


def test_no_repetition_without_history():
    # The same position set from SFEN has no history: the game goes on.
    assert outcome(board_after(cshogi.STARTING_SFEN), 4, RULES) is None


def test_perpetual_check_loses_for_the_checker():
    # Black checks with the rook from 2i and 1i while the white king shuffles 2a-1a.
    board = board_after("7k1/9/9/9/9/9/9/9/K7R b - 1", ["1i2i", "2a1a", "2i1i", "1a2a"])
    end = outcome(board, 4, RULES)
    assert end.termination == Termination.PERPETUAL_CHECK
    assert board.turn == cshogi.BLACK and end.value == -1  # black gave the checks and loses


IMPASSE = "LNSG1GSNL/1R2K2B1/PPPPPPPPP/9/9/9/9/9/4k4 b P 1"  # black: 28 points, 19 pieces in the zone


def test_impasse_declaration_wins_under_the_27_point_rule():
    end = outcome(board_after(IMPASSE), 100, RULES)
    assert end.termination == Termination.IMPASSE and end.value == 1


def test_impasse_rule_is_configurable():
    # 28 points is only a draw-level declaration under the 24-point rule: no win, the game goes on.
    assert outcome(board_after(IMPASSE), 100, Rules(impasse_rule=24)) is None


def test_maximum_plies_is_a_draw():
    board = board_after(None, ["7g7f", "3c3d"])
    assert outcome(board, 2, Rules(max_plies=3)) is None
    end = outcome(board, 3, Rules(max_plies=3))
    assert end.termination == Termination.MAX_PLIES and end.value == 0


@pytest.mark.parametrize("plies", [1, 3])
def test_mate_adjudication(plies):
    # Black to move drops the gold on 5b: mate in one.
    board = board_after("4k4/9/4P4/9/9/9/9/9/4K4 b G 1")
    assert outcome(board, 1, RULES) is None
    end = outcome(board, 1, RULES, mate_plies=plies)
    assert end.termination == Termination.MATE_ADJUDICATION and end.value == 1


def test_a_referee_counting_occurrences_ends_a_repetition_at_the_fourth():
    shuffle = ["5i5h", "5a5b", "5h5i", "5b5a"]
    board = board_after(None, shuffle)
    assert outcome(board, 4, RULES, occurrences=2) is None  # the second occurrence: play on
    assert outcome(board, 4, RULES, occurrences=3) is None
    end = outcome(board_after(None, shuffle * 3), 12, RULES, occurrences=4)
    assert end.termination == Termination.REPETITION and end.value == 0


def test_a_referee_ends_a_perpetual_check_at_the_fourth_occurrence_against_the_checker():
    checks = ["1i2i", "2a1a", "2i1i", "1a2a"]
    board = board_after("7k1/9/9/9/9/9/9/9/K7R b - 1", checks)
    assert outcome(board, 4, RULES, occurrences=2) is None
    board = board_after("7k1/9/9/9/9/9/9/9/K7R b - 1", checks * 3)
    end = outcome(board, 12, RULES, occurrences=4)
    assert end.termination == Termination.PERPETUAL_CHECK
    assert winner(board.turn, end.value) == cshogi.WHITE  # black gave the checks and loses


def test_an_impasse_ends_the_game_unless_a_player_must_declare_it():
    from azshogi.shogi.rules import declaration_wins

    board = board_after(IMPASSE)  # black may declare under the 27-point rule
    assert declaration_wins(board, RULES)
    assert outcome(board, 100, RULES).termination == Termination.IMPASSE
    assert outcome(board, 100, RULES, occurrences=1, impasse=False) is None
