"""`azshogi-bench`: two benchmarks behind one command.

    azshogi-bench [OVERRIDES ...]                  self-play against the network alone (train/bench.py),
                                                   with the trainer's Hydra overrides
    azshogi-bench usi CHECKPOINT|--model BxC ...   the USI engine's NPS through its pipes (play/usi_bench.py)
"""
import sys
import tempfile
from pathlib import Path

from azshogi.commands.cli import ArgumentParser, fail, key_values

USI_PROGRAM = "azshogi-bench usi"


def usi_main(argv) -> None:
    from azshogi.play.usi_bench import POSITIONS, Engine, run, untrained_checkpoint
    from azshogi.play.usi_client import UsiError

    parser = ArgumentParser(prog=USI_PROGRAM,
                            description="NPS of the USI engine (and others, side by side) on fixed positions, "
                                        "measured through its pipes as a GUI sees it.")
    parser.add_argument("checkpoint", nargs="?", help="the checkpoint to play (or --model)")
    parser.add_argument("--model", metavar="BLOCKSxCHANNELS", help="an untrained network of this size, e.g. 10x192")
    parser.add_argument("--go", default="byoyomi 3000", help="the go arguments (default: byoyomi 3000)")
    parser.add_argument("--repeats", type=int, default=3, help="searches per engine and position (default 3)")
    parser.add_argument("--positions", default=",".join(POSITIONS),
                        help=f"comma-separated, of {', '.join(POSITIONS)} (default: all)")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                        help="a setoption for every engine, e.g. --option BatchSize=32 (repeatable)")
    parser.add_argument("--engine", nargs=2, action="append", metavar=("LABEL", "COMMAND"),
                        help="a USI engine to measure (repeatable; default: this azshogi). Each gets the checkpoint "
                             "as its Checkpoint option")
    args = parser.parse_args(argv)
    positions = [p for p in args.positions.split(",") if p]
    unknown = [p for p in positions if p not in POSITIONS]
    if unknown or not positions:
        fail(USI_PROGRAM, f"--positions: unknown {', '.join(unknown) or '(none)'}; use {', '.join(POSITIONS)}")
    if args.repeats < 1:
        fail(USI_PROGRAM, f"--repeats {args.repeats}: must be >= 1")
    if bool(args.checkpoint) == bool(args.model):
        fail(USI_PROGRAM, "give a CHECKPOINT or --model BLOCKSxCHANNELS (one of them)")
    if args.checkpoint:  # a run's folder: its newest checkpoint, as the engine and the arena take it
        from azshogi.formats.checkpoint import CheckpointError
        from azshogi.play.models import network_file

        try:
            args.checkpoint = network_file(args.checkpoint)
        except CheckpointError as e:
            fail(USI_PROGRAM, str(e))
        if not Path(args.checkpoint).is_file():
            fail(USI_PROGRAM, f"checkpoint not found: {args.checkpoint}")
    options = key_values(args.option, USI_PROGRAM)
    engines = [Engine(label, command) for label, command in args.engine or
               [("azshogi", f"{sys.executable} -m azshogi.commands.usi")]]
    with tempfile.TemporaryDirectory() as folder:
        try:
            checkpoint = Path(args.checkpoint).resolve() if args.checkpoint else \
                untrained_checkpoint(args.model, Path(folder))
            run(engines, checkpoint, options, args.go, args.repeats, positions)
        except (ValueError, UsiError) as e:
            fail(USI_PROGRAM, str(e))


def main() -> None:
    if sys.argv[1:2] == ["usi"]:
        usi_main(sys.argv[2:])
        return
    from azshogi.commands.app import hydra_command
    from azshogi.train.bench import run

    hydra_command("azshogi-bench", run, "measures self-play against the network alone, with azshogi's "
                  "settings (`azshogi-bench usi --help`: the USI engine's speed).")()


if __name__ == "__main__":
    main()
