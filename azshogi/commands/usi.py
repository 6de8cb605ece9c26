"""`azshogi-usi`: the USI engine on stdin/stdout (play/usi.py), or a launcher script for GUIs.

    azshogi-usi [CHECKPOINT] [--option NAME=VALUE ...]
    azshogi-usi --make-launcher CHECKPOINT OUT [--option NAME=VALUE ...]

CHECKPOINT is a checkpoint (or network) file, or a run's folder (checkpoints/<run>/): the engine
then plays the run's newest checkpoint each time it loads, so a launcher made for the folder
follows the run as it trains. A run's own checkpoint files are deleted as training goes on
(loop.keep_checkpoints): a launcher made for one says so when it is made.

Imports nothing heavy before the engine runs: a GUI's `usi` is answered at once.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from azshogi.commands.cli import ArgumentParser, fail, key_values, user_errors
from azshogi.formats.files import atomic_writer
from azshogi.formats.paths import checkpoint_number
from azshogi.play.usi import OPTIONS, UsiEngine

PROGRAM = "azshogi-usi"


def write_launcher(checkpoint: str, out: str, options: dict) -> Path:
    """Writes an executable that starts this engine on `checkpoint` with `options`: a shell
    script, or a .bat/.cmd file on Windows. GUIs register engines as executables."""
    path = Path(out)
    checkpoint = str(Path(checkpoint).resolve())
    args = [sys.executable, "-m", "azshogi.commands.usi", checkpoint]
    args += [f"--option={k}={v}" for k, v in options.items()]
    if path.suffix.lower() in (".bat", ".cmd"):
        text = "@echo off\r\n" + " ".join(f'"{a}"' for a in args) + " %*\r\n"
    else:
        text = "#!/bin/sh\n# azshogi USI engine launcher (made by azshogi-usi --make-launcher)\nexec " + \
               " ".join(shlex.quote(a) for a in args) + ' "$@"\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path, mode=0o777) as f:  # executable (as the umask allows)
        f.write(text.encode("utf-8"))
    return path


def main(argv=None) -> None:
    parser = ArgumentParser(prog=PROGRAM, description="A USI engine playing an azshogi checkpoint.")
    parser.add_argument("checkpoint", nargs="?", help="checkpoint file, or a run's folder to play its newest "
                                                      "checkpoint (the Checkpoint option's default)")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                        help="an option's default (repeatable), e.g. --option NodesPerMove=400")
    parser.add_argument("--make-launcher", nargs="+", metavar="ARG",
                        help="--make-launcher CHECKPOINT OUT: write an executable script OUT that starts this "
                             "engine on CHECKPOINT, then exit (CHECKPOINT --make-launcher OUT works too)")
    parser.add_argument("--list-options", action="store_true", help="print the options and exit")
    args = parser.parse_args(argv)
    options = key_values(args.option, PROGRAM)
    if args.list_options:
        for o in OPTIONS:
            print(f"{o.name:18} {o.kind:8} default {o.default_text(o.default):10} {o.help}")
        return
    checkpoint = args.checkpoint
    if args.make_launcher:
        given = ([checkpoint] if checkpoint else []) + args.make_launcher
        if len(given) != 2:
            fail(PROGRAM, "--make-launcher takes CHECKPOINT and OUT, e.g. azshogi-usi --make-launcher "
                          "checkpoints/myrun/ckpt-00040.pt ~/engines/azshogi-myrun")
        checkpoint, out = given
    if checkpoint and not Path(checkpoint).exists():
        fail(PROGRAM, f"checkpoint not found: {checkpoint}")
    if checkpoint and Path(checkpoint).is_dir() and not any(Path(checkpoint).glob("ckpt-*.pt")):
        fail(PROGRAM, f"{checkpoint}: no checkpoint in this folder (ckpt-NNNNN.pt)")
    try:
        engine = UsiEngine(sys.stdout, options)  # validates the options
    except ValueError as e:
        fail(PROGRAM, f"--option: {e}")
    if args.make_launcher:
        with user_errors(PROGRAM):  # a folder that cannot be written
            print(write_launcher(checkpoint, out, options))
        if checkpoint_number(Path(checkpoint)) is not None:
            print(f"note: {checkpoint} is a run's checkpoint, which training deletes once newer ones follow "
                  f"(loop.keep_checkpoints); a launcher for the run's folder ({Path(checkpoint).parent}) plays its "
                  f"newest, and azshogi-export network keeps this one for good", file=sys.stderr)
        return
    if checkpoint:
        path = str(Path(checkpoint).resolve())
        engine.started_with = engine.options["Checkpoint"] = path
        # ShogiHome reads an option's default up to its first space and sends that back, and the
        # engine's output is ASCII: a path with spaces or other letters is declared <empty>,
        # which plays the path given here.
        engine.defaults["Checkpoint"] = path if path.isascii() and not any(c.isspace() for c in path) else ""
    # GUIs on Windows may send paths in the system code page: keep undecodable bytes.
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="surrogateescape")
    engine.run(sys.stdin.readline)
    sys.stdout.flush()
    os._exit(0)  # a daemon search thread may still hold the GIL in a forward pass


if __name__ == "__main__":
    main()
