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


def imported_modules(path: pathlib.Path) -> set:
    """The modules of azshogi (dotted, without the package: "play.arena") a file imports, at any
    depth: inside functions and `if TYPE_CHECKING:` too."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("azshogi."):
            module = node.module.split(".", 1)[1]
            for alias in node.names:  # `from azshogi.selfplay import in_progress` imports a module
                sub = f"{module}.{alias.name}"
                out.add(sub if (ROOT / f"{sub.replace('.', '/')}.py").exists() else module)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("azshogi."))
    return out


def import_circles(folder: str) -> list:
    """Every import circle among the modules of one folder: the strongly connected components of
    its import graph with more than one module, or one module importing itself."""
    graph = {f"{folder}.{p.stem}": {m for m in imported_modules(p) if m.startswith(folder + ".")}
             for p in (ROOT / folder).glob("*.py")}
    index: dict = {}
    low: dict = {}
    stack: list = []
    circles = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1 or module in graph[module]:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_the_circle_finder_finds_a_circle_through_a_function_local_import(tmp_path, monkeypatch):
    folder = tmp_path / "azshogi" / "demo"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("from azshogi.demo.b import f\n")
    (folder / "b.py").write_text("def f():\n    from azshogi.demo import c\n")
    (folder / "c.py").write_text("import azshogi.demo.a\n")
    (folder / "d.py").write_text("from azshogi.demo.a import x\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "azshogi")
    assert import_circles("demo") == [["demo.a", "demo.b", "demo.c"]]


def test_no_import_circles_in_play_and_selfplay():
    """A module's place in its folder says what it may import: no two modules of play/ or
    selfplay/ import each other, directly or round a circle, not even inside a function."""
    assert {folder: import_circles(folder) for folder in ("play", "selfplay")} == {"play": [], "selfplay": []}
