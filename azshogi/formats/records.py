"""Game records in the formats shogi GUIs read: KIF (cshogi's exporter) and CSA."""
from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

import cshogi
from cshogi import CSA, KIF

from azshogi.formats.files import write_atomically
from azshogi.shogi.rules import Termination

# How each ending is written. KIF's words are from the view of cshogi's exporter: 'resign' =
# the side to move resigned, 'illegal_lose' = the last mover lost by an illegal action.
_KIF_END = {
    Termination.CHECKMATE: "resign",
    Termination.RESIGN: "resign",
    Termination.REPETITION: "sennichite",
    Termination.PERPETUAL_CHECK: "illegal_lose",
    Termination.IMPASSE: "win",
    Termination.MAX_PLIES: "draw",
}
_CSA_END = {
    Termination.CHECKMATE: "%TORYO",
    Termination.RESIGN: "%TORYO",
    Termination.REPETITION: "%SENNICHITE",
    Termination.PERPETUAL_CHECK: "%SENNICHITE",
    Termination.IMPASSE: "%KACHI",
    Termination.MAX_PLIES: "%JISHOGI",
    Termination.MATE_ADJUDICATION: "%CHUDAN",
}


def _moves(moves_usi: Sequence[str], start_sfen: Optional[str]) -> list[int]:
    board = cshogi.Board(start_sfen) if start_sfen else cshogi.Board()
    out = []
    for usi in moves_usi:
        move = board.move_from_usi(usi)
        out.append(move)
        board.push(move)
    return out


def kif_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, start_time: Optional[datetime] = None) -> str:
    """A game as KIF text (cshogi's exporter); start_time: when the game began (開始日時)."""
    exporter = KIF.Exporter()
    exporter.kifu, exporter.prev_move, exporter.move_number = io.StringIO(), None, 1
    exporter.header(list(names), starttime=start_time, handicap=("sfen " + start_sfen) if start_sfen else None)
    for move in _moves(moves_usi, start_sfen):
        exporter.move(move)
    if termination in _KIF_END:
        exporter.end(_KIF_END[termination])
    return exporter.kifu.getvalue()


def csa_text(moves_usi: Sequence[str], termination: Termination, names: tuple[str, str] = ("black", "white"),
             start_sfen: Optional[str] = None, comment: Optional[str] = None,
             start_time: Optional[datetime] = None) -> str:
    """A game as CSA text (cshogi's exporter); start_time: when the game began ($START_TIME)."""
    exporter = CSA.Exporter()
    exporter.f = io.StringIO()
    # A Board, not the SFEN string: cshogi 1.1.0's exporter fails on a string that is not the
    # initial position.
    when = {"START_TIME": start_time.strftime("%Y/%m/%d %H:%M:%S")} if start_time else None
    exporter.info(init_board=cshogi.Board(start_sfen) if start_sfen else None, names=list(names),
                  comment=comment, var_info=when)
    for move in _moves(moves_usi, start_sfen):
        exporter.move(move)
    exporter.endgame(_CSA_END.get(termination, "%CHUDAN"))
    return exporter.f.getvalue()


def write_kif(path: Path, moves_usi: Sequence[str], termination: Termination,
              names: tuple[str, str] = ("black", "white"), start_sfen: Optional[str] = None,
              start_time: Optional[datetime] = None) -> None:
    """Writes a KIF record atomically (formats/files.py), in cp932 for .kif and UTF-8 for .kifu
    as cshogi does; the folder is made if needed."""
    encoding = "utf-8" if Path(path).suffix == ".kifu" else "cp932"
    text = kif_text(moves_usi, termination, names, start_sfen, start_time)
    write_atomically(Path(path), text.encode(encoding, errors="replace"))


def write_csa(path: Path, moves_usi: Sequence[str], termination: Termination,
              names: tuple[str, str] = ("black", "white"), start_sfen: Optional[str] = None,
              comment: Optional[str] = None, start_time: Optional[datetime] = None) -> None:
    """Writes a CSA record atomically (UTF-8); the folder is made if needed."""
    write_atomically(Path(path), csa_text(moves_usi, termination, names, start_sfen, comment,
                                          start_time).encode("utf-8"))
