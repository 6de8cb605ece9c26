"""azshogi-pretrain reads dlshogi's files, learns from them, and leaves a checkpoint the loop
continues from; the loop seeds its replay buffer from such files."""
from __future__ import annotations

import os
import subprocess
import sys

import cshogi
import numpy as np
import pytest
import torch
from cshogi import dlshogi

from azshogi import checkpoint as ckpt
from azshogi.config import ConfigError
from azshogi.dlshogi_data import Hcpe3Writer, load_buffer, read_hcpe
from azshogi.loop import Loop
from azshogi.network import build
from azshogi.pretrain import evaluate, pretrain
from azshogi.rules import Rules

from interop_helpers import CHECKMATE, IMPASSE, REPETITION, play_script, small_config, write_hcpe


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
    model, _ = ckpt.load_model(path)
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


def test_the_loop_seeds_its_buffer_once_from_hcpe_and_hcpe3(tmp_path):
    write_hcpe(tmp_path / "a.hcpe", 30, seed=3)
    writer = Hcpe3Writer()
    for script in (CHECKMATE, IMPASSE, REPETITION):
        writer.add(play_script(*script, Rules(max_plies=320), np.random.default_rng(0)))
    writer.flush(tmp_path / "b.hcpe3")
    seeds = f"replay.seed_files=[{tmp_path / 'a.hcpe'},{tmp_path / 'b.hcpe3'}]"
    loop = Loop(small_config(tmp_path, "run=seeded", seeds), show_progress=False)
    loop.run()
    state = ckpt.load(tmp_path / "checkpoints" / "seeded" / "ckpt-00001.pt")["replay"]
    seeded = int((state["game_ids"] < 0).sum())
    assert seeded == 30 + 1 + 1 + 6
    assert state["total_added"] == seeded + loop.counters.positions
    # Self-play games of the phase were written as hcpe3 next to the checkpoint.
    assert (tmp_path / "logs" / "seeded" / "hcpe3" / "ckpt-00001.hcpe3").is_file()
    # Resuming does not seed again.
    again = Loop(small_config(tmp_path, "run=seeded", seeds, "loop.max_checkpoints=2"), show_progress=False)
    again.run()
    state = ckpt.load(tmp_path / "checkpoints" / "seeded" / "ckpt-00002.pt")["replay"]
    assert state["total_added"] == seeded + again.counters.positions


def test_the_console_script_runs(tmp_path):
    write_hcpe(tmp_path / "t.hcpe", 40, seed=4)
    script = os.path.join(os.path.dirname(sys.executable), "azshogi-pretrain")
    done = subprocess.run([script, "run=cli", "model=tiny", "device=cpu", "pretrain.steps=2",
                           "train.batch_size=8", "selfplay.num_actors=2", f"pretrain.train_files=[{tmp_path / 't.hcpe'}]",
                           f"checkpoint_root={tmp_path / 'c'}", f"log_root={tmp_path / 'l'}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c" / "cli" / "ckpt-00000.pt").is_file()
    assert sorted(os.listdir(tmp_path)) == ["c", "l", "t.hcpe"]  # no Hydra outputs/ folder
