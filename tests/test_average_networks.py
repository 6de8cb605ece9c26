"""docs/tools/average_networks.py: the mean of a run's networks over a range of checkpoints (or
their exponential average, as train.average_decay keeps it), as a network file that plays; a
missing checkpoint of the range is named, not averaged around."""
import pytest
import torch
from conftest import docs_tool
from play_helpers import make_tiny_checkpoint

from azshogi.play.models import load_model


def test_the_mean_of_the_range_plays_and_a_gap_is_named(tmp_path):
    tool = docs_tool("docs/tools/average_networks.py")
    run = tmp_path / "checkpoints" / "r"
    run.mkdir(parents=True)
    for n in (3, 4, 5):
        make_tiny_checkpoint(run / f"ckpt-{n:05d}.pt", seed=n)
    tool.main([str(run), "4", "5", str(tmp_path / "mean.pt")])
    mean, _ = load_model(tmp_path / "mean.pt")
    four, _ = load_model(run / "ckpt-00004.pt")
    five, _ = load_model(run / "ckpt-00005.pt")
    for key, value in mean.state_dict().items():
        a, b = four.state_dict()[key], five.state_dict()[key]
        if value.is_floating_point():
            assert torch.allclose(value, (a + b) / 2, atol=1e-6), key
    assert not torch.equal(mean.state_dict()["stem1.weight"], four.state_dict()["stem1.weight"])
    tool.main([str(run), "3", "5", str(tmp_path / "ema.pt"), "--decay", "0.5"])  # what train.average_decay keeps
    ema, _ = load_model(tmp_path / "ema.pt")
    three, _ = load_model(run / "ckpt-00003.pt")
    for key, value in ema.state_dict().items():
        if value.is_floating_point():
            a, b, c = (m.state_dict()[key] for m in (three, four, five))
            assert torch.allclose(value, 0.25 * a + 0.25 * b + 0.5 * c, atol=1e-6), key
    # a run with train.average_decay plays its average; the tool averages what training left
    six = torch.load(make_tiny_checkpoint(run / "ckpt-00006.pt", seed=6), weights_only=True)
    torch.save({**six, "model_average": four.state_dict()}, run / "ckpt-00006.pt")
    tool.main([str(run), "6", "6", str(tmp_path / "trained.pt")])
    trained, _ = load_model(tmp_path / "trained.pt")
    assert all(torch.equal(v, six["model"][k]) for k, v in trained.state_dict().items())
    with pytest.raises(SystemExit, match="no checkpoint 2"):
        tool.main([str(run), "2", "4", str(tmp_path / "gap.pt")])


def test_it_never_writes_over_a_runs_checkpoint_nor_averages_across_a_growth(tmp_path):
    tool = docs_tool("docs/tools/average_networks.py")
    run = tmp_path / "checkpoints" / "r"
    (run / "replay").mkdir(parents=True)  # a run's folder
    for n in (1, 2):
        make_tiny_checkpoint(run / f"ckpt-{n:05d}.pt", seed=n)
    files = {p: p.read_bytes() for p in run.iterdir() if p.is_file()}
    for out in (run / "ckpt-00002.pt", run / "ckpt-00009.pt"):  # its own, or one the run would take for its own
        with pytest.raises(SystemExit, match="not written: .*give it another name"):
            tool.main([str(run), "1", "2", str(out)])
    assert {p: p.read_bytes() for p in run.iterdir() if p.is_file()} == files
    make_tiny_checkpoint(run / "ckpt-00003.pt", seed=3, channels=24)  # a stage grew it
    for decay in ("0", "0.5"):
        with pytest.raises(SystemExit, match="ckpt-00003.pt: a network of another shape"):
            tool.main([str(run), "2", "3", str(tmp_path / "mean.pt"), "--decay", decay])
