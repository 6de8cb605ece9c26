"""Game records in the formats shogi GUIs read: KIF (cshogi's exporter) and CSA."""
from __future__ import annotations

import collections
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

import cshogi
from cshogi import CSA, KIF

from azshogi.formats.files import write_atomically
from azshogi.shogi.game_record import GameRecord
from azshogi.shogi.rules import FOURFOLD, Termination

# How each ending is written. KIF's words are from the view of cshogi's exporter: 'resign' =
# the side to move resigned, 'illegal_lose' / 'illegal_win' = the last mover lost / won by an
# illegal action (perpetual check); 'time_up' (切れ負け: the side to move lost on time) is
# written here, cshogi's exporter lacking it. The endings that are not the rules' own are written
# below.
_KIF_END = {
    Termination.CHECKMATE: "resign",
    Termination.RESIGN: "resign",
    Termination.REPETITION: "sennichite",
    Termination.IMPASSE: "win",
    Termination.TIME_UP: "time_up",
}
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
}
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
              Termination.IMPASSE: to_move}.get(termination)
    return _Ending(_KIF_END.get(termination), None, winner)


def _kif_result(word: str, winner: int, moves: int) -> str:
    """The result line of a decided ending, from its winner: cshogi's exporter words it from the
    move count's parity (wrong for a game whose start has white to move) and writes none for an
    impasse that its parser reads. Perpetual check: the checking side's 反則負け."""
    if word in ("illegal_win", "illegal_lose"):
        return f"まで{moves}手で{_SIDE[1 - winner][0]}の反則負け"
    return f"まで{moves}手で{_SIDE[winner][0]}の{'入玉勝ち' if word == 'win' else '勝ち'}"


def kif_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, start_time: Optional[datetime] = None) -> str:
    """A game as KIF text (cshogi's exporter); start_time: when the game began (開始日時). The
    last lines say what ended the game: a word of the rules and its result line, or 中断 with a
    comment (`*...`) when azshogi's self-play ended it by its own rule, followed by the result
    it scored (the winner, or 中断 for a draw)."""
    exporter = KIF.Exporter()
    exporter.kifu, exporter.prev_move, exporter.move_number = io.StringIO(), None, 1
    exporter.header(list(names), starttime=start_time, handicap=("sfen " + start_sfen) if start_sfen else None)
    moves, board, occurrences = _moves(moves_usi, start_sfen)
    for move in moves:
        exporter.move(move)
    end = _ending(termination, board, occurrences)
    out = exporter.kifu
    if end.kif_word == "draw":  # cshogi writes the result line of 持将棋 with the wrong move count
        out.write(f"{exporter.move_number:>4} 持将棋            ( 0:00/00:00:00)\n*{end.comment}\n"
                  f"まで{len(moves)}手で持将棋\n")
    elif end.kif_word == "time_up" and end.winner is not None:  # cshogi's parser reads the winner here
        out.write(f"{exporter.move_number:>4} 切れ負け          ( 0:00/00:00:00)\n"
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


def csa_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, comment: Optional[str] = None,
             start_time: Optional[datetime] = None) -> str:
    """A game as CSA text (cshogi's exporter); start_time: when the game began ($START_TIME). An
    ending by a rule of azshogi's self-play is %CHUDAN after a comment (`'...`) that says what
    ended the game."""
    exporter = CSA.Exporter()
    exporter.f = io.StringIO()
    # A Board, not the SFEN string: cshogi 1.1.0's exporter fails on a string that is not the
    # initial position.
    when = {"START_TIME": start_time.strftime("%Y/%m/%d %H:%M:%S")} if start_time else None
    exporter.info(init_board=cshogi.Board(start_sfen) if start_sfen else None, names=list(names),
                  comment=comment, var_info=when)
    moves, board, occurrences = _moves(moves_usi, start_sfen)
    for move in moves:
        exporter.move(move)
    end = _ending(termination, board, occurrences)
    if end.kif_word is None and end.comment is not None:
        exporter.f.write(f"'{end.comment}\n")
        exporter.endgame("%CHUDAN")
    elif end.kif_word in ("illegal_win", "illegal_lose") and end.winner is not None:  # fourfold perpetual check
        exporter.endgame("%+ILLEGAL_ACTION" if end.winner == cshogi.WHITE else "%-ILLEGAL_ACTION")  # the loser's sign
    else:
        exporter.endgame(_CSA_END.get(termination, "%CHUDAN"))
    return exporter.f.getvalue()


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
