"""The `azshogi` command (also `python -m azshogi`): Hydra parses overrides, `train` runs."""
from __future__ import annotations

from azshogi.commands.app import hydra_command
from azshogi.train.loop import train

main = hydra_command("azshogi", train)

if __name__ == "__main__":
    main()
