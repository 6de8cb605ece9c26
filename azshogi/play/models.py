"""A checkpoint's network for play: the model rebuilt from the run's saved settings, and an
evaluator over it with the run's inference settings."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

from azshogi.config import Dtype, from_plain
from azshogi.formats.checkpoint import CheckpointError, load, network
from azshogi.nn.evaluator import make_evaluator, resolve_device
from azshogi.nn.network import from_config


def load_model(path: Path, device="cpu"):
    """The network of a checkpoint, in eval mode on `device`, with the run's config.
    Returns (model, config)."""
    return model_of(load(Path(path)), path, device)


def model_of(state: dict, path: Path, device="cpu"):
    """load_model's (model, config) of a checkpoint's state already read from `path`."""
    weights, config = network(state, path)
    cfg = from_plain(config)
    model = from_config(cfg.model)
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:
        raise CheckpointError(f"{path}: the weights do not fit the saved model settings: {e}") from None
    return model.to(device).eval(), cfg


def model_evaluator(path: str, device: str = "auto", dtype: Optional[str] = None, max_batch: int = 256):
    """(evaluator, the checkpoint's config) for a checkpoint file, with its run's inference
    settings but not compiled (a slow start for one match or a GUI's isready); dtype None = the
    run's."""
    torch_device = resolve_device(device)
    model, cfg = load_model(Path(path), torch_device)
    inference = replace(cfg.inference, compile=False, dtype=Dtype(dtype) if dtype else cfg.inference.dtype)
    return make_evaluator(model, torch_device, inference, max_batch), cfg
