"""Renders TensorBoard scalars of a run as one PNG (for the docs).

    pip install -e ".[docs]"     # matplotlib
    python docs/tools/plot_scalars.py logs/cpu docs/strength-eval.png 'eval/win_rate/*' 'eval/elo/*' eval/rating
"""
from __future__ import annotations

import fnmatch
import logging
import sys


def fail(message: str) -> None:
    print(f"plot_scalars.py: error: {message}", file=sys.stderr)
    sys.exit(2)


try:
    import matplotlib
except ModuleNotFoundError:
    fail('needs matplotlib: pip install -e ".[docs]" (or pip install matplotlib)')

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def main(log_dir: str, out: str, *patterns: str) -> None:
    # A resumed run purges the points past its checkpoint's step (TensorBoard's purge_step) and
    # writes again those it keeps (a stopped phase's selfplay/live/ points, train/monitor.py):
    # TensorBoard's warning counts what the purge removed, not points lost.
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    from pathlib import Path

    if not Path(log_dir).is_dir():
        fail(f"{log_dir}: no such folder (a run's log folder: logs/RUN)")
    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    groups = [(p, [t for t in tags if fnmatch.fnmatch(t, p)]) for p in patterns]
    groups = [(p, ts) for p, ts in groups if ts]
    if not groups:
        fail(f"no scalars match {patterns} in {log_dir}; tags: {tags}")
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 3 * len(groups)), squeeze=False)
    for ax, (pattern, names) in zip(axes[:, 0], groups):
        for name in names:
            events = acc.Scalars(name)
            ax.plot([e.step for e in events], [e.value for e in events], marker="o", label=name)
        ax.set_title(pattern)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"wrote {out}: {', '.join(n for _, ns in groups for n in ns)}")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit("usage: python docs/tools/plot_scalars.py LOG_DIR OUT.png TAG_PATTERN ...")
    main(*sys.argv[1:])
