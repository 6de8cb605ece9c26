"""The shared shape of azshogi's Hydra commands: parse overrides, validate, run, and turn the
errors a user can cause (bad settings, bad files, a diverging run) into one line and exit 2."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from azshogi.commands.cli import fail
from azshogi.config import Config, ConfigError, register_configs, to_config
from azshogi.formats.checkpoint import CheckpointError
from azshogi.formats.dlshogi import DataFormatError
from azshogi.selfplay.server import WorkerError
from azshogi.train.trainer import TrainingDiverged

USER_ERRORS = (ConfigError, CheckpointError, DataFormatError, TrainingDiverged, WorkerError)

register_configs()


def place_run(dict_cfg: DictConfig) -> None:
    """`hydra.run.dir=DIR` places a run: relative `checkpoint_root` and `log_root` go under DIR
    (azshogi writes no Hydra output folder of its own)."""
    run_dir = HydraConfig.get().run.dir
    if run_dir in (None, "", "."):
        return
    for key in ("checkpoint_root", "log_root"):
        if not Path(dict_cfg[key]).is_absolute():
            dict_cfg[key] = str(Path(run_dir) / dict_cfg[key])


def hydra_command(program: str, body: Callable[[Config], object]) -> Callable[[], None]:
    """A console-script main() running `body(config)` on azshogi's Hydra config."""

    @hydra.main(version_base="1.3", config_path="pkg://azshogi.conf", config_name="config")
    def _main(dict_cfg: DictConfig) -> None:
        try:
            place_run(dict_cfg)
            body(to_config(dict_cfg))
        except USER_ERRORS as e:
            fail(program, str(e))

    return _main
