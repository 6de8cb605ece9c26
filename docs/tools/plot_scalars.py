"""Renders TensorBoard scalars of a run as one PNG (for the docs).

    pip install matplotlib
    python docs/tools/plot_scalars.py logs/cpu docs/strength-eval.png 'eval/win_rate/*' 'eval/elo/*' eval/rating
"""
from __future__ import annotations

import fnmatch
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def main(log_dir: str, out: str, *patterns: str) -> None:
    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    groups = [(p, [t for t in tags if fnmatch.fnmatch(t, p)]) for p in patterns]
    groups = [(p, ts) for p, ts in groups if ts]
    if not groups:
        raise SystemExit(f"no scalars match {patterns} in {log_dir}; tags: {tags}")
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
    fig.savefig(out, dpi=100)
    print(f"wrote {out}: {', '.join(n for _, ns in groups for n in ns)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
