"""`azshogi-pretrain` (train/pretrain.py) as a Hydra command."""
from azshogi.commands.app import hydra_command
from azshogi.train.pretrain import pretrain

main = hydra_command("azshogi-pretrain", pretrain)

if __name__ == "__main__":
    main()
