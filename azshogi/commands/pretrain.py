"""`azshogi-pretrain` (train/pretrain.py) as a Hydra command."""
from azshogi.commands.app import hydra_command, run_folders
from azshogi.train.pretrain import pretrain

main = hydra_command("azshogi-pretrain", pretrain, "trains a network from dlshogi's .hcpe/.hcpe3 files "
                     "(pretrain.train_files) into a checkpoint that azshogi continues with self-play.",
                     writes=run_folders, run=True)

if __name__ == "__main__":
    main()
