"""Untrusted positions are checked before cshogi sees them (its set_sfen can abort the process)."""
import pytest

from azshogi.shogi.positions import (
    STARTPOS_SFEN,
    PositionError,
    board_after,
    parse_position,
    read_openings,
    validate_sfen,
)


@pytest.mark.parametrize("sfen,why", [
    ("garbage", "3 or 4 fields"),
    ("lnsgkgsnl/9/9 b - 1", "9 ranks"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL x - 1", "side to move"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 0", "move number"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN b - 1", "8 squares"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNLL b - 1", "10 squares"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG1GSNL b - 1", "one king"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNK b - 1", "one king"),
    ("lnsg+kgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "cannot be promoted"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 20P 1", "pieces of kind P"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 2X 1", "malformed hands"),
    # one letter twice: cshogi sets up one count or the other (PP: one pawn; 9P9P: nine), not the sum
    ("lnsgkgsnl/1r5b1/9/9/9/9/9/1B5R1/LNSGKGSNL b 9P9P 1", "twice"),
    ("lnsgkgsnl/1r5b1/9/9/9/9/9/1B5R1/LNSGKGSNL b PP 1", "twice"),
    ("lnsgkgsnP/1r5b1/ppppppppp/9/9/9/PPPPPPPP1/1B5R1/LNSGKGSNL b - 1", "last rank"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/4P4/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "nifu"),
    ("4k4/4R4/9/9/9/9/9/9/4K4 b - 1", "not to move is in check"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 extra", "3 or 4 fields"),
    # other scripts' digits, which str.isdigit and int() take and cshogi does not
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - \u00b2", "ASCII"),
    ("lnsgkgsnl/1r5b1/ppppppppp/\uff19/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "ASCII"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b \uff12P 1", "ASCII"),
])
def test_rejects(sfen, why):
    with pytest.raises(PositionError, match=why):
        validate_sfen(sfen)


def test_accepts_and_normalises():
    assert validate_sfen(STARTPOS_SFEN) == STARTPOS_SFEN
    assert validate_sfen("4k4/9/4G4/9/9/9/9/9/4K4 b G") == "4k4/9/4G4/9/9/9/9/9/4K4 b G 1"
    assert validate_sfen("4k4/9/4G4/9/9/9/9/9/4K4 b G2Pp 1") == "4k4/9/4G4/9/9/9/9/9/4K4 b G2Pp 1"  # P and p
    assert parse_position(["sfen", *STARTPOS_SFEN.split(), "moves", "7g7f"]) == (None, ["7g7f"])
    assert parse_position(["startpos"]) == (None, [])


def test_moves_are_checked_against_the_legal_list():
    board = board_after(None, ["7g7f", "3c3d"])
    assert board.move_number == 3 and len(board.history) == 2
    for moves in (["7g7f+"], ["7g7e"], ["P*5e"], ["7g7f", "7g7f"], ["x"]):
        with pytest.raises(PositionError):
            board_after(None, moves)


def test_opening_file(tmp_path):
    path = tmp_path / "openings.txt"
    path.write_text("# a comment\nstartpos moves 7g7f 3c3d\n\nposition sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1\n"
                    "4k4/9/4G4/9/9/9/9/9/4K4 b G 1 moves 5c5b\n")
    openings = read_openings(str(path))
    assert openings[0] == (None, ["7g7f", "3c3d"])
    assert openings[1] == ("4k4/9/4G4/9/9/9/9/9/4K4 b G 1", [])
    assert openings[2][1] == ["5c5b"]
    path.write_text("startpos moves 7g7f 7g7f\n")
    with pytest.raises(PositionError, match="openings.txt:1"):
        read_openings(str(path))
