"""azshogi-export: dlshogi's ONNX interface, checked under ONNX Runtime; hcpe3 games as CSA; the
network alone, for play."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from cshogi import CSA
from interop_helpers import (
    CHECKMATE,
    IMPASSE,
    PERPETUAL_CHECK,
    REPETITION,
    play_script,
    random_positions,
)

from azshogi.commands.export import main as export_main
from azshogi.formats.dlshogi import Hcpe3Writer
from azshogi.shogi import features
from azshogi.shogi.rules import Rules


def tiny_checkpoint(tmp_path, seed=0):
    """A checkpoint file as the loop writes it (model and config are what export reads)."""
    from interop_helpers import small_config

    from azshogi.train.loop import Loop

    cfg = small_config(tmp_path, "run=exp", f"seed={seed}")
    loop = Loop(cfg, show_progress=False)
    with torch.no_grad():  # make BatchNorm statistics non-trivial, so the export must carry them
        for module in loop.model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    return loop.save(partial=False), loop.model.eval()


def test_onnx_model_has_dlshogis_interface_and_matches_pytorch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path, model = tiny_checkpoint(tmp_path)
    out = tmp_path / "model.onnx"
    export_main(["onnx", str(path), str(out)])
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape[1:], i.type) for i in session.get_inputs()] == [
        ("input1", [62, 9, 9], "tensor(float)"), ("input2", [57, 9, 9], "tensor(float)")]
    assert [(o.name, o.shape[1:]) for o in session.get_outputs()] == [("output_policy", [2187]), ("output_value", [1])]
    assert all(isinstance(x.shape[0], str) for x in session.get_inputs() + session.get_outputs())  # dynamic batch
    boards = random_positions(13, seed=5)
    for batch in (1, 12):
        x1, x2 = features.allocate(batch)
        for i, board in enumerate(boards[:batch]):
            features.write(board, x1, x2, i)
        policy, value = session.run(None, {"input1": x1, "input2": x2})
        assert policy.shape == (batch, 2187) and value.shape == (batch, 1)
        want_policy, want_value = model.predict(torch.from_numpy(x1), torch.from_numpy(x2))
        np.testing.assert_allclose(policy, want_policy.numpy(), atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(value[:, 0], want_value.numpy(), atol=1e-5)
        assert ((value > 0) & (value < 1)).all()  # a win probability, not a logit
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_network_alone_plays_as_its_checkpoint_and_is_smaller(tmp_path):
    from azshogi.play.models import load_model

    path, model = tiny_checkpoint(tmp_path)
    out = tmp_path / "net.pt"
    export_main(["network", str(path), str(out)])
    assert out.stat().st_size < path.stat().st_size  # no optimizer state, no games in progress
    alone, cfg = load_model(out)
    assert cfg.model == load_model(path)[1].model
    x1, x2 = features.allocate(4)
    for i, board in enumerate(random_positions(4, seed=2)):
        features.write(board, x1, x2, i)
    want = model.predict(torch.from_numpy(x1), torch.from_numpy(x2))
    got = alone.predict(torch.from_numpy(x1), torch.from_numpy(x2))
    for w, g in zip(want, got):
        assert torch.equal(w, g)  # the BatchNorm statistics too
    export_main(["network", str(out), str(tmp_path / "again.pt")])  # the network alone exports as itself
    assert load_model(tmp_path / "again.pt")[1].model == cfg.model


def test_network_of_a_foreign_file_is_one_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "notes.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as exit_:
        export_main(["network", str(bad), str(tmp_path / "net.pt")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.pt" in err, err
    assert not (tmp_path / "net.pt").exists()


@pytest.mark.parametrize("command", ["network", "onnx"])
def test_an_export_never_replaces_a_runs_checkpoint(tmp_path, capsys, command):
    """Neither over its input, nor over another checkpoint of a run, nor as a file the run would
    take for its next checkpoint, nor over something not a file; a run's folder as the input is
    its newest checkpoint, and a checkpoint's name outside any run is only a name."""
    import os

    path, _ = tiny_checkpoint(tmp_path)
    other = path.parent / "ckpt-00009-partial.pt"
    other.write_bytes(path.read_bytes() + b"another")
    files = {p: p.read_bytes() for p in path.parent.iterdir() if p.is_file()}
    os.mkfifo(tmp_path / "fifo")
    for out in (path, other, path.parent / "ckpt-00012.pt", tmp_path / "fifo", tmp_path):
        with pytest.raises(SystemExit) as exit_:
            export_main([command, str(path), str(out)])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{out}: not written: " in err and "another name" in err, err
    assert {p: p.read_bytes() for p in path.parent.iterdir() if p.is_file()} == files
    (tmp_path / "elsewhere").mkdir()
    export_main([command, str(path.parent), str(tmp_path / "elsewhere" / "ckpt-00012.pt")])
    assert capsys.readouterr().out.strip() == str(tmp_path / "elsewhere" / "ckpt-00012.pt")


def test_hcpe3_to_csa_writes_one_game_per_file(tmp_path):
    rules = Rules(max_plies=320)
    writer = Hcpe3Writer()
    scripts = (REPETITION, CHECKMATE, PERPETUAL_CHECK, IMPASSE)
    for script in scripts:
        writer.add(play_script(*script, rules, np.random.default_rng(0)))
    writer.flush(tmp_path / "games.hcpe3")
    export_main(["hcpe3-to-csa", str(tmp_path / "games.hcpe3"), str(tmp_path / "csa")])
    files = sorted((tmp_path / "csa").iterdir())
    assert [f.name for f in files] == [f"games-{i:06d}.csa" for i in range(4)]
    # Self-play ends games at a position's first recurrence: no sennichite, a comment says what ended them.
    endings = ["%CHUDAN", "%TORYO", "%CHUDAN", "%KACHI"]
    for f, (sfen, moves), ending in zip(files, scripts, endings):
        (game,) = CSA.Parser.parse_file(str(f))
        start = sfen or "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
        assert game.sfen.split(" ")[:3] == start.split(" ")[:3]
        assert len(game.moves) == len(moves)
        assert f.read_text().rstrip().endswith(ending)

