"""`azshogi-export`: a checkpoint's network as dlshogi's ONNX model; hcpe3 games as CSA files.

    azshogi-export onnx CHECKPOINT OUT.onnx [--opset 17]
    azshogi-export hcpe3-to-csa IN.hcpe3 OUTDIR

The ONNX model has dlshogi's interface, so engines that load dlshogi models (dlshogi itself with
TensorRT or ONNX Runtime, and the engines built on it) can play it: inputs `input1` (N, 62, 9, 9)
and `input2` (N, 57, 9, 9) float32, outputs `output_policy` (N, 2187) logits and `output_value`
(N, 1) the side to move's win probability (the sigmoid of the value logit), N dynamic. It needs
the `onnx` package (`pip install 'azshogi[export]'`). Every output file is written to a
temporary name and renamed; a malformed input writes nothing.
"""
from __future__ import annotations

import argparse
import io
import sys
import warnings
from pathlib import Path

import cshogi
import torch

from .checkpoint import CheckpointError, load_model
from .dlshogi_data import DataFormatError, read_hcpe3
from .features import FEATURES1_PLANES, FEATURES2_PLANES
from .files import write_atomically
from .records import write_csa

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


def onnx_bytes(model: torch.nn.Module, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX model of `model` (put in eval mode, on the CPU, fp32)."""
    try:
        import onnx  # noqa: F401  (the TorchScript exporter serializes through it)
    except ImportError:
        raise ExportError("ONNX export needs the onnx package: pip install 'azshogi[export]'") from None
    wrapped = WinProbability(model.float().cpu().eval())
    example = (torch.zeros(2, FEATURES1_PLANES, 9, 9), torch.zeros(2, FEATURES2_PLANES, 9, 9))
    batch = {0: "batch"}
    out = io.BytesIO()
    with warnings.catch_warnings():
        # dynamo=False: the TorchScript exporter handles this plain convolutional network and
        # needs only `onnx`, not onnxscript; its deprecation notice is not for our users.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(wrapped, example, out, dynamo=False, input_names=list(INPUT_NAMES),
                          output_names=list(OUTPUT_NAMES), opset_version=opset, do_constant_folding=True,
                          dynamic_axes={name: batch for name in INPUT_NAMES + OUTPUT_NAMES})
    return out.getvalue()


def export_onnx(checkpoint: Path, out: Path, opset: int = DEFAULT_OPSET) -> Path:
    model, _ = load_model(Path(checkpoint))
    data = onnx_bytes(model, opset)
    import onnx

    onnx.checker.check_model(onnx.load_from_string(data))
    write_atomically(Path(out), data)
    return Path(out)


def hcpe3_to_csa(hcpe3: Path, out_dir: Path) -> list[Path]:
    """One CSA file per game, OUTDIR/<stem>-<game index>.csa. The whole input is read and
    checked before anything is written."""
    hcpe3, out_dir = Path(hcpe3), Path(out_dir)
    games = read_hcpe3(hcpe3)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, game in enumerate(games):
        sfen = game.start_sfen()
        start = None if sfen.split(" ")[:3] == cshogi.STARTING_SFEN.split(" ")[:3] else sfen
        path = out_dir / f"{hcpe3.stem}-{i:06d}.csa"
        comment = (f"{hcpe3.name} game {i}: result byte {game.result:#04x}, opponent {game.opponent}, "
                   f"{game.termination.name.lower()}")
        write_csa(path, game.moves_usi, game.termination, ("black", "white"), start, comment)
        written.append(path)
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="azshogi-export", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("onnx", help="a checkpoint's network as a dlshogi-compatible ONNX model")
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset (default {DEFAULT_OPSET})")
    p = sub.add_parser("hcpe3-to-csa", help="the games of an hcpe3 file as CSA records")
    p.add_argument("hcpe3", type=Path)
    p.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "onnx":
            print(export_onnx(args.checkpoint, args.out, args.opset))
        else:
            written = hcpe3_to_csa(args.hcpe3, args.out_dir)
            print(f"{len(written)} games written to {args.out_dir}")
    except (CheckpointError, DataFormatError, ExportError) as e:
        print(f"azshogi-export: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
