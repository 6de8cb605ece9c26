"""Is the USI engine ever late? Counts the `bestmove`s that arrive after the byoyomi, timed from
writing the `go` line to reading the `bestmove` line, as a GUI sees it; and how long `usiok`
takes after `usi`.

    python docs/tools/late_bestmoves.py --model 10x192 --byoyomi 1000 --moves 50 --option BatchSize=32
    python docs/tools/late_bestmoves.py CHECKPOINT --byoyomi 3000 --moves 50
    python docs/tools/late_bestmoves.py --usiok 10        # usi -> usiok of 10 fresh engine processes

The engine plays a game against itself from the start position (`go btime 0 wtime 0 byoyomi N`
every move; a new game after a resignation or a win), so the searches meet the positions and the
tree reuse of a real game. --engine runs another USI engine command instead of this azshogi.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azshogi.commands.cli import run_tool
from azshogi.play.usi_bench import untrained_checkpoint
from azshogi.play.usi_client import UsiClient


def usiok_latency(command: list, times: int) -> list:
    """Seconds from writing `usi` to reading `usiok`, and from starting the process, per start."""
    out = []
    for _ in range(times):
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        sent = time.perf_counter()
        proc.stdin.write("usi\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if line.startswith("usiok"):
                break
        now = time.perf_counter()
        out.append((now - sent, now - started))
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    return out


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?")
    parser.add_argument("--model", metavar="BLOCKSxCHANNELS", help="an untrained network of this size")
    parser.add_argument("--byoyomi", type=int, default=1000)
    parser.add_argument("--moves", type=int, default=50)
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--engine", default=f"{sys.executable} -m azshogi.commands.usi", help="the engine command")
    parser.add_argument("--usiok", type=int, default=0, help="only time usi -> usiok of this many fresh starts")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.usiok:
        times = usiok_latency(args.engine.split(), args.usiok)
        print(f"usi -> usiok: median {1000 * statistics.median(t for t, _ in times):.0f} ms, max "
              f"{1000 * max(t for t, _ in times):.0f} ms; process start -> usiok: median "
              f"{1000 * statistics.median(s for _, s in times):.0f} ms, max {1000 * max(s for _, s in times):.0f} ms "
              f"({len(times)} starts)")
        return
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = Path(args.checkpoint).resolve() if args.checkpoint else untrained_checkpoint(args.model,
                                                                                                 Path(folder))
        options = dict(item.split("=", 1) for item in args.option)
        client = UsiClient(args.engine, {"Checkpoint": str(checkpoint), **options}, timeout=600)
        walls, moves = [], []
        try:
            client.send("usinewgame")
            while len(walls) < args.moves:
                start = time.perf_counter()
                move, _ = client.go(None, moves, f"btime 0 wtime 0 byoyomi {args.byoyomi}")
                walls.append(time.perf_counter() - start)
                late = " LATE" if walls[-1] * 1000 > args.byoyomi else ""
                print(f"move {len(walls):3d} ply {len(moves):3d}: {move:6} after {1000 * walls[-1]:6.0f} ms{late}",
                      file=sys.stderr)
                if move in ("resign", "win") or len(moves) >= 300:
                    moves = []
                    client.send("usinewgame")
                else:
                    moves.append(move)
        finally:
            client.close()
    late = sum(w * 1000 > args.byoyomi for w in walls)
    print(f"byoyomi {args.byoyomi} ms, {len(walls)} moves: {late} late; go -> bestmove median "
          f"{1000 * statistics.median(walls):.0f} ms, max {1000 * max(walls):.0f} ms")


if __name__ == "__main__":
    run_tool(main, "late_bestmoves.py")
