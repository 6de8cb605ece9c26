"""Game records in the formats shogi GUIs read: KIF (cshogi's exporter) and CSA, and CSA read back."""
from __future__ import annotations

import collections
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

import cshogi
from cshogi import CSA, KIF

from azshogi.formats.files import DataFormatError, write_atomically
from azshogi.shogi.game_record import GameRecord
from azshogi.shogi.rules import FOURFOLD, Termination, mate_line

# How each ending is written. KIF's words are from the view of cshogi's exporter: 'resign' =
# the side to move resigned, 'illegal_lose' / 'illegal_win' = the last mover lost / won by an
# illegal action (perpetual check). The words of _KIF_OWN are written here: cshogi's exporter
# lacks them, or writes 入玉宣言, a word KIF readers do not know. The endings that are not the
# rules' own are written below.
_KIF_END = {
    Termination.CHECKMATE: "resign",
    Termination.RESIGN: "resign",
    Termination.REPETITION: "sennichite",
    Termination.IMPASSE: "win",
    Termination.TIME_UP: "time_up",
    Termination.ILLEGAL_MOVE: "illegal_move",
}
_KIF_OWN = {"time_up": "切れ負け", "illegal_move": "反則負け", "win": "入玉勝ち"}  # the side to move's loss / win
_CSA_END = {
    Termination.CHECKMATE: "%TORYO",
    Termination.RESIGN: "%TORYO",
    Termination.REPETITION: "%SENNICHITE",
    Termination.PERPETUAL_CHECK: "%SENNICHITE",
    Termination.IMPASSE: "%KACHI",
    Termination.MAX_PLIES: "%JISHOGI",
    Termination.IMPASSE_DRAW: "%JISHOGI",
    Termination.MATE_ADJUDICATION: "%CHUDAN",
    Termination.TIME_UP: "%TIME_UP",
    Termination.ILLEGAL_MOVE: "%ILLEGAL_MOVE",
}
# A mate adjudication's line, played out in CSA records (CSA has no ending for a side to move that
# wins): df-pn's node limit, far more than a mate within config.MAX_MATE_PLIES needs.
_MATE_NODES = 1_000_000
_SIDE = {cshogi.BLACK: ("先手", "black"), cshogi.WHITE: ("後手", "white")}


@dataclass(frozen=True)
class _Ending:
    """How a game's last position ended it, as the record says it: a word of the rules (KIF's
    千日手, 反則負け, ...), or 中断 with a comment when the game was ended by a rule of azshogi's
    self-play (the first recurrence of a position, dlshogi's rule; mate adjudication), and the
    winner the game was scored for."""

    kif_word: Optional[str]  # cshogi's exporter's word, or None: 中断 with `comment`
    comment: Optional[str]
    winner: Optional[int]  # cshogi.BLACK / WHITE, None: a draw or not decided


def _moves(moves_usi: Sequence[str], start_sfen: Optional[str]) -> tuple[list[int], cshogi.Board, int]:
    """(the moves, the board after them, how many times its position occurred in the game)."""
    board = cshogi.Board(start_sfen) if start_sfen else cshogi.Board()
    seen = collections.Counter([board.zobrist_hash()])
    out = []
    for usi in moves_usi:
        move = board.move_from_usi(usi)
        out.append(move)
        board.push(move)
        seen[board.zobrist_hash()] += 1
    return out, board, seen[board.zobrist_hash()]


def _ending(termination: Termination, board: cshogi.Board, occurrences: int) -> _Ending:
    to_move, mover = board.turn, 1 - board.turn
    if termination in (Termination.REPETITION, Termination.PERPETUAL_CHECK):
        checker = None  # the side that gave perpetual check, if any
        if termination == Termination.PERPETUAL_CHECK:
            checker = mover if board.is_draw() == cshogi.REPETITION_WIN else to_move
        if occurrences >= FOURFOLD:  # sennichite by the rules
            if checker is None:
                return _Ending("sennichite", None, None)
            return _Ending("illegal_lose" if checker == mover else "illegal_win", None, 1 - checker)
        what = ("the position recurred: self-play ends a game at a position's first recurrence as a draw"
                if checker is None else
                f"{_SIDE[checker][1]} repeated the position by continuous checks: self-play ends a game at the "
                f"first recurrence as a loss for the checking side")
        return _Ending(None, f"azshogi self-play: {what} (dlshogi's rule), not at the fourth occurrence "
                             f"(sennichite) that the rules need", None if checker is None else 1 - checker)
    if termination == Termination.MATE_ADJUDICATION:
        why = (f"adjudicated: {_SIDE[to_move][1]}, to move, has a forced mate and is scored the winner "
               f"(azshogi's rules.mate_adjudication_plies, or dlshogi's root mate search)")
        return _Ending(None, why, to_move)
    if termination == Termination.MAX_PLIES:
        return _Ending("draw", "the ply limit: a draw", None)
    if termination == Termination.IMPASSE_DRAW:
        return _Ending("draw", f"{_SIDE[to_move][1]} declared an impasse with 24-30 points: a draw under the "
                               f"24-point rule", None)
    # mated, resigned or out of time: the side to move lost; an impasse declared: the side to move won
    winner = {Termination.CHECKMATE: mover, Termination.RESIGN: mover, Termination.TIME_UP: mover,
              Termination.ILLEGAL_MOVE: mover, Termination.IMPASSE: to_move}.get(termination)
    return _Ending(_KIF_END.get(termination), None, winner)


def _kif_result(word: str, winner: int, moves: int) -> str:
    """The result line of a decided ending, from its winner: cshogi's exporter words it from the
    move count's parity (wrong for a game whose start has white to move) and writes none for an
    impasse that its parser reads. Perpetual check and an illegal move: the loser's 反則負け."""
    if word in ("illegal_win", "illegal_lose", "illegal_move"):
        return f"まで{moves}手で{_SIDE[1 - winner][0]}の反則負け"
    return f"まで{moves}手で{_SIDE[winner][0]}の{'入玉勝ち' if word == 'win' else '勝ち'}"


def _kif_start(start_sfen: Optional[str]) -> Optional[str]:
    """The exporter's handicap argument for a start position: the name of a standard handicap
    (手合割) when the position is one, else the board diagram ('sfen ...'), written after
    手合割：その他 (kif_text) so that a reader that cannot read a diagram (cshogi's parser) refuses
    the record instead of reading its moves from the initial position."""
    if start_sfen is None:
        return None
    fields = cshogi.Board(start_sfen).sfen().split()[:3]
    for name, sfen in KIF.Parser.HANDYCAP_SFENS.items():
        if sfen is not None and sfen.split()[:3] == fields:
            return None if name == "平手" else name
    return "sfen " + start_sfen


def kif_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, start_time: Optional[datetime] = None) -> str:
    """A game as KIF text (cshogi's exporter); start_time: when the game began (開始日時). The
    last lines say what ended the game: a word of the rules and its result line, or 中断 with a
    comment (`*...`) when azshogi's self-play ended it by its own rule, followed by the result
    it scored (the winner, or 中断 for a draw)."""
    exporter = KIF.Exporter()
    exporter.kifu, exporter.prev_move, exporter.move_number = io.StringIO(), None, 1
    start = _kif_start(start_sfen)
    exporter.header(list(names), starttime=start_time, handicap=start)
    out = exporter.kifu
    if start is not None and start.startswith("sfen "):  # after 開始日時, before the diagram
        first, rest = out.getvalue().split("\n", 1)
        out.seek(0)
        out.write(f"{first}\n手合割：その他\n{rest}")
    moves, board, occurrences = _moves(moves_usi, start_sfen)
    for move in moves:
        exporter.move(move)
    end = _ending(termination, board, occurrences)
    if end.kif_word == "draw":  # cshogi writes the result line of 持将棋 with the wrong move count
        out.write(f"{exporter.move_number:>4} 持将棋            ( 0:00/00:00:00)\n*{end.comment}\n"
                  f"まで{len(moves)}手で持将棋\n")
    elif end.kif_word in _KIF_OWN and end.winner is not None:  # cshogi's parser reads the winner here
        out.write(f"{exporter.move_number:>4} {_KIF_OWN[end.kif_word]:<14}( 0:00/00:00:00)\n"
                  f"{_kif_result(end.kif_word, end.winner, len(moves))}\n")
    elif end.kif_word is not None:
        exporter.end(end.kif_word)
        if end.winner is not None:  # its result line, written anew
            text = out.getvalue()
            out.seek(text.rstrip("\n").rfind("\n") + 1)
            out.truncate()
            out.write(_kif_result(end.kif_word, end.winner, len(moves)) + "\n")
    elif end.comment is not None:
        result = "中断" if end.winner is None else f"{_SIDE[end.winner][0]}の勝ち"
        out.write(f"{exporter.move_number:>4} 中断              ( 0:00/00:00:00)\n*{end.comment}\n"
                  f"まで{len(moves)}手で{result}\n")
    return out.getvalue()


def _played_out_mate(board: cshogi.Board) -> list[int]:
    """The moves of a forced mate for the side to move, ending in checkmate, or [] (df-pn)."""
    line = mate_line(board, _MATE_NODES)
    for move in line:
        board.push(move)
    mated = bool(line) and board.is_game_over()
    for _ in line:
        board.pop()
    return line if mated else []


def csa_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, comment: Optional[str] = None,
             start_time: Optional[datetime] = None) -> str:
    """A game as CSA text (format 2.2, cshogi's exporter, UTF-8 as its first line says);
    start_time: when the game began ($START_TIME). An ending by a rule of azshogi's self-play
    is %CHUDAN after a comment (`'...`) that says what ended the game; a mate adjudication is
    followed by the mate df-pn finds for it, then %TORYO, so that readers score its winner."""
    exporter = CSA.Exporter()
    exporter.f = io.StringIO()
    # A Board, not the SFEN string: cshogi 1.1.0's exporter fails on a string that is not the
    # initial position. A comment starting with ' is written by it as it is, with no line end.
    when = {"START_TIME": start_time.strftime("%Y/%m/%d %H:%M:%S")} if start_time else None
    exporter.info(init_board=cshogi.Board(start_sfen) if start_sfen else None, names=list(names),
                  comment=None if comment is None else "'" + " ".join(comment.splitlines()) + "\n",
                  var_info=when, version="V2.2")
    moves, board, occurrences = _moves(moves_usi, start_sfen)
    for move in moves:
        exporter.move(move)
    end = _ending(termination, board, occurrences)
    mate = _played_out_mate(board) if termination == Termination.MATE_ADJUDICATION else []
    if mate:
        exporter.f.write(f"'{end.comment}; the mate that follows was found by df-pn when this record "
                         f"was written, not played\n")
        for move in mate:
            exporter.move(move)
        exporter.endgame("%TORYO")
    elif end.kif_word is None and end.comment is not None:
        exporter.f.write(f"'{end.comment}\n")
        exporter.endgame("%CHUDAN")
    elif end.kif_word in ("illegal_win", "illegal_lose") and end.winner is not None:  # fourfold perpetual check
        exporter.endgame("%+ILLEGAL_ACTION" if end.winner == cshogi.WHITE else "%-ILLEGAL_ACTION")  # the loser's sign
    else:
        exporter.endgame(_CSA_END.get(termination, "%CHUDAN"))
    return "'CSA encoding=UTF-8\n" + exporter.f.getvalue()


def write_kif(path: Path, record: GameRecord, names: tuple[str, str] = ("black", "white")) -> None:
    """Writes a game's KIF record atomically (formats/files.py), in cp932 for .kif and UTF-8 for
    .kifu as cshogi does; the folder is made if needed."""
    encoding = "utf-8" if Path(path).suffix == ".kifu" else "cp932"
    text = kif_text(record.moves, record.termination, names, record.start_sfen, record.started)
    write_atomically(Path(path), text.encode(encoding, errors="replace"))


def write_csa(path: Path, record: GameRecord, names: tuple[str, str] = ("black", "white"),
              comment: Optional[str] = None) -> None:
    """Writes a game's CSA record atomically (UTF-8); the folder is made if needed."""
    write_atomically(Path(path), csa_text(record.moves, record.termination, names, record.start_sfen, comment,
                                          record.started).encode("utf-8"))


# --- reading CSA records (the docs tools' match records) ---

# CSA endings that are no result (a game interrupted, or no ending written): no winner, no draw
_NO_RESULT = ("", "%CHUDAN", "%ERROR", "%MATTA", "%TSUMI", "%FUZUMI")


@dataclass(frozen=True)
class CsaGame:
    """A game read from a CSA file: its players' names, start SFEN, cshogi moves (each legal,
    checked), and `result`: "black" or "white" (the winner), "draw", or None when the record
    gives no result (%CHUDAN, or no ending line)."""

    names: tuple[str, str]
    sfen: str
    moves: list[int]
    result: Optional[str]


def _csa_text(path: Path) -> str:
    """A CSA file's text: the encoding its `'CSA encoding=` line names, else UTF-8, else cp932
    (Shift_JIS, CSA's encoding before 3.0); a byte-order mark and CRLF line ends are read."""
    data = Path(path).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    first = data.split(b"\n", 1)[0].strip()
    named = first[len(b"'CSA encoding="):].decode("ascii", "replace") if first.startswith(b"'CSA encoding=") else None
    for encoding in ([named] if named else ["utf-8", "cp932"]):
        try:
            return data.decode(encoding).replace("\r\n", "\n")
        except (LookupError, UnicodeDecodeError) as e:
            error = e
    raise DataFormatError(f"{path}: not CSA text in {named or 'UTF-8 or Shift_JIS (cp932)'} ({error})")


def read_csa(path: Path) -> list[CsaGame]:
    """Every game of a CSA file (games separated by '/'); a file cshogi cannot parse, or a game
    with a move that is not legal where it stands, is a DataFormatError naming the file, the
    game and the move (cshogi reads an illegal move as move 0, which would corrupt the board)."""
    from cshogi import CSA

    try:
        parsed = CSA.Parser.parse_str(_csa_text(path))
    except DataFormatError:
        raise
    except Exception as e:  # noqa: BLE001 -- cshogi raises plain exceptions on a bad record
        raise DataFormatError(f"{path}: not a CSA record ({e})") from None
    games = []
    for number, game in enumerate(parsed, 1):
        board = cshogi.Board(game.sfen)
        for ply, move in enumerate(game.moves, 1):
            if not move or not board.is_legal(move):
                raise DataFormatError(f"{path}: game {number}, move {ply}: illegal or unreadable "
                                      f"({cshogi.move_to_csa(move) if move else 'not a move'})")
            board.push(move)
        result = None if game.endgame in _NO_RESULT else {cshogi.BLACK_WIN: "black", cshogi.WHITE_WIN: "white",
                                                           cshogi.DRAW: "draw"}.get(game.win)
        games.append(CsaGame((game.names[0] or "", game.names[1] or ""), game.sfen, list(game.moves), result))
    return games
