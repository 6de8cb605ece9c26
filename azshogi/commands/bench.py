"""`azshogi-bench` (train/bench.py) as a Hydra command."""
from azshogi.commands.app import hydra_command
from azshogi.train.bench import run

main = hydra_command("azshogi-bench", run)

if __name__ == "__main__":
    main()
