"""What reading a checkpoint costs with its checksums checked (formats/checkpoint.load) against
torch.load alone, on the files given and on a network file of `--megabytes` of weights made for it.

    python docs/tools/checkpoint_read_cost.py [CHECKPOINT ...] [--megabytes 240] [--repeats 5]

Prints, per file, its bytes and the median seconds of `--repeats` reads each way, in one process.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from azshogi.commands.cli import run_tool
from azshogi.formats import checkpoint as ckpt


def median_seconds(read, path: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_alone(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--megabytes", type=float, default=240.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.megabytes <= 0 or args.repeats < 1:
        parser.error("--megabytes must be > 0 and --repeats >= 1")
    with tempfile.TemporaryDirectory() as folder:
        made = Path(folder) / "network.pt"
        ckpt.write_network({"w": torch.randn(int(args.megabytes * 1e6 / 4))}, {}, made)
        print("| file | bytes | ckpt.load (checked) | torch.load alone |")
        print("|---|---|---|---|")
        for path in [*args.checkpoints, made]:
            checked = median_seconds(ckpt.load, path, args.repeats)
            alone = median_seconds(torch_alone, path, args.repeats)
            name = f"a network file of {args.megabytes:g} MB of weights" if path == made else str(path)
            print(f"| {name} | {path.stat().st_size:,} | {checked:.3f} s | {alone:.3f} s |")


if __name__ == "__main__":
    run_tool(main, "checkpoint_read_cost.py")
