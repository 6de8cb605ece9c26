"""How well do networks predict self-play positions they did not train on? A diagnostic, not part
of training.

    python docs/tools/heldout_loss.py --positions CHECKPOINT [--newest N] CHECKPOINT...

The positions are the newest N segments (default 1: the last phase's self-play) of the replay
window of the checkpoint given to --positions, read from the replay store beside it. Each
CHECKPOINT's network (in eval mode, as it plays, fp32) is scored on all of them:

    value loss   binary cross-entropy of its win rate against the value target training uses:
                 (1 - w) x the game's result + w x the search's root value, from the side to move,
                 mapped to [0, 1]; w = train.value_target_root_weight of the positions' run
    vs result    the same against the game's result alone (a win 1, a draw 1/2, a loss 0)
    policy       cross-entropy of its policy against the search's visit targets (nats)

A run's logged training losses are measured on positions it is training on; the same figures on
positions it never saw (another run's, or positions newer than the checkpoint) show how much of
a low training loss is memorised games rather than knowledge that carries to new positions.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from azshogi.commands.cli import run_tool
from azshogi.config import ValueLoss
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import replay_store_of
from azshogi.formats.replay_store import ReplayStore
from azshogi.play.models import load_model
from azshogi.train.replay import Batch, ReplayBuffer
from azshogi.train.trainer import losses, value_target


def replay_of(state: dict, checkpoint_file: Path) -> dict:
    """A checkpoint's replay window (SystemExit for a network alone, which has none)."""
    if "replay" not in state:
        raise SystemExit(f"{checkpoint_file}: a network alone (azshogi-export network), no replay window: "
                         f"give a run's checkpoint")
    return state["replay"]


def newest_window(checkpoint_file: Path, newest: int) -> tuple[ReplayBuffer, float, int]:
    """(a buffer holding the newest `newest` segments of the checkpoint's replay window, the run's
    value target root weight, segments read). Position numbers are the run's: buffer.begin is
    the first one read."""
    state = ckpt.load(checkpoint_file)
    replay = replay_of(state, checkpoint_file)
    segments = replay["segments"][-newest:]
    if not segments:
        raise SystemExit(f"{checkpoint_file}: its replay window is empty")
    begin = max(replay["begin"], segments[0]["first"])
    block = ReplayStore(replay_store_of(checkpoint_file)).read(segments, begin, replay["end"])
    buffer = ReplayBuffer(max(1, len(block.results)))
    buffer.restore(begin, block)
    return buffer, float(state["config"]["train"]["value_target_root_weight"]), len(segments)


def newest_positions(checkpoint_file: Path, newest: int) -> tuple[Batch, float, int]:
    """(batch of the newest `newest` segments of the checkpoint's replay window, the run's value
    target root weight, segments read)."""
    buffer, weight, segments = newest_window(checkpoint_file, newest)
    slots = (buffer.begin + np.arange(len(buffer))) % buffer.capacity
    return buffer.gather(slots), weight, segments


def scores(model: torch.nn.Module, batch: Batch, root_weight: float, chunk: int = 1024) -> dict[str, float]:
    """Mean value loss (against the training target and against the result alone) and policy
    cross-entropy of `model` over the batch, as training computes them (trainer.losses, BCE)."""
    targets = {"value": torch.from_numpy(value_target(batch, root_weight)),
               "result": torch.from_numpy(value_target(batch, 0.0))}
    policy = torch.from_numpy(batch.policy)
    total = {"value": 0.0, "result": 0.0, "policy": 0.0}
    n = len(batch.result)
    with torch.no_grad():
        for i in range(0, n, chunk):
            part = slice(i, i + chunk)
            policy_logits, value_logit = model(torch.from_numpy(batch.features1[part]),
                                               torch.from_numpy(batch.features2[part]))
            rows = len(policy[part])
            for key, target in targets.items():
                p_loss, v_loss, _ = losses(policy_logits, value_logit, policy[part], target[part], ValueLoss.bce)
                total[key] += float(v_loss) * rows
            total["policy"] += float(p_loss) * rows
    return {key: value / n for key, value in total.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path, help="the networks to score")
    parser.add_argument("--positions", type=Path, required=True,
                        help="a checkpoint whose replay window's newest segments are the positions")
    parser.add_argument("--newest", type=int, default=1, help="segments (checkpoints' worth of self-play) to use")
    args = parser.parse_args(argv)
    if args.newest < 1:
        parser.error("--newest must be >= 1")
    torch.set_num_threads(1)
    batch, root_weight, segments = newest_positions(args.positions, args.newest)
    print(f"positions: {len(batch.result)} from the newest {segments} segment(s) of {args.positions}'s replay "
          f"window (value target: {1 - root_weight:g} x result + {root_weight:g} x root value)")
    for path in args.checkpoints:
        model, _ = load_model(path)
        scored = scores(model.float(), batch, root_weight)
        print(f"{path}: value loss {scored['value']:.3f}, vs result {scored['result']:.3f}, "
              f"policy {scored['policy']:.3f}")
    return 0


if __name__ == "__main__":
    run_tool(main, "heldout_loss.py")
