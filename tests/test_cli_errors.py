"""A user's mistakes with the Hydra commands (azshogi, azshogi-pretrain, azshogi-bench) and
azshogi-export end in one line `PROGRAM: error: ...` naming the input, exit code 2, no traceback,
nothing written; `--help` says what the program is. (azshogi-arena's and azshogi-usi's mistakes:
test_arena.py and test_usi_engine.py.)"""
from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_main

from azshogi.commands import bench, export, pretrain, train
from azshogi.commands.app import hydra_command
from azshogi.formats.replay_store import ReplayStoreError

HYDRA_MISTAKES = [
    (["device=cuda:99"], "device='cuda:99'"),  # no CUDA here, or not that many devices
    (["device=gpu"], "device"),
    (["search.num_simulations=abc"], "search.num_simulations=abc"),
    (["nosuch.key=1"], "nosuch"),
    # Hydra's hint for a mistyped key is `+key=value`, which it then accepts: both are errors.
    (["search.num_simulation=8"], "search.num_simulation: no such setting (did you mean search.num_simulations?)"),
    (["+search.num_simulation=8"], "search.num_simulation: no such setting (did you mean search.num_simulations?)"),
    (["+nosuch=1"], "nosuch: no such setting"),
    (["model=huge"], "model/huge"),  # and the allowed ones
    (["search.num_simulations=["], "'['"),
    (["resume=missing.pt"], "missing.pt"),
    # inf passes a range check (train.lr > 0) and would train into NaN weights
    (["replay.capacity=9"], "replay.capacity=9: must be >= 10"),  # too small for one position's targets
    (["replay.seed_files=[a.hcpe,a.hcpe]"], "replay.seed_files[1]='a.hcpe': is named before in the list"),
    (["train.lr=inf"], "train.lr=inf: must be "),
    (["search.c_scale=inf"], "search.c_scale=inf: must be a finite number"),
    (["+stages.hot={from_checkpoint:2,set:{train:{lr:1e400}}}"], "stages.hot.set.train.lr=inf: must be "),
    # past any sense: numpy's traceback (-1: a seed), a network that never finished building, 1e3 for 1e-3
    (["seed=-1"], "seed=-1: must be in [0, 2**63)"),
    (["model.blocks=1000000000000"], "model.blocks=1000000000000: must be in [1, 256]"),
    (["train.lr=1e3"], "train.lr=1000.0: must be in (0, 10]"),
    (["replay.capacity=100", "train.batch_size=101"], "train.batch_size=101: must be in [1, replay.capacity]"),
    # Hydra's and OmegaConf's tracebacks: an interpolation, a group given a number
    (["train.lr=${nosuch}"], "train.lr: Interpolation key 'nosuch' not found"),
    (["model=5"], "model=5: a config group takes the name of one of its options: cpu, large, medium, small, tiny"),
    (["model=[5]"], "model=[5]: a config group takes the name of one of its options"),
    # Hydra's grammar: a value it reads only quoted said "LexerNoViableAltException ...; ^"
    (["checkpoint_root=/tmp/日本語"], "checkpoint_root=/tmp/日本語: quote such a value for Hydra, 'KEY=\"VALUE\"'"),
    (["checkpoint_root=~/runs"], "quote such a value for Hydra"),
]


@pytest.mark.parametrize("program, main", [("azshogi", train.main), ("azshogi-pretrain", pretrain.main),
                                           ("azshogi-bench", bench.main)])
def test_hydra_commands_mistakes_end_in_one_line(program, main, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for args, named in HYDRA_MISTAKES + [(["model=nope", "device=cpu"], "cpu, large, medium, small, tiny")]:
        if program == "azshogi-pretrain":  # its files are read after the settings are checked
            args, named = (["pretrain.train_files=[missing.hcpe3]"] + args[1:], "missing.hcpe3") \
                if args[0].startswith("resume=") else (args + ["pretrain.train_files=[missing.hcpe3]"], named)
        if program == "azshogi-bench" and args[0].startswith("resume="):
            continue  # the bench measures an untrained network
        code, _, err = run_main(capsys, monkeypatch, program, main, args)
        assert code == 2, (args, err)
        assert err.count("\n") == 1 and err.startswith(f"{program}: error: "), err
        assert named in err, (named, err)
    assert list(tmp_path.iterdir()) == []


def test_a_plus_adds_groups_and_free_keys_but_no_setting(capsys, monkeypatch):
    """`+experiment=...` (a config group) and `+eval.usi_options.NAME=...` (a dict whose keys are
    free) pass the check; `+model.anything` does not."""
    from azshogi.commands.app import check_overrides

    for ok in (["+experiment=smoke"], ["+eval.usi_options.UCI_Variant=shogi"], ["++search.num_simulations=3"],
               ["log_root=${hydra:runtime.cwd}/logs"]):  # resolved from the Hydra config
        monkeypatch.setattr(sys, "argv", ["azshogi", *ok])
        check_overrides("azshogi")  # returns: no exit
    monkeypatch.setattr(sys, "argv", ["azshogi", "+model.width=3"])
    with pytest.raises(SystemExit):
        check_overrides("azshogi")
    assert capsys.readouterr().err == ("azshogi: error: model.width: no such setting (see --help for the settings); "
                                       "a '+' adds no setting to azshogi's config\n")
    # a stage of the preset added again: it was merged into the preset's (its until_checkpoint kept)
    monkeypatch.setattr(sys, "argv", ["azshogi", "+experiment=cpu", "+stages.cool={from_checkpoint:2,set:{}}"])
    with pytest.raises(SystemExit):
        check_overrides("azshogi")
    assert "+stages.cool: the run's schedule has a stage cool already" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["azshogi", "+experiment=cpu", "+stages.mine={from_checkpoint:2,set:{}}"])
    check_overrides("azshogi")
    # a sweep: its jobs would share the run (Hydra refused seed=1,2 asking for the --multirun it had)
    monkeypatch.setattr(sys, "argv", ["azshogi", "-m", "seed=1,2"])
    with pytest.raises(SystemExit):
        check_overrides("azshogi")
    assert "sweeps (--multirun, -m) are not supported" in capsys.readouterr().err


def test_a_config_folder_of_the_users_own_is_checked_as_hydra_runs_it(capsys, monkeypatch, tmp_path):
    """--config-dir: the check composed azshogi's configs alone and refused the user's preset."""
    from azshogi.commands.app import check_overrides

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\ndefaults:\n  - smoke\nseed: 5\n")
    monkeypatch.setattr(sys, "argv", ["azshogi", "--config-dir", str(tmp_path), "+experiment=mine"])
    check_overrides("azshogi")  # returns: no exit


def test_help_says_what_the_program_is(capsys, monkeypatch):
    code, out, _ = run_main(capsys, monkeypatch, "azshogi", train.main, ["--help"])
    assert code == 0
    assert out.startswith("azshogi: AlphaZero for shogi") and "powered by Hydra" not in out
    assert "README.md" in out and "+experiment=cpu" in out and "model: cpu, large, medium, small, tiny" in out
    _, out, _ = run_main(capsys, monkeypatch, "azshogi-pretrain", pretrain.main, ["--help"])
    assert out.startswith("azshogi-pretrain: trains a network from dlshogi's")


def test_export_mistakes_end_in_one_line(capsys, tmp_path):
    from play_helpers import make_tiny_checkpoint

    (tmp_path / "bad.hcpe3").write_bytes(b"\0" * 10)
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")  # a .pt file, but no checkpoint
    tiny = make_tiny_checkpoint(tmp_path / "tiny.pt")
    for args, named in [(["onnx", str(tmp_path / "nope.pt"), "x.onnx"], "nope.pt"),
                        (["network", str(tmp_path / "tensor.pt"), str(tmp_path / "n.pt")], "tensor.pt"),
                        (["onnx", str(tiny), str(tmp_path / "x.onnx"), "--opset", "99"], "--opset 99"),
                        (["hcpe3-to-csa", str(tmp_path / "nope.hcpe3"), str(tmp_path / "csa")], "nope.hcpe3"),
                        (["hcpe3-to-csa", str(tmp_path / "bad.hcpe3"), str(tmp_path / "csa")], "bad.hcpe3"),
                        (["onnx", "a.pt", "b.onnx", "--opset", "x"], "--opset"),
                        (["csa"], "csa"), ([], "command")]:
        with pytest.raises(SystemExit) as exit:
            export.main(args)
        err = capsys.readouterr().err
        assert exit.value.code == 2, (args, err)
        assert err.count("\n") == 1 and err.startswith("azshogi-export") and ": error: " in err, err
        assert named in err, (named, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hcpe3", "tensor.pt", "tiny.pt"]


def test_resuming_from_a_network_file_says_it_holds_no_run(capsys, monkeypatch, tmp_path):
    from play_helpers import make_tiny_checkpoint

    network = make_tiny_checkpoint(tmp_path / "net.pt")  # what azshogi-export network writes
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", train.main, ["device=cpu", f"resume={network}"])
    assert code == 2 and err.count("\n") == 1
    assert f"{network}: a network alone" in err and "no run's state" in err


def test_a_second_process_on_a_run_stops_at_start_up_naming_the_first(capsys, monkeypatch, tmp_path):
    """Two trainings (or a training and a pretraining) of one run name would overwrite each
    other's checkpoints: the second stops before any work. A holder that was killed holds nothing."""
    import os
    import signal
    import subprocess

    from azshogi.formats import run_lock

    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "checkpoints" / "r" / ".lock"
    wrote = []
    with run_lock.holding(lock, "run 'r'"):
        (lock.parent / "ckpt-00001.pt").write_bytes(b"the first run's")
        for program, main in (("azshogi", train.main), ("azshogi-pretrain", pretrain.main)):
            command = hydra_command(program, wrote.append, "x", run=True) if main is train.main else main
            code, _, err = run_main(capsys, monkeypatch, program, command, ["device=cpu", "run=r"])
            assert code == 2 and err.count("\n") == 1, err
            assert f"{program}: error: run 'r' ({Path('checkpoints/r')}) is in use by pid {os.getpid()}, started " \
                   in err and "name this run otherwise (run=NAME)" in err, err
    assert wrote == [] and (lock.parent / "ckpt-00001.pt").read_bytes() == b"the first run's"

    hold = (f"import time\nfrom azshogi.formats import run_lock\nwith run_lock.holding({str(lock)!r}, 'r'):\n"
            f" print('held', flush=True)\n time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with pytest.raises(run_lock.RunInUse, match=f"pid {holder.pid}"):
        with run_lock.holding(lock, "r"):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    code, _, err = run_main(capsys, monkeypatch, "azshogi", hydra_command("azshogi", wrote.append, "x", run=True),
                            ["device=cpu", "run=r"])
    assert code == 0 and len(wrote) == 1, err


def test_temporary_files_of_killed_writes_go_when_the_run_starts_again(capsys, monkeypatch, tmp_path):
    """kill -9 during a write leaves its temporary file (a whole checkpoint's size each): they
    piled up, and docs/tools/value_material.py read a .tmp-*.hcpe3 as records."""
    monkeypatch.chdir(tmp_path)
    left = [tmp_path / "checkpoints" / "r" / ".tmp-a1.pt", tmp_path / "checkpoints" / "r" / "replay" / ".tmp-b2.seg",
            tmp_path / "logs" / "r" / "hcpe3" / ".tmp-c3.hcpe3"]
    kept = [tmp_path / "checkpoints" / "r" / "ckpt-00001.pt", tmp_path / "logs" / "other" / ".tmp-d4.hcpe3"]
    for path in left + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    code, _, err = run_main(capsys, monkeypatch, "azshogi", hydra_command("azshogi", lambda cfg: None, "x", run=True),
                            ["device=cpu", "run=r"])
    assert code == 0, err
    assert [p.exists() for p in left + kept] == [False, False, False, True, True]  # another run's are its own


def test_a_second_ctrl_c_stops_at_once_without_a_traceback(capsys, monkeypatch, tmp_path):
    """The loop's signal handler raises KeyboardInterrupt on a second Ctrl-C during the stop
    (test_loop.py): the command ends with one line and the shell's code for SIGINT."""
    def body(cfg):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", hydra_command("azshogi", body, "x"), ["device=cpu"])
    assert code == 130
    assert err == "azshogi: interrupted: stopped at once, without a checkpoint\n"


def test_a_folder_that_cannot_be_written_is_found_before_any_work(capsys, monkeypatch, tmp_path):
    """A checkpoint or log folder (or hydra.run.dir) that cannot be written stops the command at
    start-up, before self-play, in one line naming the folder and its setting; nothing is left."""
    from azshogi.commands.app import run_folders
    from azshogi.formats import files

    started = []
    main = hydra_command("azshogi", started.append, "x", writes=run_folders)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")  # a file where a folder should be
    for args, named in [(["checkpoint_root=afile/ck"], "cannot write in afile/ck/default (checkpoint_root): "),
                        (["log_root=afile/logs"], "cannot write in afile/logs/default (log_root): "),
                        (["hydra.run.dir=afile/out"], "cannot write in afile/out (hydra.run.dir): ")]:
        code, _, err = run_main(capsys, monkeypatch, "azshogi", main, ["device=cpu", *args])
        assert code == 2 and err.count("\n") == 1 and named in err, (args, err)
    assert started == [] and [p.name for p in tmp_path.iterdir()] == ["afile"]
    (tmp_path / "unmounted").symlink_to(tmp_path / "disk" / "runs")  # it said "File exists"
    code, _, err = run_main(capsys, monkeypatch, "azshogi", main, ["device=cpu", "checkpoint_root=unmounted"])
    assert code == 2 and f"unmounted is a symbolic link to {tmp_path / 'disk' / 'runs'}, which does not exist" in err
    (tmp_path / "unmounted").unlink()

    # A full disk, for a new run and for a run to resume (its folder exists): found at once.
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    (tmp_path / "afile").unlink()
    code, _, err = run_main(capsys, monkeypatch, "azshogi", main, ["device=cpu", "run=new"])
    assert code == 2 and err == "azshogi: error: cannot write in checkpoints/new (checkpoint_root): " \
                                "No space left on device\n"
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "checkpoints" / "old").mkdir(parents=True)
    (tmp_path / "checkpoints" / "old" / "ckpt-00001.pt").write_bytes(b"kept")
    code, _, err = run_main(capsys, monkeypatch, "azshogi", main, ["device=cpu", "run=old"])
    assert code == 2 and "checkpoints/old (checkpoint_root): No space left on device" in err
    assert started == [] and sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "checkpoints", "checkpoints/old", "checkpoints/old/ckpt-00001.pt"]


@pytest.mark.parametrize("error, said", [
    (OSError(errno.ENOSPC, "No space left on device", "checkpoints/default/ckpt-00003.pt"),
     "checkpoints/default/ckpt-00003.pt: No space left on device"),
    (ReplayStoreError("replay segment file missing: checkpoints/default/replay/000000000040-ab.seg"),
     "replay segment file missing: checkpoints/default/replay/000000000040-ab.seg"),
    (MemoryError(), "out of memory: a setting asks for more than this machine has")])
def test_a_file_error_during_a_run_ends_in_one_line(error, said, capsys, monkeypatch, tmp_path):
    """The disk filling up after start-up, a replay segment gone: one line naming the file, no traceback."""
    def body(cfg):
        raise error

    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", hydra_command("azshogi", body, "x"), ["device=cpu"])
    assert code == 2
    assert err.startswith(f"azshogi: error: {said}") and err.count("\n") == 1


def test_writing_into_a_folder_that_cannot_be_written_ends_in_one_line(capsys, monkeypatch, tmp_path):
    """azshogi-export's three outputs and azshogi-usi's launcher, into a read-only folder and
    below a file: one line naming what was to be written, exit 2, nothing left behind."""
    import numpy as np
    import torch
    from interop_helpers import CHECKMATE, play_script

    from azshogi.commands import usi
    from azshogi.config import Config, to_plain
    from azshogi.formats import files
    from azshogi.formats.dlshogi import Hcpe3Writer
    from azshogi.nn.network import build
    from azshogi.shogi.rules import Rules

    config = to_plain(Config())
    config["model"].update(blocks=1, channels=8, value_hidden=8)
    network = tmp_path / "net.pt"
    torch.save({"model": build(1, 8, 8).state_dict(), "config": config}, network)
    writer = Hcpe3Writer()
    writer.add(play_script(*CHECKMATE, Rules(max_plies=320), np.random.default_rng(0)))
    writer.flush(tmp_path / "games.hcpe3")
    (tmp_path / "afile").write_text("")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    mkstemp = files.tempfile.mkstemp

    def refused(*args, dir=None, **kwargs):  # (a test run as root writes in any folder)
        if dir is not None and Path(dir) == read_only:
            raise PermissionError(errno.EACCES, "Permission denied", str(read_only / ".tmp-x"))
        return mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(files.tempfile, "mkstemp", refused)
    commands = [("azshogi-export", export.main, ["network", str(network), "{}/out.pt"]),
                ("azshogi-export", export.main, ["onnx", str(network), "{}/out.onnx"]),
                ("azshogi-export", export.main, ["hcpe3-to-csa", str(tmp_path / "games.hcpe3"), "{}"]),
                ("azshogi-usi", usi.main, ["--make-launcher", str(network), "{}/engine"])]
    for program, main, args in commands:
        for folder, named in [(read_only, "read-only/"), (tmp_path / "afile", "afile")]:
            given = [a.format(folder) for a in args]
            with pytest.raises(SystemExit) as exit:
                main(given)
            out, err = capsys.readouterr()
            assert exit.value.code == 2, (given, err)
            assert err.startswith(f"{program}: error: ") and err.count("\n") == 1 and named in err, err
            assert ".tmp-" not in err and out == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile", "games.hcpe3", "net.pt", "read-only"]


def test_the_docs_tools_name_a_damaged_checkpoint_in_one_line(tmp_path, capsys):
    from conftest import docs_tool

    from azshogi.commands.cli import run_tool

    tool = docs_tool("docs/tools/wall_times.py")
    (tmp_path / "ckpt-00001.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as exit_:
        run_tool(lambda: tool.main([str(tmp_path)]), "wall_times.py")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"wall_times.py: error: cannot read {tmp_path / 'ckpt-00001.pt'}"), err


@pytest.mark.parametrize("tool, args, said", [
    ("forward_cost.py", ["--batches", "0"], "--batches, --threads and --windows must be >= 1"),
    ("forward_cost.py", ["--seconds", "0"], "--seconds > 0"),
    ("policy_spread.py", ["x.pt", "--games", "0"], "--games and --plies must be >= 1"),
    ("resign_counts.py", ["checkpoints/x", "--target", "2"], "--target 2.0: a share of false resignations"),
    ("ladder_calibration.py", ["--games", "0"], "--games 0: must be >= 1"),
])
def test_the_docs_tools_check_their_numbers_before_any_work(tool, args, said, capsys, tmp_path):
    from conftest import docs_tool

    module = docs_tool(f"docs/tools/{tool}")
    with pytest.raises(SystemExit) as exit_:
        (module.parse_args if hasattr(module, "parse_args") else module.main)(args)
    assert exit_.value.code == 2 and said in capsys.readouterr().err
    if tool == "ladder_calibration.py":  # --out before the first game, not after it
        (tmp_path / "folder").mkdir()
        with pytest.raises(SystemExit):
            module.parse_args(["--out", str(tmp_path / "folder")])
        assert "cannot be written (a folder)" in capsys.readouterr().err


def test_a_leading_tilde_is_the_users_home(tiny_config):
    """`'checkpoint_root="~/runs"'` (quoted for Hydra; zsh and dash leave ~ in KEY=~/x) made a
    folder named `~` in the working folder."""
    cfg = tiny_config('checkpoint_root="~/runs"', 'log_root="~/logs"', 'replay.seed_files=["~/a.hcpe"]')
    home = Path.home()
    assert (cfg.checkpoint_root, cfg.log_root, cfg.replay.seed_files) == (
        str(home / "runs"), str(home / "logs"), [str(home / "a.hcpe")])
