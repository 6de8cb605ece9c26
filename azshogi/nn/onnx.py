"""The network as a dlshogi-compatible ONNX model: inputs `input1` (N, 62, 9, 9) and `input2`
(N, 57, 9, 9) float32, outputs `output_policy` (N, 2187) logits and `output_value` (N, 1) the side
to move's win probability (the sigmoid of the value logit), N dynamic. Needs the `onnx` package
(`pip install 'azshogi[export]'`). It returns the model's bytes; writing them is the caller's
(commands/export.py, atomically through formats/files.py)."""
from __future__ import annotations

import io
import warnings

import torch

from azshogi.shogi.features import FEATURES1_PLANES, FEATURES2_PLANES

INPUT_NAMES = ("input1", "input2")
OUTPUT_NAMES = ("output_policy", "output_value")
DEFAULT_OPSET = 17


class ExportError(RuntimeError):
    pass


class WinProbability(torch.nn.Module):
    """The network with dlshogi's outputs: (policy logits (N, 2187), win probability (N, 1))."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input1: torch.Tensor, input2: torch.Tensor):
        policy, value = self.model(input1, input2)
        return policy, torch.sigmoid(value)


def _opsets() -> tuple[int, int]:
    """The opsets this PyTorch's TorchScript exporter writes (its private constants, read
    defensively: where they are missing, the exporter alone judges)."""
    from torch.onnx import _constants

    return (getattr(_constants, "ONNX_MIN_OPSET", 1),
            getattr(_constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", getattr(_constants, "ONNX_MAX_OPSET", 10**6)))


def onnx_bytes(model: torch.nn.Module, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX model of `model` (put in eval mode, on the CPU, fp32), checked with
    onnx.checker."""
    try:
        import onnx  # the TorchScript exporter serializes through it
    except ImportError:
        raise ExportError("ONNX export needs the onnx package: pip install 'azshogi[export]'") from None
    low, high = _opsets()
    if not low <= opset <= high:  # checked here: the exporter's own refusal comes after pages of its graph
        raise ExportError(f"--opset {opset}: this PyTorch exports opsets {low} to {high} "
                          f"(the default is {DEFAULT_OPSET})")
    wrapped = WinProbability(model.float().cpu().eval())
    example = (torch.zeros(2, FEATURES1_PLANES, 9, 9), torch.zeros(2, FEATURES2_PLANES, 9, 9))
    batch = {0: "batch"}
    out = io.BytesIO()
    with warnings.catch_warnings():
        # dynamo=False: the TorchScript exporter handles this plain convolutional network and
        # needs only `onnx`, not onnxscript; its deprecation notice is not for our users.
        warnings.simplefilter("ignore", DeprecationWarning)
        # the TorchScript exporter writes to a file object too (the stubs name only paths)
        torch.onnx.export(wrapped, example, out,  # type: ignore[arg-type]
                          dynamo=False, input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
                          opset_version=opset, do_constant_folding=True,
                          dynamic_axes={name: batch for name in INPUT_NAMES + OUTPUT_NAMES})
    data = out.getvalue()
    onnx.checker.check_model(onnx.load_from_string(data))
    return data
