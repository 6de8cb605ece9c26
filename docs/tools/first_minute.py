"""The first minute of a run, as a new user sees it: when is the self-play bar drawn, when does
it first show a move played, and when does TensorBoard first have a scalar? (docs/benchmarks.md)

    python docs/tools/first_minute.py                  # `azshogi` with the defaults
    python docs/tools/first_minute.py +experiment=cpu  # any overrides

Starts `azshogi OVERRIDES` in a pseudo-terminal (as in a shell: the bar is drawn), in a temporary
folder, for `--seconds`; polls the run's TensorBoard folder every half second; then stops the
run with SIGTERM. Times count from the start of the command. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MOVES = re.compile(rb"([0-9][0-9,]*) moves, ")


def first_scalar(log_dir: Path) -> bool:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not log_dir.is_dir():
        return False
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return bool(acc.Tags()["scalars"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=70.0)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="azshogi-first-minute-"))
    azshogi = shutil.which("azshogi") or os.path.join(os.path.dirname(sys.executable), "azshogi")
    # A terminal 200 columns wide (the pseudo-terminal of `script` has none, and tqdm would draw
    # nothing in 0 columns).
    command = " ".join(["stty cols 200 rows 50;", azshogi, "run=first", *args.overrides])
    out = folder / "typescript"
    start = time.monotonic()
    proc = subprocess.Popen(["script", "-qfec", command, str(out)], cwd=folder, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    drawn_s = bar_s = scalars_s = None
    moves_seen = 0
    try:
        while time.monotonic() - start < args.seconds and proc.poll() is None:
            now = time.monotonic() - start
            data = out.read_bytes() if out.exists() else b""
            counts = [int(m.replace(b",", b"")) for m in MOVES.findall(data)]
            if drawn_s is None and counts:
                drawn_s = now
            if bar_s is None and any(counts):
                bar_s = now
            moves_seen = max(counts, default=0)
            if scalars_s is None and first_scalar(folder / "logs" / "first"):
                scalars_s = now
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    print(json.dumps({"command": f"azshogi {' '.join(args.overrides)}".strip(), "seconds": args.seconds,
                      "bar_drawn_s": drawn_s and round(drawn_s, 1),
                      "first_move_on_the_bar_s": bar_s and round(bar_s, 1),
                      "first_tensorboard_scalar_s": scalars_s and round(scalars_s, 1),
                      "moves_shown_last": moves_seen}))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
