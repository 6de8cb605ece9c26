"""azshogi-pretrain reads dlshogi's files, learns from them, and leaves a checkpoint the loop
continues from; the loop seeds its replay buffer from such files."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import replace

import cshogi
import numpy as np
import pytest
import torch
from conftest import replay_window, run_main
from cshogi import dlshogi
from interop_helpers import (
    CHECKMATE,
    IMPASSE,
    REPETITION,
    play_script,
    small_config,
    write_hcpe,
)
from resume_helpers import assert_same, games_of, plain

from azshogi.commands import train
from azshogi.config import ConfigError
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.dlshogi import Hcpe3Writer, read_hcpe
from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.inference import InferenceNet
from azshogi.nn.network import build
from azshogi.play.models import load_model
from azshogi.search.gumbel import GumbelSearch
from azshogi.search.puct import PuctSearch
from azshogi.search.simulator import Simulator
from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import SelfPlay
from azshogi.selfplay.drivers import InProcessSelfPlay
from azshogi.selfplay.server import InferenceServer
from azshogi.selfplay.workers import WorkerSelfPlay
from azshogi.shogi.rules import Rules
from azshogi.train.loop import Loop
from azshogi.train.pretrain import evaluate, pretrain
from azshogi.train.replay import load_buffer


def test_hcpe_written_with_cshogis_dtype_is_read(tmp_path):
    written = write_hcpe(tmp_path / "a.hcpe", 50, seed=0)
    records, labels = read_hcpe(tmp_path / "a.hcpe")
    assert records.dtype.itemsize == cshogi.HuffmanCodedPosAndEval.itemsize == 38
    np.testing.assert_array_equal(records["hcp"], written["hcp"])
    np.testing.assert_array_equal(records["bestMove16"], written["bestMove16"].astype(np.uint16))
    board = cshogi.Board()
    for i in range(len(records)):
        board.set_hcp(written["hcp"][i])
        move = board.move_from_move16(int(written["bestMove16"][i]) & 0xFFFF)
        assert labels[i] == dlshogi.make_move_label(move, board.turn)
    buffer = load_buffer([tmp_path / "a.hcpe"])
    batch = buffer.gather(np.arange(len(buffer)))
    assert (batch.result == 1).all()  # the side to move won every game of this file
    assert batch.policy.argmax(1).tolist() == labels.tolist()


def test_pretraining_lowers_the_held_out_loss_and_the_loop_continues(tmp_path):
    write_hcpe(tmp_path / "train.hcpe", 400, seed=1)
    write_hcpe(tmp_path / "test.hcpe", 100, seed=2)
    cfg = small_config(tmp_path, "run=pre", f"pretrain.train_files=[{tmp_path / 'train.hcpe'}]",
                       f"pretrain.test_files=[{tmp_path / 'test.hcpe'}]", "pretrain.steps=30",
                       "pretrain.eval_every=10", "train.batch_size=32", "train.optimizer=adamw", "train.lr=0.003")
    loop_cfg = ("train.optimizer=adamw", "train.lr=0.003")  # the optimizer's state carries over
    test = load_buffer([tmp_path / "test.hcpe"])
    slots = np.arange(len(test))
    torch.manual_seed(cfg.seed)  # the network Loop builds first
    before = evaluate(build(1, 16, 32), test, slots, cfg, torch.device("cpu"))
    path = pretrain(cfg, show_progress=False)
    assert path == tmp_path / "checkpoints" / "pre" / "ckpt-00000.pt"
    model, _ = load_model(path)
    after = evaluate(model, test, slots, cfg, torch.device("cpu"))
    assert after.policy_loss < before.policy_loss - 0.5
    assert after.value_loss < before.value_loss
    assert after.policy_accuracy > before.policy_accuracy
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "logs" / "pre"))

    # The run's newest checkpoint: `azshogi run=pre` continues with self-play from it.
    with pytest.raises(ConfigError, match="train.optimizer=adamw"):
        Loop(small_config(tmp_path, "run=pre"), show_progress=False).restore()
    loop = Loop(small_config(tmp_path, "run=pre", *loop_cfg), show_progress=False)
    counters = loop.run()
    assert loop.resumed_from == path
    assert counters.checkpoints == 1 and counters.train_steps == 30 + 2
    # ... and so does another run with resume=PATH.
    other = Loop(small_config(tmp_path, "run=other", f"resume={path}", *loop_cfg), show_progress=False)
    other.run()
    assert other.resumed_from == path and other.counters.train_steps == 32


def test_pretraining_builds_no_selfplay_and_the_loop_starts_its_games_afresh(tmp_path, monkeypatch):
    """azshogi-pretrain composes the run state alone: no Loop, self-play, search, evaluator,
    inference server or workers is built. Its checkpoint holds the trained weights, no games in
    progress and an empty replay window; the loop continues from it with the games a new run
    would start (the same game ids and random streams)."""
    write_hcpe(tmp_path / "t.hcpe", 40, seed=6)
    cfg = small_config(tmp_path, "run=pre", f"pretrain.train_files=[{tmp_path / 't.hcpe'}]", "pretrain.steps=3",
                       "train.batch_size=8")

    def forbidden(self, *args, **kwargs):
        raise AssertionError(f"pretraining built a {type(self).__name__}")

    for cls in (Loop, SelfPlay, InProcessSelfPlay, WorkerSelfPlay, InferenceServer, GumbelSearch, PuctSearch,
                Simulator, LocalEvaluator, InferenceNet):
        monkeypatch.setattr(cls, "__init__", forbidden)
    path = pretrain(cfg, show_progress=False)
    monkeypatch.undo()
    state = ckpt.load(path)
    assert in_progress.num_games(state["selfplay"]) == 0 and state["replay"]["end"] == 0
    assert state["counters"]["train_steps"] == 3 and state["trainer"]["step_count"] == 3

    resumed = Loop(small_config(tmp_path, "run=pre"), show_progress=False)
    resumed.restore()
    assert resumed.resumed_from == path and resumed.counters.train_steps == 3 and len(resumed.replay) == 0
    assert_same(plain(resumed.model.state_dict()), plain(state["model"]), "weights")
    fresh = Loop(small_config(tmp_path, "run=new"), show_progress=False)
    assert_same(games_of(resumed.selfplay.selfplay), games_of(fresh.selfplay.selfplay), "games")


def test_the_loop_seeds_its_buffer_once_from_hcpe_and_hcpe3(tmp_path):
    write_hcpe(tmp_path / "a.hcpe", 30, seed=3)
    writer = Hcpe3Writer()
    for script in (CHECKMATE, IMPASSE, REPETITION):
        writer.add(play_script(*script, Rules(max_plies=320), np.random.default_rng(0)))
    writer.flush(tmp_path / "b.hcpe3")
    seeds = f"replay.seed_files=[{tmp_path / 'a.hcpe'},{tmp_path / 'b.hcpe3'}]"
    loop = Loop(small_config(tmp_path, "run=seeded", seeds), show_progress=False)
    loop.run()
    first = tmp_path / "checkpoints" / "seeded" / "ckpt-00001.pt"
    seeded = int((replay_window(first).game_ids < 0).sum())
    assert seeded == 30 + 1 + 1 + 6
    assert ckpt.load(first)["replay"]["end"] == seeded + loop.counters.positions
    # Self-play games of the phase were written as hcpe3 next to the checkpoint.
    assert (tmp_path / "logs" / "seeded" / "hcpe3" / "ckpt-00001.hcpe3").is_file()
    # Resuming does not seed again.
    again = Loop(small_config(tmp_path, "run=seeded", seeds, "loop.max_checkpoints=2"), show_progress=False)
    again.run()
    state = ckpt.load(tmp_path / "checkpoints" / "seeded" / "ckpt-00002.pt")["replay"]
    assert state["end"] == seeded + again.counters.positions


def test_the_console_script_runs(tmp_path, capsys, monkeypatch):
    write_hcpe(tmp_path / "t.hcpe", 40, seed=4)
    script = os.path.join(os.path.dirname(sys.executable), "azshogi-pretrain")
    done = subprocess.run([script, "run=cli", "model=tiny", "device=cpu", "pretrain.steps=2",
                           "train.batch_size=8", "selfplay.num_actors=2",
                           f"pretrain.train_files=[{tmp_path / 't.hcpe'}]",
                           f"checkpoint_root=\"{tmp_path / 'my runs'}\"", f"log_root={tmp_path / 'l'}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "my runs" / "cli" / "ckpt-00000.pt").is_file()
    assert sorted(os.listdir(tmp_path)) == ["l", "my runs", "t.hcpe"]  # no Hydra outputs/ folder
    # a folder with a space is quoted for Hydra and the shell (the line could not be pasted)
    assert (f"continue with self-play: azshogi run=cli model=tiny 'checkpoint_root=\"{tmp_path / 'my runs'}\"' "
            f"log_root={tmp_path / 'l'}") in done.stderr
    # Its last line's command continues the run (the network's shape and the folders included),
    # here with a tiny self-play phase appended (`azshogi` in this process: test_loop.py runs
    # the command as a process of its own).
    command = re.search(r"continue with self-play: (azshogi .*)$", done.stdout + done.stderr, re.M).group(1)
    args = shlex.split(command)[1:] + ["device=cpu", "selfplay.num_actors=2", "search.num_simulations=2",
                                       "search.max_num_considered_actions=2", "rules.max_plies=6",
                                       "loop.positions_per_checkpoint=4", "loop.steps_per_checkpoint=1",
                                       "loop.max_checkpoints=1", "train.batch_size=8", "selfplay.write_hcpe3=false"]
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, monkeypatch, "azshogi", train.main, args)
    assert code == 0, err
    assert "resumed from" in out + err
    assert (tmp_path / "my runs" / "cli" / "ckpt-00001.pt").is_file()


def test_a_dlshogi_style_hcpe3_file_is_read(tmp_path):
    """Built here byte by byte: an opening-book start position, two random opening moves with no
    candidates (not trained on), dlshogi's 0x16 move-limit result (a draw)."""
    start = cshogi.Board("lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3")
    hcp = np.empty(32, np.uint8)
    start.to_hcp(hcp)
    header = np.zeros(1, [("hcp", "u1", 32), ("moveNum", "<u2"), ("result", "u1"), ("opponent", "u1")])
    header["hcp"], header["moveNum"], header["result"] = hcp, 4, 0x16
    parts, board = [header.tobytes()], start.copy()
    for i, usi in enumerate(["2g2f", "8c8d", "2f2e", "8d8e"]):
        move = board.move_from_usi(usi)
        if i < 2:
            parts.append(np.array([(move & 0xFFFF, 0, 0)], "<u2,<i2,<u2").tobytes())
        else:
            other = next(m for m in board.legal_moves if m != move)
            parts.append(np.array([(move & 0xFFFF, 400, 2)], "<u2,<i2,<u2").tobytes())
            parts.append(np.array([(move & 0xFFFF, 30), (other & 0xFFFF, 10)], "<u2,<u2").tobytes())
        board.push(move)
    (tmp_path / "d.hcpe3").write_bytes(b"".join(parts))
    buffer = load_buffer([tmp_path / "d.hcpe3"])
    assert len(buffer) == 2
    batch = buffer.gather(np.arange(2))
    assert (batch.result == 0).all()  # 0x16: a draw by the move limit, not a white win
    np.testing.assert_allclose(np.sort(batch.policy, axis=1)[:, -2:], [[0.25, 0.75]] * 2)
    # dlshogi: win rate = sigmoid(eval / 756.0864962951762); value = 2 * win rate - 1.
    np.testing.assert_allclose(batch.root_value, 2 / (1 + np.exp(-400 / 756.0864962951762)) - 1, rtol=1e-3)


def test_pretraining_refuses_resume_and_test_files_it_trains_on(tmp_path):
    """Pretraining starts from scratch: a resume= it would leave out unsaid is refused, and a
    test file that is a training file (by another name, a link) would test on trained positions."""
    write_hcpe(tmp_path / "t.hcpe", 40, seed=6)
    (tmp_path / "link.hcpe").symlink_to(tmp_path / "t.hcpe")
    train_files = f"pretrain.train_files=[{tmp_path / 't.hcpe'}]"
    with pytest.raises(ConfigError, match="resume=.*does not resume"):
        pretrain(small_config(tmp_path, "run=pre", train_files, f"resume={tmp_path / 'x.pt'}"), show_progress=False)
    with pytest.raises(ConfigError, match=r"pretrain.test_files: .*link.hcpe is also in pretrain.train_files"):
        pretrain(small_config(tmp_path, "run=pre", train_files, f"pretrain.test_files=[{tmp_path / 'link.hcpe'}]"),
                 show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.hcpe", "t.hcpe"]  # nothing written


def test_ctrl_c_stops_pretraining_after_the_step_in_progress_and_writes_its_checkpoint(tmp_path, monkeypatch, capsys):
    import signal

    from azshogi.train.trainer import Trainer

    write_hcpe(tmp_path / "t.hcpe", 40, seed=6)
    cfg = small_config(tmp_path, "run=pre", f"pretrain.train_files=[{tmp_path / 't.hcpe'}]", "pretrain.steps=50",
                       "train.batch_size=8")
    step = Trainer.step

    def step_then_ctrl_c(self, batch):
        step(self, batch)
        if self.step_count == 3:
            os.kill(os.getpid(), signal.SIGINT)  # in the middle of the third step, as far as the loop knows

    monkeypatch.setattr(Trainer, "step", step_then_ctrl_c)
    path = pretrain(cfg, show_progress=False)
    state = ckpt.load(path)
    assert state["counters"]["train_steps"] == 3 and state["trainer"]["step_count"] == 3  # whole steps only
    said = capsys.readouterr().err
    assert "stopped at step 3 of 50" in said
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers given back
    # A second Ctrl-C while that checkpoint is written waits for it
    import azshogi.train.pretrain as pretrain_module

    written = pretrain_module.save

    def interrupted_save(*args):
        os.kill(os.getpid(), signal.SIGINT)
        return written(*args)

    monkeypatch.setattr(pretrain_module, "save", interrupted_save)
    path = pretrain(replace(cfg, run="pre2"), show_progress=False)  # no KeyboardInterrupt
    assert ckpt.load(path)["counters"]["train_steps"] == 3
