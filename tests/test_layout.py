"""The package's import directions (docs/architecture.md, STYLE.md's map), with no exception:
each folder imports only the folders below it, search/ imports no torch, and nothing imports
commands/."""
import ast
import pathlib
import subprocess
import sys

import azshogi

ROOT = pathlib.Path(azshogi.__file__).parent
BASE = {"shogi", "config"}
ALLOWED = {  # STYLE.md's map: what each folder (or top-level module) may import
    "config": set(),
    "shogi": {"config"},
    "search": BASE,
    "formats": BASE,
    "nn": BASE,
    "selfplay": BASE | {"nn", "search", "formats"},
    "play": BASE | {"nn", "search", "formats"},
    "train": BASE | {"nn", "search", "formats", "selfplay", "play"},
    "commands": {"config", "shogi", "nn", "search", "formats", "selfplay", "play", "train"},  # anything
    "__main__": {"commands"},  # `python -m azshogi`; nothing else imports commands
    "__init__": set(),
}


def imported_folders(path: pathlib.Path) -> set:
    """The folders (or top-level modules) of azshogi that a file imports, at any depth; the
    package itself ("__init__") for `from azshogi import NAME` of a name it defines."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "azshogi":
            out.update(a.name if (ROOT / a.name).exists() or (ROOT / f"{a.name}.py").exists() else "__init__"
                       for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("azshogi."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            out.add(f"a relative import ({'.' * node.level}{node.module or ''})")
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("azshogi."))
    return out


def test_every_folder_imports_only_what_the_map_allows():
    wrong = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        folder = parts[0] if len(parts) > 1 else path.stem
        assert folder in ALLOWED, f"{folder}: a folder the map does not know (add it to STYLE.md and here)"
        for other in imported_folders(path) - ALLOWED[folder] - {folder, "__init__"}:
            wrong.append(f"{path.relative_to(ROOT)} imports azshogi.{other}")
    assert not wrong, wrong


def test_search_imports_no_torch():
    code = "import sys, azshogi.search, azshogi.search.anytime; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
