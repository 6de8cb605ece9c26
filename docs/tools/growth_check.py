"""Does a grown network keep what the old one knew, and learn on from there? A diagnostic of
nn/growth.py, not part of training.

    python docs/tools/growth_check.py CHECKPOINT --positions LATER_CHECKPOINT --blocks B --channels C
        [--steps N] [--every K] [--seed S] [--distill W] [--lr LR]

Four networks train the same N steps on the same minibatches, drawn from CHECKPOINT's replay
window as its run draws them (mirrored if the run mirrors), each with a fresh optimizer of the
run's train settings in force at CHECKPOINT (its warm-up included; --lr sets another learning
rate for all four): CHECKPOINT's own network, that network grown to BxC
(nn/growth.py), a BxC network from scratch, and the same fresh network distilled from
CHECKPOINT's network: its targets are W x what that network (frozen) says of each position (its
policy, and its value as the value target) + (1 - W) x the run's own targets (the other way to
grow a network without starting over). Before the first step and every K steps each is
scored, in eval mode, on positions none of them trained on: the newest segment of
LATER_CHECKPOINT's replay window (self-play after CHECKPOINT), as heldout_loss.py scores them
(value loss against the training target, policy cross-entropy against the visit targets).
"""
from __future__ import annotations

import argparse
import copy
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from heldout_loss import newest_window, replay_of, scores

from azshogi.commands.cli import run_tool
from azshogi.formats import checkpoint as ckpt
from azshogi.nn.growth import grow
from azshogi.nn.network import PolicyValueNet
from azshogi.play.models import model_of
from azshogi.train.replay import Batch
from azshogi.train.trainer import Trainer, value_target


def distilled(batch: Batch, teacher: torch.nn.Module, weight: float, root_weight: float) -> Batch:
    """`batch` with its targets moved `weight` of the way to the teacher's: the policy target
    becomes weight x the teacher's policy + (1 - weight) x the visits, and the value target (a
    win probability for the side to move, trainer.value_target) weight x the teacher's + (1 -
    weight) x the run's. The value target is carried as the result and the root value alike (both
    the same number in [-1, 1]), so that value_target gives it whatever the root weight."""
    with torch.no_grad():
        policy_logits, value_logit = teacher(torch.from_numpy(batch.features1), torch.from_numpy(batch.features2))
    policy = torch.softmax(policy_logits.float(), dim=1).numpy()
    win = torch.sigmoid(value_logit.float().squeeze(1)).numpy()
    mixed_win = weight * win + (1.0 - weight) * value_target(batch, root_weight)
    value = (2.0 * mixed_win - 1.0).astype(np.float32)
    return Batch(batch.features1, batch.features2,
                 (weight * policy + (1.0 - weight) * batch.policy).astype(np.float32), value, value.copy())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="the network to grow, and its replay window to train on")
    parser.add_argument("--positions", type=Path, required=True,
                        help="a later checkpoint of the run: its newest segment is the held-out positions")
    parser.add_argument("--blocks", type=int, required=True)
    parser.add_argument("--channels", type=int, required=True)
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps for each network")
    parser.add_argument("--every", type=int, default=50, help="score every this many steps")
    parser.add_argument("--seed", type=int, default=0, help="the minibatches, the growth and the fresh network")
    parser.add_argument("--distill", type=float, default=0.5,
                        help="the distilled network's targets: this share the old network's, the rest the run's")
    parser.add_argument("--lr", type=float, help="the learning rate of all four (default: the run's at CHECKPOINT)")
    args = parser.parse_args(argv)
    if args.steps < 0 or args.every < 1:
        parser.error("--steps must be >= 0 and --every >= 1")
    if not 0.0 <= args.distill <= 1.0:
        parser.error("--distill must be in [0, 1]")
    if args.lr is not None and not args.lr > 0:
        parser.error("--lr must be > 0")
    torch.set_num_threads(1)
    state = ckpt.load(args.checkpoint)
    old, cfg = model_of(state, args.checkpoint)
    if args.lr is not None:
        cfg = replace(cfg, train=replace(cfg.train, lr=args.lr))
    old = old.float()
    try:
        grown = grow(old, args.blocks, args.channels, torch.Generator().manual_seed(args.seed))
    except ValueError as e:
        parser.error(str(e))
    torch.manual_seed(args.seed)
    nets = {f"old {old.blocks}x{old.channels}": copy.deepcopy(old),
            f"grown {args.blocks}x{args.channels}": grown,
            f"fresh {args.blocks}x{args.channels}": PolicyValueNet(args.blocks, args.channels, old.value_hidden)}
    nets[f"distilled {args.blocks}x{args.channels}"] = copy.deepcopy(nets[f"fresh {args.blocks}x{args.channels}"])
    teacher = copy.deepcopy(old).eval()
    heldout, weight, _ = newest_window(args.positions, 1)
    if heldout.begin < replay_of(state, args.checkpoint)["end"]:
        parser.error(f"{args.positions}'s newest segment is not newer than {args.checkpoint}'s replay window")
    held_slots = (heldout.begin + np.arange(len(heldout))) % heldout.capacity
    held = heldout.gather(held_slots)
    window, _, segments = newest_window(args.checkpoint, len(replay_of(state, args.checkpoint)["segments"]))
    print(f"training on {len(window)} positions ({segments} segments of {args.checkpoint}'s window), "
          f"{args.steps} steps of {cfg.train.batch_size} at a learning rate of {cfg.train.lr:g}; "
          f"held out: {len(heldout)} positions of {args.positions}")
    trainers = {name: Trainer(net, cfg.train, torch.device("cpu")) for name, net in nets.items()}
    rng = np.random.default_rng(args.seed)
    print("step  " + "  ".join(f"{name + ' value/policy':>28}" for name in nets))
    for step in range(args.steps + 1):
        if step % args.every == 0 or step == args.steps:
            row = [scores(net.eval(), held, weight) for net in nets.values()]
            print(f"{step:4d}  " + "  ".join(f"{s['value']:>20.4f} / {s['policy']:.3f}" for s in row))
        if step == args.steps:
            break
        batch = window.sample(cfg.train.batch_size, rng, mirror=cfg.train.mirror)
        taught = distilled(batch, teacher, args.distill, cfg.train.value_target_root_weight)
        for name, trainer in trainers.items():
            trainer.step(taught if name.startswith("distilled") else batch)
        for trainer in trainers.values():
            trainer.read_back()
    return 0


if __name__ == "__main__":
    run_tool(main, "growth_check.py")
