"""`azshogi-export`: a checkpoint's network as dlshogi's ONNX model; hcpe3 games as CSA files.

    azshogi-export onnx CHECKPOINT OUT.onnx [--opset 17]
    azshogi-export hcpe3-to-csa IN.hcpe3 OUTDIR
    azshogi-export network CHECKPOINT OUT.pt

The ONNX model has dlshogi's interface, so engines that load dlshogi models (dlshogi itself with
TensorRT or ONNX Runtime, and the engines built on it) can play it: inputs `input1` (N, 62, 9, 9)
and `input2` (N, 57, 9, 9) float32, outputs `output_policy` (N, 2187) logits and `output_value`
(N, 1) the side to move's win probability (the sigmoid of the value logit), N dynamic. It needs
the `onnx` package (`pip install 'azshogi[export]'`). `network` writes the checkpoint's network
alone (its weights and settings, without the optimizer's state or the games in progress: a third
of the file for a run with AdamW), which azshogi-usi, azshogi-arena and this command read as they
read a checkpoint; CHECKPOINT may be a run's folder (its newest checkpoint). Every output file is
written to a temporary name and renamed; a malformed input, a folder that cannot be written, or
an output that would replace the input, a folder or device, or pass for a run's checkpoint
(ckpt-NNNNN.pt in a run's folder) writes nothing and ends in one line.
"""
from __future__ import annotations

from pathlib import Path

from azshogi.commands.cli import ArgumentParser, user_errors
from azshogi.formats.checkpoint import CheckpointError, load, save_network
from azshogi.formats.dlshogi import hcpe3_to_csa
from azshogi.formats.files import DataFormatError, write_atomically
from azshogi.formats.paths import not_an_output
from azshogi.nn.onnx import DEFAULT_OPSET, ExportError, onnx_bytes
from azshogi.play.models import load_model, model_of, network_file


def _not_over_a_checkpoint(checkpoint: Path, out: Path) -> None:
    """An output must not replace its input, a run's checkpoint or something not a file, nor
    add a file a run would take for its checkpoint (paths.not_an_output)."""
    problem = "the input itself" if out.exists() and checkpoint.exists() and out.samefile(checkpoint) \
        else not_an_output(out)
    if problem:
        raise ExportError(f"{out}: not written: {problem}; give it another name")


def export_onnx(checkpoint: Path, out: Path, opset: int = DEFAULT_OPSET) -> Path:
    checkpoint = network_file(checkpoint)  # a run's folder: its newest checkpoint
    _not_over_a_checkpoint(Path(checkpoint), Path(out))
    model, _ = load_model(Path(checkpoint))
    write_atomically(Path(out), onnx_bytes(model, opset))
    return Path(out)


def export_network(checkpoint: Path, out: Path) -> Path:
    checkpoint = network_file(checkpoint)
    _not_over_a_checkpoint(Path(checkpoint), Path(out))
    state = load(Path(checkpoint))
    model_of(state, Path(checkpoint))  # the weights must fit their settings, as for play
    return save_network(state, Path(checkpoint), Path(out))


def main(argv=None) -> None:
    parser = ArgumentParser(prog="azshogi-export", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("onnx", help="a checkpoint's network as a dlshogi-compatible ONNX model")
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset (default {DEFAULT_OPSET})")
    p = sub.add_parser("hcpe3-to-csa", help="the games of an hcpe3 file as CSA records")
    p.add_argument("hcpe3", type=Path)
    p.add_argument("out_dir", type=Path)
    p = sub.add_parser("network", help="a checkpoint's network alone (weights and settings): a smaller file for play")
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    with user_errors("azshogi-export", CheckpointError, DataFormatError, ExportError):  # and a folder not writable
        if args.command == "onnx":
            print(export_onnx(args.checkpoint, args.out, args.opset))
        elif args.command == "network":
            print(export_network(args.checkpoint, args.out))
        else:
            written = hcpe3_to_csa(args.hcpe3, args.out_dir)
            print(f"{len(written)} games written to {args.out_dir}")


if __name__ == "__main__":
    main()
