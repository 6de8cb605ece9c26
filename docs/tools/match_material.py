"""How much material a player was up or down as its games went, by result: does it give pieces away?

    python docs/tools/match_material.py RECORDS --player NAME [--plies 20,40,60] [--down 10]

RECORDS: a folder of CSA games, such as an arena's `--records` (`azshogi-arena ... --records DIR
--format csa`): every game of each file; games whose record gives no result are left out.
NAME: the start of the player's name in the records (`search` matches `search:ckpt-00041`).
The balance is counted from NAME's view with the greedy baseline's yardstick (play/players.py,
`material_gain`: what each move captures, into the hand, plus what a promotion adds; pawn 1 ...
rook 10 on the board and in hand), summed over the moves up to each ply from the record's start (a game
shorter than a ply counts its last balance). Prints, for NAME's wins, losses and draws, the games, the median
balance at each ply and the share of games more than `--down` behind at the middle ply.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cshogi
import numpy as np

from azshogi.commands.cli import run_tool
from azshogi.formats.records import read_csa
from azshogi.play.players import material_gain


def balances(moves, side: int, plies, first: int = 0) -> list[float]:
    """The material `side` (0 black, 1 white) has gained (negative: lost) after each of `plies`
    plies of `moves` (cshogi moves; `first`: the side that moves first), or after the last move
    of a shorter game."""
    running = [0.0]
    for ply, move in enumerate(moves):
        gain = material_gain(move)
        running.append(running[-1] + (gain if (first + ply) % 2 == side else -gain))
    return [running[min(ply, len(moves))] for ply in plies]


def read_games(folder: Path, player: str, plies, skipped: list):
    """(result for the player: "win", "loss" or "draw", its balances at `plies`) per CSA game
    in `folder` (every game of each file) that the player took part in; a game whose record
    gives no result (%CHUDAN, no ending) is left out and added to `skipped`."""
    paths = sorted(folder.glob("*.csa"))
    if not paths:
        sys.exit(f"match_material.py: no .csa records in {folder}")
    for path in paths:
        for game in read_csa(path):  # a damaged record: its file named in one line (run_tool)
            sides = [i for i, name in enumerate(game.names) if name.startswith(player)]
            if len(sides) != 1:
                continue
            if game.result is None:
                skipped.append(path)
                continue
            side = sides[0]
            result = "draw" if game.result == "draw" else ("win" if game.result == ("black", "white")[side] else "loss")
            yield result, balances(game.moves, side, plies, cshogi.Board(game.sfen).turn)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("--player", required=True)
    parser.add_argument("--plies", default="20,40,60")
    parser.add_argument("--down", type=float, default=10.0)
    args = parser.parse_args(argv)
    plies = [int(p) for p in args.plies.split(",")]
    middle = len(plies) // 2  # the column the share behind is read at
    skipped: list[Path] = []
    games = list(read_games(args.records, args.player, plies, skipped))
    if skipped:
        print(f"left out {len(skipped)} games whose records give no result (%CHUDAN or no ending)")
    if not games:
        sys.exit(f"match_material.py: no game in {args.records} has a player named {args.player}...")
    every = np.array([b for _, b in games])
    print(f"{args.player} in {len(games)} games of {args.records}: material balance (its view) at plies {args.plies}")
    for label, rows in (("all", every), *((r, np.array([b for res, b in games if res == r]))
                                          for r in ("win", "loss", "draw"))):
        if len(rows):
            medians = ", ".join(f"{m:g}" for m in np.median(rows, axis=0))
            behind = (rows[:, middle] < -args.down).mean()
            print(f"  {label}: {len(rows)} games, median {medians}; "
                  f"{behind:.0%} more than {args.down:g} behind at ply {plies[middle]}")


if __name__ == "__main__":
    run_tool(main, "match_material.py")
