"""Checkpoint files: atomic writes, keeping the newest, clear errors."""
import pytest
import torch

from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import checkpoint_name
from azshogi.play.models import load_model


def test_interrupted_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt.save({"value": torch.tensor([1.0])}, tmp_path / checkpoint_name(1, partial=False), keep=3)

    def dies_halfway(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save({"value": torch.tensor([2.0])}, tmp_path / checkpoint_name(2, partial=False), keep=3)
    monkeypatch.undo()
    assert ckpt.latest(tmp_path).name == "ckpt-00001.pt"
    assert ckpt.load(ckpt.latest(tmp_path))["value"].item() == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt-00001.pt"]  # no temporary file left


def test_a_crashed_temporary_file_is_ignored(tmp_path):
    ckpt.save({"value": 1}, tmp_path / checkpoint_name(1, partial=False), keep=3)
    (tmp_path / ".tmp-abc.pt").write_bytes(b"garbage from a killed process")
    assert ckpt.latest(tmp_path).name == "ckpt-00001.pt"


def names(directory):
    return [p.name for p in ckpt.list_checkpoints(directory)]


def test_keeps_the_newest_and_orders_partial_after_full(tmp_path):
    for n in range(1, 5):
        ckpt.save({"n": n}, tmp_path / checkpoint_name(n, partial=False), keep=2)
    assert names(tmp_path) == ["ckpt-00003.pt", "ckpt-00004.pt"]
    # A partial checkpoint does not count towards keep: it pushes out no full one.
    ckpt.save({"n": "4+"}, tmp_path / checkpoint_name(4, partial=True), keep=2)
    assert names(tmp_path) == ["ckpt-00003.pt", "ckpt-00004.pt", "ckpt-00004-partial.pt"]
    assert ckpt.latest(tmp_path).name == "ckpt-00004-partial.pt"
    ckpt.save({"n": "4++"}, tmp_path / checkpoint_name(4, partial=True), keep=1)  # a second stop in the same phase
    assert names(tmp_path) == ["ckpt-00004.pt", "ckpt-00004-partial.pt"]
    ckpt.save({"n": 5}, tmp_path / checkpoint_name(5, partial=False), keep=5)  # supersedes the partial phase
    assert names(tmp_path) == ["ckpt-00004.pt", "ckpt-00005.pt"]


def test_corrupt_checkpoint_names_the_file(tmp_path):
    bad = tmp_path / "ckpt-00001.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ckpt.CheckpointError, match="ckpt-00001.pt"):
        ckpt.load(bad)
    with pytest.raises(ckpt.CheckpointError, match="not found"):
        ckpt.load(tmp_path / "missing.pt")


def test_a_checkpoint_with_a_removed_setting_still_loads(tmp_path):
    from azshogi.config import Config, to_plain
    from azshogi.nn.network import build

    config = to_plain(Config())
    config["search"]["temperature_plies"] = 30  # a key older versions wrote
    config["no_longer_a_section"] = {"x": 1}
    config["model"].update(blocks=1, channels=8, value_hidden=8)
    torch.save({"model": build(1, 8, 8).state_dict(), "config": config}, tmp_path / "old.pt")
    model, cfg = load_model(tmp_path / "old.pt")
    assert cfg.model.channels == 8 and cfg.search.num_simulations == 32


def test_a_format_2_checkpoint_of_the_loop_before_the_run_state_reads_back_and_writes_the_same_file(
        tiny_config, tmp_path):
    """tests/data/format2/make_format2.py: a run stopped in its second self-play phase by the code
    that spelled the checkpoint's layout in Loop.state_dict. Loaded and written again at once,
    it gives the same state (the run state, the replay window, the games in progress), and the
    run goes on."""
    from pathlib import Path

    from resume_helpers import assert_same, plain

    from azshogi.train.loop import Loop, train

    old_file = Path(__file__).parent / "data" / "format2" / "ckpt-00001-partial.pt"
    old = ckpt.load(old_file)
    assert old["format"] == 2 and old["selfplay"]["games"]["moves"][0] and old["trainer"]["optimizer"]["state"]
    overrides = ["model.channels=4", "model.value_hidden=4", "selfplay.num_actors=3", "rules.max_plies=16",
                 "replay.capacity=30", "loop.positions_per_checkpoint=40", "selfplay.write_hcpe3=false",
                 "loop.selfplay_games_saved=0", f"resume={old_file}"]
    loop = Loop(tiny_config(*overrides, "loop.max_checkpoints=2"), show_progress=False)
    loop.restore()
    new = ckpt.load(loop.save(partial=True))
    added = {"model": {"opponent_policy": False},
             "train": {"replay_window": "auto", "opponent_policy_weight": 0.15, "surprise_weight": 0.0,
                       "average_decay": 0.0}}
    for section in ("model", "train"):  # as saved, and the keys added since at their defaults
        before, now = old["config"][section], new["config"][section]
        assert {k: v for k, v in now.items() if k in before} == before, section
        assert {k: v for k, v in now.items() if k not in before} == \
            {k: v for k, v in added[section].items() if k not in before}, section
    # The optimizer now steps fused (without host syncs): its groups say so, and nothing else differs.
    assert all(g["fused"] for g in new["trainer"]["optimizer"]["param_groups"])
    for state in (new, old):
        for group in state["trainer"]["optimizer"]["param_groups"]:
            group.pop("fused", None)
    for counter, default in (("flat_starts", {}), ("resign_threshold", None), ("resign_counts", {}),
                             ("phase_games", {}), ("records_bytes", None)):
        assert new["counters"].pop(counter) == default  # counters added since, at their defaults
    assert new.pop("model_average") is None  # a part added since: no average (train.average_decay=0)
    assert new["trainer"].pop("warm_start") == 0  # added since: the optimizer's warm-up from the run's start
    assert_same(plain({k: v for k, v in new.items() if k != "config"}),
                plain({k: v for k, v in old.items() if k != "config"}), "rewritten")
    counters = train(tiny_config(*overrides, "loop.max_checkpoints=2"), show_progress=False)
    assert counters.checkpoints == 2 and counters.games > old["counters"]["games"]


def test_a_runs_files_are_as_readable_as_the_umask_lets_any_file_be(tmp_path):
    """A copied run is readable by another account (a GUI's) where the user's files are: a
    checkpoint and the network alone get the mode open() would give, not 0600."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = ckpt.save({"model": {}, "config": {}}, tmp_path / checkpoint_name(1, partial=False), keep=3)
        alone = ckpt.save_network(ckpt.load(path), path, tmp_path / "net.pt")
        assert [stat.S_IMODE(p.stat().st_mode) for p in (path, alone)] == [0o644, 0o644]
        os.umask(0o077)  # a user who keeps files private gets private checkpoints
        path = ckpt.save({"model": {}, "config": {}}, tmp_path / checkpoint_name(2, partial=False), keep=3)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_damaged_replay_segment_names_the_checkpoint_before_which_may_resume(tiny_config, tmp_path):
    from azshogi.formats.replay_store import ReplayStoreError
    from azshogi.train.loop import train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1", "loop.max_checkpoints=2")
    train(tiny_config(*small), show_progress=False)
    run = tmp_path / "checkpoints" / "t"
    newest = ckpt.load(run / "ckpt-00002.pt")["replay"]["segments"][-1]["file"]
    segment = run / "replay" / newest
    segment.write_bytes(segment.read_bytes()[:-5])  # cut short
    with pytest.raises(ReplayStoreError) as error:
        train(tiny_config(*small[:2], "loop.max_checkpoints=3"), show_progress=False)
    assert newest in str(error.value) and str(error.value).endswith(
        f"; to resume from the checkpoint before it (ckpt-00001.pt), move ckpt-00002.pt out of {run} and start "
        f"the same command again")
    (run / "ckpt-00002.pt").rename(tmp_path / "ckpt-00002.pt")
    counters = train(tiny_config(*small[:2], "loop.max_checkpoints=3"), show_progress=False)
    assert counters.checkpoints == 3  # from checkpoint 1, whose window ends before that segment


def test_a_damaged_segment_that_several_windows_need_names_the_newest_checkpoint_without_it(tiny_config, tmp_path):
    """Checkpoints 2 and 3 both need the segment of checkpoint 2's phase: the advice goes past
    them to checkpoint 1 at once, rather than one checkpoint per try."""
    from azshogi.formats.replay_store import ReplayStoreError
    from azshogi.train.loop import train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1")
    train(tiny_config(*small, "loop.max_checkpoints=3"), show_progress=False)
    run = tmp_path / "checkpoints" / "t"
    second = ckpt.load(run / "ckpt-00002.pt")["replay"]["segments"][-1]["file"]
    assert second in {ref["file"] for ref in ckpt.load(run / "ckpt-00003.pt")["replay"]["segments"]}
    (run / "replay" / second).unlink()
    with pytest.raises(ReplayStoreError) as error:
        train(tiny_config(*small, "loop.max_checkpoints=4"), show_progress=False)
    assert str(error.value).endswith(
        f"; the newest checkpoint whose window does not need it is ckpt-00001.pt: move ckpt-00003.pt and "
        f"ckpt-00002.pt out of {run} and start the same command again"), str(error.value)
    for name in ("ckpt-00003.pt", "ckpt-00002.pt"):
        (run / name).rename(tmp_path / name)
    assert train(tiny_config(*small, "loop.max_checkpoints=2"), show_progress=False).checkpoints == 2


def test_a_damaged_segment_that_every_checkpoint_needs_may_be_skipped(tiny_config, tmp_path, capsys):
    """The oldest segment of every kept window damaged: no checkpoint could resume (its weights
    and optimizer intact); replay.skip_damaged=true resumes with the window's positions after it."""
    from azshogi.formats.replay_store import ReplayStoreError
    from azshogi.train.loop import Loop, train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1")
    train(tiny_config(*small, "loop.max_checkpoints=2"), show_progress=False)
    run = tmp_path / "checkpoints" / "t"
    window = ckpt.load(run / "ckpt-00002.pt")["replay"]
    first = window["segments"][0]
    (run / "replay" / first["file"]).write_bytes(b"damaged")
    (run / "ckpt-00001.pt").unlink()
    with pytest.raises(ReplayStoreError) as error:
        train(tiny_config(*small, "loop.max_checkpoints=3"), show_progress=False)
    assert str(error.value).endswith("start the same command again with replay.skip_damaged=true"), str(error.value)
    loop = Loop(tiny_config(*small, "loop.max_checkpoints=3", "replay.skip_damaged=true"), show_progress=False)
    loop.restore()
    after = first["first"] + first["count"]
    assert (loop.replay.begin, loop.replay.end) == (after, window["end"])  # the positions after it, all of them
    assert f"{after - window['begin']:,} of its {window['end'] - window['begin']:,} positions left out" in \
        loop.damage_note
    loop.selfplay.close()
    assert train(tiny_config(*small, "loop.max_checkpoints=3", "replay.skip_damaged=true"),
                 show_progress=False).checkpoints == 3


def test_a_damaged_newest_checkpoint_names_the_one_before_it_which_resumes(tiny_config, tmp_path):
    from azshogi.train.loop import train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1", "loop.max_checkpoints=1")
    train(tiny_config(*small), show_progress=False)
    run = tmp_path / "checkpoints" / "t"
    newest = run / "ckpt-00002.pt"
    newest.write_bytes((run / "ckpt-00001.pt").read_bytes()[:1000])  # cut short, as by a disk that failed
    with pytest.raises(ckpt.CheckpointError) as error:
        train(tiny_config(*small), show_progress=False)
    assert str(error.value) == (f"cannot read {newest}: not an azshogi checkpoint (a .pt file that azshogi wrote), "
                                f"or a damaged one; to resume from the checkpoint before it (ckpt-00001.pt), move "
                                f"ckpt-00002.pt out of {run} and start the same command again")
    with pytest.raises(ckpt.CheckpointError):  # resume= cannot go behind the newest: the next start would not
        train(tiny_config(*small, f"resume={run / 'ckpt-00001.pt'}"), show_progress=False)
    newest.rename(tmp_path / "damaged.pt")
    counters = train(tiny_config(*small), show_progress=False)
    assert counters.checkpoints == 1 and counters.train_steps == 1  # resumed (and at its limit)
    (tmp_path / "damaged.pt").rename(newest)
    # The same file given to a new run by resume=: the advice is resume= of the one before it
    with pytest.raises(ckpt.CheckpointError) as error:
        train(tiny_config(*small, f"resume={newest}", run="fork"), show_progress=False)
    assert str(error.value).endswith(f"; to start from the checkpoint before it, give resume={run / 'ckpt-00001.pt'}")
    counters = train(tiny_config(*small, f"resume={run / 'ckpt-00001.pt'}", run="fork"), show_progress=False)
    assert counters.checkpoints == 1
    (run / "ckpt-00001.pt").unlink()  # nothing before the damaged file: the error alone
    with pytest.raises(ckpt.CheckpointError, match="or a damaged one$"):
        train(tiny_config(*small), show_progress=False)


def flip_a_byte_of(path, member_name_end):
    """Changes one byte in the middle of the stored bytes of `path`'s zip member whose name ends
    with `member_name_end`, as a bad disk sector would; the file's size and layout stay."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(member_name_end))
    data = bytearray(path.read_bytes())
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_length + extra_length
    data[start + info.compress_size // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_changed_bytes_in_a_checkpoint_are_found_by_its_checksums(tiny_config, tmp_path):
    """torch.load reads changed bytes of a tensor as other weights, and changed bytes of the
    pickle as other keys or settings (a traceback far from the file): the zip's CRC-32s say so."""
    from azshogi.train.loop import train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1", "loop.max_checkpoints=2")
    train(tiny_config(*small), show_progress=False)
    run = tmp_path / "checkpoints" / "t"
    newest = run / "ckpt-00002.pt"
    flip_a_byte_of(newest, "data/0")  # the first tensor's bytes
    with pytest.raises(ckpt.CheckpointError) as error:
        train(tiny_config(*small, "loop.max_checkpoints=3"), show_progress=False)
    assert str(error.value).startswith(f"cannot read {newest}: a damaged checkpoint (its part ")
    assert "fails its checksum); to resume from the checkpoint before it (ckpt-00001.pt)" in str(error.value)
    with pytest.raises(ckpt.CheckpointError, match="fails its checksum"):  # and wherever a checkpoint is read
        ckpt.load(newest)
