"""docs/tools/value_material.py, the value-versus-material diagnostic docs/strength.md quotes."""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import cshogi
import pytest
from conftest import docs_tool
from interop_helpers import selfplay_games
from play_helpers import make_tiny_checkpoint

from azshogi.commands import arena
from azshogi.formats.dlshogi import read_hcpe3

TOOL = Path(__file__).resolve().parents[1] / "docs" / "tools" / "value_material.py"


def test_material_is_counted_from_the_side_to_move():
    material = docs_tool("docs/tools/value_material.py").material
    assert material(cshogi.Board()) == 0
    # white's bishop taken into black's hand: black has both bishops (8 each on the yardstick)
    assert material(cshogi.Board("lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b B 1")) == 16
    assert material(cshogi.Board("lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w B 1")) == -16
    # black's rook promoted on 2b (a dragon, 12) and white's bishop in white's hand
    dragon = cshogi.Board("lnsgkgsnl/1r5+R1/ppppppppp/9/9/9/PPPPPPPPP/1B7/LNSGKGSNL w b 1")
    assert material(dragon) == -(8 + 12 - 10 - 8)


def test_it_reads_self_play_and_match_records(tmp_path, capsys):
    checkpoint = make_tiny_checkpoint(tmp_path / "ckpt.pt")
    _, hcpe3, _ = selfplay_games(tmp_path, 3, "rules.max_plies=12")
    records = tmp_path / "matches"
    assert arena.main(["random", "greedy", "--games", "2", "--in-flight", "2", "--max-plies", "12", "--quiet",
                       "--records", str(records)]) in (0, None)
    capsys.readouterr()
    done = subprocess.run([sys.executable, str(TOOL), str(checkpoint), str(hcpe3.parent), str(records)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(self-play|match records).*?: (\d+) positions",
                                                                done.stdout, re.M)}
    assert counts["self-play"] == sum(math.ceil(len(g.moves) / 3) for g in read_hcpe3(hcpe3))
    match_positions = 0
    for path in sorted(records.glob("*.csa")):
        board = cshogi.Board()
        for i, move in enumerate(cshogi.CSA.Parser.parse_file(str(path))[0].moves):
            if board.is_game_over():
                break
            match_positions += i % 3 == 0
            board.push(move)
    assert counts["match records"] == match_positions > 0
    bands = [int(n) for n in re.findall(r"^\| [^|]+ \| (\d+) \| [01]\.\d\d \| [01]\.\d\d \|$", done.stdout, re.M)]
    assert sum(bands) == counts["self-play"] + counts["match records"]


def test_a_missing_record_path_is_named(tmp_path, monkeypatch):
    """In this process (the test above runs the script as written): a string given to sys.exit
    is what Python prints on stderr before exiting with code 1."""
    checkpoint = make_tiny_checkpoint(tmp_path / "ckpt.pt")
    monkeypatch.setattr(sys, "argv", [str(TOOL), str(checkpoint), str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit) as done:
        docs_tool("docs/tools/value_material.py").main()
    assert done.value.code == f"value_material.py: no such file or folder: {tmp_path / 'nowhere'}"
