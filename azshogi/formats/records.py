"""Game records in the formats shogi GUIs read: KIF (cshogi's exporter) and CSA."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

import cshogi
from cshogi import CSA, KIF

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


def write_kif(path: Path, moves_usi: Sequence[str], termination: Termination,
              names: tuple[str, str] = ("black", "white"), start_sfen: Optional[str] = None,
              start_time: Optional[datetime] = None) -> None:
    """Writes a KIF record atomically (cp932 for .kif, UTF-8 for .kifu, as cshogi does);
    start_time: when the game began (開始日時; default now)."""
    tmp = path.with_name(".tmp-" + path.name)  # keeps the suffix that picks the encoding
    exporter = KIF.Exporter(str(tmp))
    try:
        exporter.header(list(names), starttime=start_time,
                        handicap=("sfen " + start_sfen) if start_sfen else None)
        for move in _moves(moves_usi, start_sfen):
            exporter.move(move)
        if termination in _KIF_END:
            exporter.end(_KIF_END[termination])
    finally:
        exporter.close()
    os.replace(tmp, path)


def write_csa(path: Path, moves_usi: Sequence[str], termination: Termination,
              names: tuple[str, str] = ("black", "white"), start_sfen: Optional[str] = None,
              comment: Optional[str] = None, start_time: Optional[datetime] = None) -> None:
    """Writes a CSA record atomically; start_time: when the game began ($START_TIME)."""
    tmp = path.with_name(".tmp-" + path.name)
    exporter = CSA.Exporter(str(tmp))
    try:
        try:
            # A Board, not the SFEN string: cshogi 1.1.0's exporter fails on a string that is
            # not the initial position.
            when = {"START_TIME": start_time.strftime("%Y/%m/%d %H:%M:%S")} if start_time else None
            exporter.info(init_board=cshogi.Board(start_sfen) if start_sfen else None, names=list(names),
                          comment=comment, var_info=when)
            for move in _moves(moves_usi, start_sfen):
                exporter.move(move)
            exporter.endgame(_CSA_END.get(termination, "%CHUDAN"))
        finally:
            exporter.close()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
