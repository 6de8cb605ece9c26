"""Shared fixtures: tiny networks and small configs built through Hydra's compose API."""
from __future__ import annotations

import copy
import functools
import importlib.util
import os
import signal
import sys
from pathlib import Path

# A test run started in the background (`nohup ... &`, a script's `cmd &`) ignores SIGINT, and so
# would the processes it starts: the tests of what Ctrl-C does need it delivered, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# One thread for torch here and in the processes the tests start: the tests' networks are tiny,
# and on a machine busier than its cores (tests running side by side) a second thread makes a
# forward pass wait on it: 1.2 ms becomes 90 ms.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from azshogi.config import register_configs, to_config
from azshogi.nn.network import build

register_configs()
torch.set_num_threads(1)

# A loop small enough for a test: a few seconds per checkpoint on a 2-core CPU.
TINY = [
    "model=tiny", "search.num_simulations=4", "search.max_num_considered_actions=4",
    "selfplay.num_actors=6", "inference.dtype=fp32", "rules.max_plies=24",
    "replay.capacity=2000", "train.batch_size=16", "train.warmup_steps=2", "train.log_every=1",
    "loop.positions_per_checkpoint=60", "loop.steps_per_checkpoint=4", "loop.selfplay_games_saved=1",
]


# With pytest-xdist (the README's `python -m pytest -n auto`): the tests that start a local Ray
# instance run on one worker, one after another, so two Ray instances never start side by side and
# test_cluster.py's cluster starts once; every other test goes wherever a worker is free. (Not an
# xdist_group mark: pytest 9.2 ignores the node id xdist 3.8 rewrites for it, so the marked tests
# went to any worker.)
RAY_TESTS = ("tests/test_cluster.py::", "docs/cluster.md")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsTogether(LoadScopeScheduling):
        """Each test a unit of its own, but the Ray tests one unit (sent first: the largest)."""

        def _split_scope(self, nodeid: str) -> str:
            return "ray" if any(name in nodeid for name in RAY_TESTS) else nodeid

    return RayTestsTogether(config, log)


def games_in_progress(state: dict) -> list:
    """A checkpoint's (or a driver's) games in progress, one dict per game: game_id, moves (USI),
    root_values, hcps, labels, probs (selfplay/in_progress.py)."""
    from azshogi.selfplay import in_progress

    return in_progress.unpack(state["selfplay"] if "selfplay" in state else state)


def replay_window(checkpoint_file):
    """The replay window a checkpoint file names, read from the store beside it (TrainingPositions)."""
    from azshogi.formats import checkpoint as ckpt
    from azshogi.formats.paths import replay_store_of
    from azshogi.formats.replay_store import ReplayStore

    replay = ckpt.load(checkpoint_file)["replay"]
    return ReplayStore(replay_store_of(checkpoint_file)).read(replay["segments"], replay["begin"], replay["end"])


@functools.lru_cache(maxsize=None)
def docs_tool(path: str):
    """A docs/tools script (a path from the project's root) as a module, its main() not run."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, Path(__file__).resolve().parents[1] / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...]):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="azshogi.conf", version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def compose_config(overrides=()):
    """The DictConfig `azshogi OVERRIDES...` would see: a copy of the one composed for these
    overrides (Hydra takes about 0.2 s a composition; tests ask for the same ones again)."""
    return copy.deepcopy(_composed(tuple(overrides)))


def run_main(capsys, monkeypatch, program: str, main, args: list[str]) -> tuple[int, str, str]:
    """`program ARGS` in this process, as its console script runs it (sys.argv, exit code):
    (exit code, stdout, stderr). A process of its own costs 3 s of imports; one test per
    command runs the real console script."""
    GlobalHydra.instance().clear()
    monkeypatch.setattr(sys, "argv", [program, *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        GlobalHydra.instance().clear()
    out, err = capsys.readouterr()
    return code, out, err


def play_games(cfg, games: int):
    """The first `games` games that `cfg`'s self-play finishes (its driver built as a run builds
    it, then closed), and the driver's totals."""
    from azshogi.train.loop import build_components

    parts = build_components(cfg)
    try:
        finished: list = []
        for game in parts.selfplay.play(until=lambda: len(finished) >= games):
            finished.append(game)
        return finished, parts.selfplay.totals()
    finally:
        parts.selfplay.close()


@pytest.fixture
def tiny_config(tmp_path):
    """make(extra overrides...) -> validated Config writing under tmp_path."""

    def make(*overrides, run="t"):
        # The run and its folders are set on the composed config, as their overrides would set
        # them (an override among `overrides` wins), so that tests share compositions.
        dict_cfg = compose_config(TINY + list(overrides))
        for key, value in (("run", run), ("checkpoint_root", str(tmp_path / "checkpoints")),
                           ("log_root", str(tmp_path / "logs"))):
            if not any(o.lstrip("+").startswith(f"{key}=") for o in overrides):
                dict_cfg[key] = value
        return to_config(dict_cfg)

    return make


@pytest.fixture(scope="session")
def tiny_run_made(tmp_path_factory):
    """tiny_config's run 't' trained to checkpoint 1, once for the session: the folder holding its
    checkpoints/ and logs/."""
    from azshogi.train.loop import train

    root = tmp_path_factory.mktemp("tiny-run")
    train(to_config(compose_config(TINY + ["run=t", f"checkpoint_root={root / 'checkpoints'}",
                                           f"log_root={root / 'logs'}", "loop.max_checkpoints=1"])),
          show_progress=False)
    return root


@pytest.fixture
def tiny_run(tiny_run_made, tmp_path):
    """tiny_config's run 't' stopped at its first checkpoint, in this test's tmp_path (checkpoints/t
    and logs/t, copied from the session's): `tiny_config(...)` resumes it. Returns that checkpoint."""
    import shutil

    for folder in ("checkpoints", "logs"):
        shutil.copytree(tiny_run_made / folder, tmp_path / folder)
    return tmp_path / "checkpoints" / "t" / "ckpt-00001.pt"


@pytest.fixture
def tiny_net():
    torch.manual_seed(0)
    return build(1, 16, 32).eval()


class FunctionEvaluator:
    """An evaluator computed by a Python function of the features (for hand-made searches):
    fn(features1 (B, 62, 9, 9), features2 (B, 57, 9, 9)) -> (logits (B, 2187), win probability
    (B,)). It sees the planes as they cross the boundary (packed, then expanded) and answers
    with the logits of the legal moves, as every evaluator does."""

    def __init__(self, fn):
        from azshogi.shogi.network_io import EvaluatorTotals

        self.fn = fn
        self.stats = EvaluatorTotals()

    def allocate(self, rows):
        from azshogi.shogi.network_io import LeafBatch

        return LeafBatch(rows)

    def evaluate(self, batch):
        from azshogi.shogi import features

        k = batch.size
        logits, probability = self.fn(*features.unpack(batch.packed[:k]))
        rows = np.repeat(np.arange(k), batch.counts[:k])
        self.stats.add(k, 0.0)
        return (np.asarray(logits, np.float32)[rows, batch.labels[:batch.num_labels]],
                np.asarray(probability, np.float32))


def uniform_evaluator(value=0.5):
    def fn(f1, f2):
        n = len(f1)
        return np.zeros((n, 2187), np.float32), np.full(n, value, np.float32)

    return FunctionEvaluator(fn)
