"""KIF and CSA records say truthfully what ended a game: the rules' words (千日手 at the fourth
occurrence, 反則負け for perpetual check, 持将棋 with its move count) and, for the endings that are
azshogi's self-play's own (a position's first recurrence, mate adjudication), 中断 with a comment
and the result self-play scored. Read back with cshogi's parsers, as a GUI would."""
import pytest
from cshogi import CSA, KIF

from azshogi.formats.files import DataFormatError
from azshogi.formats.records import csa_text, kif_text, read_csa, write_kif
from azshogi.shogi.game_record import GameRecord
from azshogi.shogi.positions import STARTPOS_SFEN
from azshogi.shogi.rules import Termination

ROOKS_BACK_AND_FORTH = ["2h3h", "8b7b", "3h2h", "7b8b"]  # back to the start position
CHECKS = "4k4/9/9/9/9/9/9/9/R3K4 b - 1"  # black's rook can check the king on ranks a and b
PERPETUAL = ["9i9a", "5a5b", "9a9b", "5b5a", "9b9a"]  # checks only: the position after 9i9a recurs
KYO_OCHI = "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"  # white (上手) gave its lance


def kif_winner(text):
    """The winner by a KIF record's result line, read by cshogi's pattern (its parser refuses a
    record from a board diagram): 1 black, 2 white."""
    result = KIF.Parser.RESULT_RE.match(text.splitlines()[-1])
    named = 1 if result.group(3) in "先下" else 2
    return 3 - named if result.group(4) == "反則負け" else named


def test_a_first_recurrence_in_self_play_is_no_sennichite(tmp_path):
    path = tmp_path / "game.kif"
    write_kif(path, GameRecord(ROOKS_BACK_AND_FORTH, Termination.REPETITION))
    text = path.read_bytes().decode("cp932")
    assert "千日手" not in text
    assert text.splitlines()[-3:] == [
        "   5 中断              ( 0:00/00:00:00)",
        "*azshogi self-play: the position recurred: self-play ends a game at a position's first recurrence as a "
        "draw (dlshogi's rule), not at the fourth occurrence (sennichite) that the rules need",
        "まで4手で中断"]
    game = KIF.Parser.parse_str(text)
    assert game.endgame == "%CHUDAN" and game.win is None and len(game.moves) == 4
    csa = CSA.Parser.parse_str(csa_text(ROOKS_BACK_AND_FORTH, Termination.REPETITION))[0]
    assert csa.endgame == "%CHUDAN" and "first recurrence" in csa_text(ROOKS_BACK_AND_FORTH, Termination.REPETITION)


def test_the_fourth_occurrence_is_sennichite():
    text = kif_text(ROOKS_BACK_AND_FORTH * 3, Termination.REPETITION)
    assert text.splitlines()[-1] == "まで12手で千日手" and "中断" not in text
    assert KIF.Parser.parse_str(text).endgame == "%SENNICHITE"
    assert csa_text(ROOKS_BACK_AND_FORTH * 3, Termination.REPETITION).splitlines()[-1] == "%SENNICHITE"


def test_perpetual_check_names_the_checking_side_as_the_loser():
    first = kif_text(PERPETUAL, Termination.PERPETUAL_CHECK, start_sfen=CHECKS)
    assert first.splitlines()[-2].startswith("*azshogi self-play: black repeated the position by continuous checks")
    assert first.splitlines()[-1] == "まで5手で後手の勝ち"
    assert kif_winner(first) == 2  # white
    fourfold = kif_text(PERPETUAL + PERPETUAL[1:] * 2, Termination.PERPETUAL_CHECK, start_sfen=CHECKS)
    assert fourfold.splitlines()[-1] == "まで13手で先手の反則負け"
    assert kif_winner(fourfold) == 2
    # The fourth occurrence reached by the side in check: still the checking side loses.
    evaded = kif_text(["9b9a", "5a5b", "9a9b", "5b5a"] * 3, Termination.PERPETUAL_CHECK,
                      start_sfen="4k4/R8/9/9/9/9/9/9/4K4 b - 1")
    assert evaded.splitlines()[-1] == "まで12手で先手の反則負け"  # cshogi's word alone named white the loser
    assert kif_winner(evaded) == 2
    # CSA: the checking side's illegal action (%+ILLEGAL_ACTION: black's), not a sennichite draw
    for moves in (PERPETUAL + PERPETUAL[1:] * 2, ["9b9a", "5a5b", "9a9b", "5b5a"] * 3):
        start = CHECKS if moves[0] == "9i9a" else "4k4/R8/9/9/9/9/9/9/4K4 b - 1"
        csa = CSA.Parser.parse_str(csa_text(moves, Termination.PERPETUAL_CHECK, start_sfen=start))[0]
        assert (csa.endgame, csa.win) == ("%+ILLEGAL_ACTION", 2)


def test_the_winner_is_named_whoever_moved_first():
    """A game from a position with white to move (a handicap): the result line names the winner
    from the board, not from the move count's parity (cshogi's exporter's way)."""
    for moves, winner in ((["3c3d"], 2), (["3c3d", "2g2f"], 1)):  # the side to move at the end resigns
        for ending in (Termination.RESIGN, Termination.CHECKMATE, Termination.TIME_UP):
            kif = KIF.Parser.parse_str(kif_text(moves, ending, start_sfen=KYO_OCHI))
            csa = CSA.Parser.parse_str(csa_text(moves, ending, start_sfen=KYO_OCHI))[0]
            assert (kif.win, csa.win) == (winner, winner), (moves, ending)


def test_an_engine_that_gave_no_move_lost_on_time():
    text = kif_text(["7g7f"], Termination.TIME_UP)  # white, to move, gave none
    assert text.splitlines()[-2:] == ["   2 切れ負け          ( 0:00/00:00:00)", "まで1手で先手の勝ち"]
    assert csa_text(["7g7f"], Termination.TIME_UP).splitlines()[-1] == "%TIME_UP"


def test_an_impasse_declaration_is_read_back_as_the_declaring_sides_win():
    for moves, winner in (([], 1), (["2h3h"], 2)):  # the side to move declares
        text = kif_text(moves, Termination.IMPASSE)
        assert text.splitlines()[-1].endswith(("先手" if winner == 1 else "後手") + "の入玉勝ち")
        assert text.splitlines()[-2].split()[1] == "入玉勝ち"  # KIF's word; cshogi's exporter wrote 入玉宣言
        assert KIF.Parser.parse_str(text).win == winner
        assert CSA.Parser.parse_str(csa_text(moves, Termination.IMPASSE))[0].win == winner


def test_mate_adjudication_has_a_result_line_and_says_it_was_adjudicated():
    moves = ["7g7f", "3c3d", "8h2b+"]  # white to move (it is not mate: the adjudication's words only)
    text = kif_text(moves, Termination.MATE_ADJUDICATION)
    assert text.splitlines()[-2:] == [
        "*adjudicated: white, to move, has a forced mate and is scored the winner (azshogi's "
        "rules.mate_adjudication_plies, or dlshogi's root mate search)",
        "まで3手で後手の勝ち"]
    assert KIF.Parser.parse_str(text).win == 2
    csa = csa_text(moves, Termination.MATE_ADJUDICATION)  # no mate to play out: %CHUDAN, no winner
    assert csa.splitlines()[-2].startswith("'adjudicated: white") and csa.endswith("%CHUDAN\n")


def test_a_csa_record_plays_out_an_adjudicated_mate_so_that_readers_score_its_winner():
    for start, winner in (("4k4/9/4G4/9/9/9/9/9/4K4 b G 1", 1), ("4k4/9/9/9/9/9/4g4/9/4K4 w g 1", 2)):
        csa = csa_text([], Termination.MATE_ADJUDICATION, start_sfen=start)
        assert "was found by df-pn when this record was written, not played" in csa
        game = CSA.Parser.parse_str(csa)[0]
        assert (game.endgame, game.win, len(game.moves)) == ("%TORYO", winner, 1), start


def test_csa_records_say_their_version_and_encoding_and_keep_comments_on_their_line():
    csa = csa_text(["7g7f"], Termination.RESIGN, names=("先手の名", "b"), comment="'quoted\nsecond line")
    assert csa.splitlines()[:5] == ["'CSA encoding=UTF-8", "V2.2", "N+先手の名", "N-b", "''quoted second line"]
    game = CSA.Parser.parse_str(csa)[0]  # the comment once ran into the next line (PI), which crashed the parser
    assert game.names == ["先手の名", "b"] and len(game.moves) == 1 and game.win == 1  # white resigned


def test_a_kif_record_names_a_standard_handicap_and_marks_any_other_start():
    text = kif_text(["9a9b"], Termination.RESIGN, start_sfen=KYO_OCHI)
    assert "手合割：香落ち" in text.splitlines()
    game = KIF.Parser.parse_str(text)
    assert game.sfen == KYO_OCHI and game.win == 2 and len(game.moves) == 1
    assert "手合割：平手" in kif_text(["7g7f"], Termination.RESIGN, start_sfen=STARTPOS_SFEN)
    # Any other start: a diagram after 手合割：その他, which cshogi's parser refuses; it read the
    # moves from the initial position before (9i9a there is no move at all).
    other = kif_text(PERPETUAL[:1], Termination.RESIGN, start_sfen=CHECKS)
    assert other.splitlines()[1] == "手合割：その他" and "後手の持駒：なし" in other
    with pytest.raises(KIF.ParserException, match="other"):
        KIF.Parser.parse_str(other)


def test_an_illegal_move_is_the_movers_loss_by_its_own_word():
    text = kif_text(["7g7f"], Termination.ILLEGAL_MOVE)  # white, to move, tried an illegal move
    assert text.splitlines()[-2:] == ["   2 反則負け          ( 0:00/00:00:00)", "まで1手で後手の反則負け"]
    assert KIF.Parser.parse_str(text).win == 1
    game = CSA.Parser.parse_str(csa_text(["7g7f"], Termination.ILLEGAL_MOVE))[0]
    assert (game.endgame, game.win) == ("%ILLEGAL_MOVE", 1)


def test_the_ply_limit_counts_the_moves_played():
    text = kif_text(ROOKS_BACK_AND_FORTH[:3], Termination.MAX_PLIES)
    assert text.splitlines()[-3:] == ["   4 持将棋            ( 0:00/00:00:00)", "*the ply limit: a draw",
                                      "まで3手で持将棋"]  # cshogi's exporter says 5


def test_csa_files_are_read_in_their_encoding_with_every_move_checked(tmp_path):
    """Shift_JIS with CRLF (CSA's encoding before 3.0, Windows GUIs' files), a byte-order mark,
    the encoding line's own; every game of a file; an illegal move names the file, game and move
    (cshogi reads it as move 0, which corrupts the board after it)."""
    text = csa_text(["7g7f", "3c3d"], Termination.RESIGN, names=("先手", "後手")).split("\n", 1)[1]
    (tmp_path / "sjis.csa").write_bytes(text.replace("\n", "\r\n").encode("cp932"))
    (tmp_path / "bom.csa").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (tmp_path / "named.csa").write_bytes(("'CSA encoding=SHIFT_JIS\n" + text).encode("cp932"))
    for name in ("sjis.csa", "bom.csa", "named.csa"):
        (game,) = read_csa(tmp_path / name)
        assert (game.names, len(game.moves), game.result) == (("先手", "後手"), 2, "white"), name
    draw = csa_text(["7g7f"], Termination.MAX_PLIES).split("\n", 1)[1]
    (tmp_path / "two.csa").write_text(text + "/\n" + draw.split("\n", 1)[1] + "/\n" + draw)
    assert [g.result for g in read_csa(tmp_path / "two.csa")] == ["white", "draw", "draw"]
    chudan = csa_text(ROOKS_BACK_AND_FORTH, Termination.REPETITION)
    (tmp_path / "chudan.csa").write_text(chudan)
    assert read_csa(tmp_path / "chudan.csa")[0].result is None  # no result, not a draw
    (tmp_path / "illegal.csa").write_text("V2.2\nN+a\nN-b\nPI\n+\n+7776FU\n-3334FU\n+7776FU\n%TORYO\n")
    with pytest.raises(DataFormatError, match=r"illegal\.csa: game 1, move 3: illegal"):
        read_csa(tmp_path / "illegal.csa")
    (tmp_path / "undecodable.csa").write_bytes(b"V2.2\nN+\x81 \nPI\n+\n%TORYO\n")  # neither UTF-8 nor cp932
    with pytest.raises(DataFormatError, match=r"undecodable\.csa: not CSA text"):
        read_csa(tmp_path / "undecodable.csa")
