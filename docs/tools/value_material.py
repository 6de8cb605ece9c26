"""Does a network's value head know material? A diagnostic, not part of training.

    python docs/tools/value_material.py CHECKPOINT RECORDS... [--every K] [--newest N]

RECORDS: self-play hcpe3 files (`logs/<run>/hcpe3/*.hcpe3`) and/or CSA game records (an arena's
`--records` folder; games whose record gives no result are left out), files or folders (with
`--newest N`, only the newest N hcpe3 files of a folder by name: a run's last self-play phases).
Every K-th position of each game (default 3, so both sides to move) is evaluated by the
checkpoint's network; each position's material balance is counted from the side to move with
the greedy baseline's yardstick (play/players.py: pawn 1, lance 3, knight 4, silver 5, gold and
promoted minor pieces 6, bishop 8, rook 10, horse 10, dragon 12; hand pieces at their unpromoted
value). azshogi never trains on it: it only shows how the value head and the games' results
relate to material.

Prints, per source kind, the correlation of the network's win rate with material, and per
material band the positions, the mean result of the game for the side to move (a win 1, a draw
0.5) and the mean win rate the network gives.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cshogi
import numpy as np

from azshogi.commands.cli import run_tool
from azshogi.play.players import HAND_VALUES, PIECE_VALUES  # the greedy baseline's yardstick

# the values of a hand's counts, in cshogi's hand order: pawn, lance, knight, silver, gold, bishop, rook
HAND_ORDER_VALUES = HAND_VALUES[[cshogi.PAWN, cshogi.LANCE, cshogi.KNIGHT, cshogi.SILVER, cshogi.GOLD,
                                 cshogi.BISHOP, cshogi.ROOK]]
BANDS = ((-999, -30), (-30, -10), (-10, -3), (-3, 3), (3, 10), (10, 30), (30, 999))


def material(board: cshogi.Board) -> int:
    """Material balance from the side to move's view, in pawns of the yardstick above."""
    total = 0
    for square in range(81):
        piece = board.piece(square)
        if piece:
            value = PIECE_VALUES[piece & 15]
            total += -value if piece & 16 else value
    black, white = board.pieces_in_hand
    total += float(np.dot(black, HAND_ORDER_VALUES) - np.dot(white, HAND_ORDER_VALUES))
    return int(total) if board.turn == cshogi.BLACK else -int(total)


def positions(path: Path, every: int):
    """(board copy, result for its side to move or None) for every `every`-th position."""
    board = cshogi.Board()
    if path.suffix == ".hcpe3":
        from azshogi.formats.dlshogi import read_hcpe3

        for game in read_hcpe3(path):
            for i in range(0, len(game.moves), every):
                board.set_hcp(game.hcps[i])
                yield board.copy(), _result(game.winner, board.turn)
        return
    from azshogi.formats.records import read_csa

    for game in read_csa(path):  # a damaged record: its file named in one line (run_tool)
        if game.result is None:  # %CHUDAN or no ending: no result to compare with
            continue
        board.set_sfen(game.sfen)
        winner = {"black": cshogi.BLACK, "white": cshogi.WHITE}.get(game.result)
        for i, move in enumerate(game.moves):
            if board.is_game_over():
                break
            if i % every == 0:
                yield board.copy(), _result(winner, board.turn)
            board.push(move)


def _result(winner, turn) -> float:
    return 0.5 if winner is None else float(winner == turn)


def files(sources: list[str], newest: int = 0) -> list[Path]:
    out = []
    for source in map(Path, sources):
        if source.is_dir():
            hcpe3 = sorted(p for p in source.iterdir() if p.suffix == ".hcpe3" and not p.name.startswith("."))
            out += hcpe3[-newest:] if newest > 0 else hcpe3
            out += sorted(p for p in source.iterdir() if p.suffix == ".csa" and not p.name.startswith("."))
        elif source.is_file():
            out.append(source)
        else:
            sys.exit(f"value_material.py: no such file or folder: {source}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("records", nargs="+")
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--newest", type=int, default=0)
    args = parser.parse_args()
    from azshogi.play.models import model_evaluator

    evaluator, _ = model_evaluator(args.checkpoint, device="cpu")
    for kind, label in ((".hcpe3", "self-play (hcpe3)"), (".csa", "match records (CSA)")):
        boards, results = [], []
        for path in (p for p in files(args.records, args.newest) if p.suffix == kind):
            for board, result in positions(path, args.every):
                boards.append(board)
                results.append(result)
        if not boards:
            continue
        values = []
        for start in range(0, len(boards), 256):
            chunk = boards[start:start + 256]
            batch = evaluator.allocate(len(chunk))
            for board in chunk:
                batch.add(board, list(board.legal_moves))
            batch.seal()
            values += np.asarray(evaluator.evaluate(batch)[1], np.float64).tolist()
        mat, val, res = np.array([material(b) for b in boards]), np.array(values), np.array(results)
        corr = np.corrcoef(mat, val)[0, 1] if mat.std() > 0 and val.std() > 0 else float("nan")
        print(f"{label}: {len(mat)} positions; correlation of the network's win rate with material {corr:.2f}")
        print("| material (side to move) | positions | game result | network's win rate |")
        print("|---|---|---|---|")
        for low, high in BANDS:
            sel = (mat >= low) & (mat < high)
            if sel.any():
                band = f"< {high}" if low == -999 else f">= {low}" if high == 999 else f"[{low}, {high})"
                print(f"| {band} | {int(sel.sum())} | {res[sel].mean():.2f} | {val[sel].mean():.2f} |")


if __name__ == "__main__":
    run_tool(main, "value_material.py")
