"""The `azshogi` command (also `python -m azshogi`): Hydra parses overrides, `train` runs.

Nothing heavy is imported before `main()` runs: self-play worker processes start by importing
this script again (multiprocessing's spawn), and a worker needs no torch."""
from __future__ import annotations


def main() -> None:
    from azshogi.commands.app import hydra_command, run_folders
    from azshogi.train.loop import train

    hydra_command("azshogi", train, "AlphaZero for shogi on one workstation: self-play and training in turns, "
                  "checkpoint after checkpoint, until Ctrl-C (which writes one); the same run name resumes.",
                  writes=run_folders, run=True)()


if __name__ == "__main__":
    main()
