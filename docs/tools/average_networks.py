"""The mean of a run's networks over a range of its checkpoints, as one network file that the
engine, the arena and the exports play (azshogi.formats.checkpoint.write_network).

    python docs/tools/average_networks.py checkpoints/o32 32 41 o32-32-41.pt

averages the weights of checkpoints 32 to 41 of run o32 (uniformly; the batch-norm running
statistics averaged alike, a step count taken from the last): the weight averaging (SWA) that
smooths the noise of a constant learning rate. docs/experiments/2026-11-27-seed-32-twins.md asks
whether it mends a weak seed's 30 minutes.

    python docs/tools/average_networks.py checkpoints/o32 1 41 o32-ema.pt --decay 0.8

folds checkpoints 1 to 41 in turn into an exponential average instead, the one a run with
train.average_decay=0.8 keeps (azshogi/train/averaging.py): for a run trained without it.
Either way the networks averaged are the ones training left, not the averages that a run with
train.average_decay plays: so one checkpoint's range (41 41) writes the network it trained.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from azshogi.commands.cli import run_tool
from azshogi.config import from_plain
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import checkpoint_number, not_an_output
from azshogi.nn.network import from_config
from azshogi.train import averaging


def _shapes(weights: dict) -> dict:
    return {key: tuple(value.shape) for key, value in weights.items()}


def _same_shape(path: Path, weights: dict, first: Optional[dict], files: list[Path]) -> dict:
    """The shapes of `weights`, which must be those of the first file's (`first`, None for it)."""
    shapes = _shapes(weights)
    if first is not None and shapes != first:
        raise SystemExit(f"{path}: a network of another shape than {files[0]} (a stage grew the run's network: "
                         f"average the checkpoints on one side of the growth)")
    return shapes


def average(files: list[Path]) -> tuple[dict, dict]:
    """(the mean state_dict, the last file's config) of the networks in `files`, all of one shape."""
    total: dict = {}
    config: dict = {}
    first = None
    for path in files:
        weights, config = ckpt.network(ckpt.load(path), path, trained=True)
        first = _same_shape(path, weights, first, files)
        for key, value in weights.items():
            if value.is_floating_point():
                total[key] = total.get(key, 0) + value.double()
            else:  # counters (batch norm's num_batches_tracked): the last one's
                total[key] = value.clone()
    return {k: (v / len(files)).float() if v.is_floating_point() else v for k, v in total.items()}, config


def exponential(files: list[Path], decay: float) -> tuple[dict, dict]:
    """(the state_dict, the last file's config) of the exponential average that train.average_decay
    = `decay` keeps, over the networks in `files`, oldest first, all of one shape."""
    average = None
    config: dict = {}
    first = None
    for path in files:
        weights, config = ckpt.network(ckpt.load(path), path, trained=True)
        first = _same_shape(path, weights, first, files)
        shape = from_plain(config).model
        model = from_config(shape)
        try:
            model.load_state_dict(weights)
        except RuntimeError:
            raise SystemExit(f"{path}: a network of another shape than {files[0]}") from None
        average = averaging.updated(average, model, decay, shape)
    assert average is not None
    return average.state_dict(), config


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run's checkpoint folder (checkpoints/RUN)")
    parser.add_argument("first", type=int, help="the first checkpoint number averaged")
    parser.add_argument("last", type=int, help="the last checkpoint number averaged")
    parser.add_argument("out", type=Path, help="the network file written")
    parser.add_argument("--decay", type=float, default=0.0,
                        help="an exponential average with this decay per checkpoint (train.average_decay), "
                             "not the uniform mean")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    files = [p for p in ckpt.list_checkpoints(args.run)
             if not checkpoint_number(p)[1] and args.first <= checkpoint_number(p)[0] <= args.last]
    missing = sorted(set(range(args.first, args.last + 1)) - {checkpoint_number(p)[0] for p in files})
    if not files or missing:
        raise SystemExit(f"{args.run}: no checkpoint {', '.join(map(str, missing or [args.first]))} "
                         f"(loop.keep_checkpoints keeps only the newest)")
    if not 0 <= args.decay < 1:
        raise SystemExit(f"--decay {args.decay}: must be in [0, 1) (0: the uniform mean)")
    problem = not_an_output(args.out)
    if problem:  # before the work
        raise SystemExit(f"{args.out}: not written: {problem}; give it another name")
    try:
        weights, config = exponential(files, args.decay) if args.decay else average(files)
        ckpt.write_network(weights, config, args.out, averaged_from=[str(p) for p in files], decay=args.decay)
    except ckpt.CheckpointError as e:  # a damaged checkpoint, named
        raise SystemExit(str(e)) from None
    what = f"the exponential average (decay {args.decay})" if args.decay else "the mean"
    print(f"{args.out}: {what} of {len(files)} networks of {args.run} (checkpoints {args.first}-{args.last})")


if __name__ == "__main__":
    run_tool(main, "average_networks.py")
