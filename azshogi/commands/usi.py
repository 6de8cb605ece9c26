"""`azshogi-usi`: the USI engine on stdin/stdout (play/usi.py), or a launcher script for GUIs.

    azshogi-usi [CHECKPOINT] [--option NAME=VALUE ...]
    azshogi-usi --make-launcher CHECKPOINT OUT [--option NAME=VALUE ...]
"""
from __future__ import annotations

import argparse
import os
import shlex
import stat
import sys
from pathlib import Path

from azshogi.commands.app import key_values
from azshogi.play.usi import OPTIONS, UsiEngine


def write_launcher(checkpoint: str, out: str, options: dict) -> Path:
    """Writes an executable that starts this engine on `checkpoint` with `options`: a shell
    script, or a .bat/.cmd file on Windows. GUIs register engines as executables."""
    path = Path(out)
    checkpoint = str(Path(checkpoint).resolve())
    args = [sys.executable, "-m", "azshogi.commands.usi", checkpoint] + [f"--option={k}={v}" for k, v in options.items()]
    if path.suffix.lower() in (".bat", ".cmd"):
        text = "@echo off\r\n" + " ".join(f'"{a}"' for a in args) + " %*\r\n"
    else:
        text = "#!/bin/sh\n# azshogi USI engine launcher (made by azshogi-usi --make-launcher)\nexec " + \
               " ".join(shlex.quote(a) for a in args) + ' "$@"\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="azshogi-usi", description="A USI engine playing an azshogi checkpoint.")
    parser.add_argument("checkpoint", nargs="?", help="checkpoint file (the Checkpoint option's default)")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                        help="an option's default (repeatable), e.g. --option NodesPerMove=400")
    parser.add_argument("--make-launcher", metavar="OUT",
                        help="write an executable script OUT that starts this engine on CHECKPOINT, then exit")
    parser.add_argument("--list-options", action="store_true", help="print the options and exit")
    args = parser.parse_args(argv)
    options = key_values(args.option, "azshogi-usi")
    if args.list_options:
        for o in OPTIONS:
            print(f"{o.name:18} {o.kind:8} default {o.default!r:10} {o.help}")
        return
    if args.make_launcher:
        if not args.checkpoint:
            parser.error("--make-launcher needs the CHECKPOINT argument")
        if not Path(args.checkpoint).is_file():
            parser.error(f"checkpoint not found: {args.checkpoint}")
        UsiEngine(open(os.devnull, "w"), options)  # validates the options
        print(write_launcher(args.checkpoint, args.make_launcher, options))
        return
    if args.checkpoint:
        options["Checkpoint"] = str(Path(args.checkpoint).resolve())
    try:
        engine = UsiEngine(sys.stdout, options)
    except ValueError as e:
        parser.error(str(e))
    # GUIs on Windows may send paths in the system code page: keep undecodable bytes.
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="surrogateescape")
    engine.run(sys.stdin.readline)
    sys.stdout.flush()
    os._exit(0)  # a daemon search thread may still hold the GIL in a forward pass


if __name__ == "__main__":
    main()
