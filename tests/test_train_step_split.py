"""docs/tools/train_step_split.py: a run's training step timed in its parts, from its checkpoint."""
from __future__ import annotations

import re

import pytest
from conftest import docs_tool

from azshogi.commands.export import export_network
from azshogi.formats import checkpoint as ckpt
from azshogi.train.loop import train


def test_times_the_assembly_and_the_step_of_a_run_s_own_batches(tiny_config, tmp_path, capsys):
    train(tiny_config("loop.max_checkpoints=1", "train.mirror=true"), show_progress=False)
    last = tmp_path / "checkpoints" / "t" / "ckpt-00001.pt"
    window = ckpt.load(last)["replay"]
    tool = docs_tool("docs/tools/train_step_split.py")
    tool.main([str(last), "--steps", "2", "--rounds", "2"])
    out = capsys.readouterr().out
    # the run's own settings and its whole window, read back from the store beside the checkpoint
    assert re.search(rf"1x16, batch \d+, mirror True, {window['end'] - window['begin']:,} positions in the window "
                     r"\(batches assembled on the host\), device cpu, 2 rounds of 2 steps", out), out
    ms = {name: float(value) for name, value in re.findall(r"^ *(assemble|step|both) +([\d.]+) ms a step", out, re.M)}
    assert set(ms) == {"assemble", "step", "both"} and all(value > 0 for value in ms.values()), out
    assert re.search(r"the assembly is \d+% of a step", out)


def test_bad_counts_and_a_network_alone_are_refused(tiny_run, tmp_path):
    tool = docs_tool("docs/tools/train_step_split.py")
    with pytest.raises(SystemExit):
        tool.main([str(tmp_path / "missing.pt"), "--steps", "0"])
    network = export_network(tiny_run, tmp_path / "network.pt")
    with pytest.raises(SystemExit, match="a network alone"):
        tool.main([str(network)])
