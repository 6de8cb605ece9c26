"""The package's import directions (docs/architecture.md): each folder imports only the folders
below it, search/ imports no torch, and nothing imports commands/."""
import ast
import pathlib
import subprocess
import sys

import azshogi

ROOT = pathlib.Path(azshogi.__file__).parent
ALLOWED = {
    "config": set(),
    "shogi": {"config"},
    "search": {"config", "shogi"},
    "formats": {"config", "shogi"},
    "nn": {"config", "shogi", "formats", "search"},  # search: the Evaluator interface it implements
    "selfplay": {"config", "shogi", "nn", "search", "formats"},
    "play": {"config", "shogi", "nn", "search", "formats"},
    "train": {"config", "shogi", "nn", "search", "formats", "selfplay", "play"},
}


def imported_folders(path: pathlib.Path) -> set:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("azshogi."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("azshogi."))
    return out


def test_every_folder_imports_only_the_folders_below_it():
    wrong = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        folder = parts[0] if len(parts) > 1 else path.stem
        if folder not in ALLOWED:
            continue  # commands/, __init__, __main__
        for other in imported_folders(path) - ALLOWED[folder] - {folder}:
            wrong.append(f"{path.relative_to(ROOT)} imports azshogi.{other}")
    assert not wrong, wrong


def test_search_imports_no_torch():
    code = "import sys, azshogi.search, azshogi.search.anytime; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
