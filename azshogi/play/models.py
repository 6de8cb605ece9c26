"""A checkpoint's network for play: the model rebuilt from the run's saved settings, and an
evaluator over it with the run's inference settings. Where a checkpoint is asked for, a run's
folder may be given: its newest checkpoint is played (`network_file`)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

from azshogi.config import Dtype, from_plain
from azshogi.formats.checkpoint import CheckpointError, latest, load, network
from azshogi.formats.paths import checkpoint_number
from azshogi.nn.evaluator import make_evaluator, resolve_device
from azshogi.nn.network import from_config, weights_finite


def network_file(path) -> Path:
    """The file to play for `path`: a file itself; a run's folder (checkpoints/<run>/): its
    newest checkpoint, so a launcher made for the folder follows the run as it trains. Raises
    CheckpointError naming what is missing; for a run's checkpoint file that is gone, it says
    that training deletes old ones (loop.keep_checkpoints) and how to play the newest instead."""
    path = Path(path)
    if path.is_dir():
        newest = latest(path)
        if newest is None:
            raise CheckpointError(f"{path}: no checkpoint in this folder (ckpt-NNNNN.pt)")
        return newest
    if not path.exists() and checkpoint_number(path) is not None:
        raise CheckpointError(f"checkpoint not found: {path} (training keeps only the newest loop.keep_checkpoints "
                              f"checkpoints: give the run's folder, {path.parent}, to play its newest)")
    return path


def load_model(path: Path, device="cpu"):
    """The network of a checkpoint, in eval mode on `device`, with the run's config.
    Returns (model, config)."""
    return model_of(load(Path(path)), path, device)


def model_of(state: dict, path: Path, device="cpu"):
    """load_model's (model, config) of a checkpoint's state already read from `path`."""
    weights, config = network(state, path)
    try:
        cfg = from_plain(config)
        model = from_config(cfg.model)
    except Exception as e:  # a damaged or hand-edited file: whatever the settings' parsing raises
        raise CheckpointError(f"{path}: its saved settings are not valid: {e}") from None
    try:
        model.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError, ValueError) as e:
        raise CheckpointError(f"{path}: the weights do not fit the saved model settings: {e}") from None
    if not weights_finite(model):
        raise CheckpointError(f"{path}: the network's weights are not all finite (NaN or inf): a damaged file")
    return model.to(device).eval(), cfg


def model_evaluator(path: str, device: str = "auto", dtype: Optional[str] = None, max_batch: int = 256):
    """(evaluator, the checkpoint's config) for a checkpoint file, with its run's inference
    settings but not compiled (a slow start for one match or a GUI's isready); dtype None = the
    run's."""
    torch_device = resolve_device(device)
    model, cfg = load_model(network_file(path), torch_device)
    inference = replace(cfg.inference, compile=False, dtype=Dtype(dtype) if dtype else cfg.inference.dtype)
    return make_evaluator(model, torch_device, inference, max_batch), cfg
