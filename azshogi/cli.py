"""The `azshogi` command (also `python -m azshogi`): Hydra parses overrides, `train` runs."""
from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from .checkpoint import CheckpointError
from .config import ConfigError, register_configs, to_config
from .dlshogi_data import DataFormatError
from .server import WorkerError
from .trainer import TrainingDiverged

register_configs()


def _fail(message: str) -> None:
    print(f"azshogi: error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path="pkg://azshogi.conf", config_name="config")
def _main(dict_cfg: DictConfig) -> None:
    try:
        cfg = to_config(dict_cfg)
    except ConfigError as e:
        _fail(str(e))
    from .loop import train  # after validation: a bad override fails before torch is set up

    try:
        train(cfg)
    except (ConfigError, CheckpointError, DataFormatError, TrainingDiverged, WorkerError) as e:
        _fail(str(e))


def main() -> None:
    _main()


if __name__ == "__main__":
    main()
