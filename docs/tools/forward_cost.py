"""The network alone through the evaluator, as self-play calls it: milliseconds a call on a fixed
batch of positions, for a few batch sizes (the fixed cost a call carries shows at small batches).

    python docs/tools/forward_cost.py [--model 3x32] [--batches 8,128] [--threads 1] [--seconds 1] [--windows 5]
        [--dtype fp32] [--fuse on|off|both]

Prints one line per batch size: the median of the windows' ms a call (docs/benchmarks.md).
`--fuse both`: the fused and the unfused network (inference.fuse) in alternate windows, both
medians on one line and their ratio."""
from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="3x32", help="BLOCKSxCHANNELS (default 3x32)")
    parser.add_argument("--batches", default="8,128", help="comma-separated batch sizes (default 8,128)")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads (default 1)")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of a window (default 1)")
    parser.add_argument("--windows", type=int, default=5, help="windows per batch size (default 5)")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="inference dtype (default fp32)")
    parser.add_argument("--fuse", default="on", choices=["on", "off", "both"],
                        help="inference.fuse (default on); both: each in alternate windows")
    args = parser.parse_args(argv)
    try:
        blocks, channels = (int(x) for x in args.model.lower().split("x"))
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        parser.error(f"--model {args.model!r} / --batches {args.batches!r}: numbers, e.g. 3x32 and 8,128")
    if min(blocks, channels, *batches, args.threads, args.windows) < 1 or not batches or not args.seconds > 0:
        parser.error("--model's sizes, --batches, --threads and --windows must be >= 1, --seconds > 0")

    import torch

    from azshogi.nn.evaluator import LocalEvaluator, resolve_dtype
    from azshogi.nn.inference import FUSED_MIN_BATCH
    from azshogi.nn.network import build
    from azshogi.train.bench import fill, sample_positions

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = build(blocks, channels, 256).eval()
    device = torch.device("cpu")
    variants = {"on": [True], "off": [False], "both": [True, False]}[args.fuse]
    for batch_size in batches:
        calls = {}
        for fuse in variants:
            evaluator = LocalEvaluator(net, device, resolve_dtype(args.dtype, device), max_batch=batch_size, fuse=fuse)
            batch = fill(evaluator.allocate(batch_size), sample_positions(batch_size, 0))
            for _ in range(10):
                evaluator.evaluate(batch)
            calls[fuse] = evaluator, batch
        per_call: dict[bool, list[float]] = {fuse: [] for fuse in variants}
        for _ in range(args.windows):
            for fuse, (evaluator, batch) in calls.items():
                count, start = 0, time.perf_counter()
                while time.perf_counter() - start < args.seconds:
                    evaluator.evaluate(batch)
                    count += 1
                per_call[fuse].append(1000 * (time.perf_counter() - start) / count)
        ms = {fuse: statistics.median(times) for fuse, times in per_call.items()}
        head = f"{args.model} batch {batch_size}, {args.threads} thread(s), {args.dtype}"
        if len(ms) == 1:
            print(f"{head}: {ms[variants[0]]:.3f} ms a call (median of {args.windows})")
        else:
            print(f"{head}: fused {ms[True]:.3f} ms a call, unfused {ms[False]:.3f}: {ms[False] / ms[True]:.2f} times "
                  f"as fast (medians of {args.windows})")
            if not (calls[True][0].net.net.fused and batch_size >= FUSED_MIN_BATCH):
                print(f"  (no fused path at batch {batch_size} in {args.dtype} here: both ran unfused)")


if __name__ == "__main__":
    main()
