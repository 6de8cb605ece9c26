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
