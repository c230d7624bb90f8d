"""The import contract: every module imports only its own layer and the layers below it.

Layers, lowest first. A module may import its own layer and anything lower, never higher;
imports inside functions count too (a deferred import is still a dependency). The walk is
static (`ast`), so it sees every import in every file, run or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ckpt_browser

# (layer, its modules or packages). cli sits above tui because `browse` starts the app.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("ckpt_browser", "ckpt_browser.errors", "ckpt_browser.escape",
                "ckpt_browser.limits", "ckpt_browser.model", "ckpt_browser.standins",
                "ckpt_browser.samples", "ckpt_browser.diagnostics")),
    ("readers", ("ckpt_browser.readers",)),
    ("parts", ("ckpt_browser.parts",)),
    ("producers", ("ckpt_browser.producers",)),
    ("remote", ("ckpt_browser.remote",)),
    ("analysis", ("ckpt_browser.analysis",)),
    ("values", ("ckpt_browser.values",)),
    ("export", ("ckpt_browser.export",)),
    ("report", ("ckpt_browser.report",)),
    ("quiz", ("ckpt_browser.quiz",)),
    ("tui", ("ckpt_browser.tui",)),
    ("cli", ("ckpt_browser.cli", "ckpt_browser.commands", "ckpt_browser.__main__")),
)

# Third-party packages and the only layers that may import them. torch and safetensors are
# nowhere: the readers parse the formats themselves, so browsing never pays for torch.
ONLY_IN = {"textual": "tui", "rich": "tui", "fsspec": "remote", "numpy": "values",
           "torch": None, "safetensors": None}
# A module outside those layers that may still import one, and why.
ALSO = {("ckpt_browser.analysis.resume.tiling", "numpy"):
        "counts a DCP tensor's chunks vectorised past 4,096 of them, importing numpy only then"}

ROOT = Path(ckpt_browser.__file__).parent


def layer_of(module: str) -> int:
    """Index in LAYERS of the longest prefix naming `module`."""
    best, index = -1, None
    for i, (_, members) in enumerate(LAYERS):
        for m in members:
            if (module == m or module.startswith(m + ".")) and len(m) > best:
                best, index = len(m), i
    if index is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return index


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, module: str, root: Path) -> list[str]:
    """Every module `path` imports, relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            # `from ckpt_browser import words` imports a module, not a name of the package
            modules = [f"{target}.{a.name}" for a in node.names
                       if (root.parent / (target + "." + a.name).replace(".", "/")).with_suffix(
                           ".py").exists()]
            found += modules if len(modules) == len(node.names) else [target, *modules]
    return found


def violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        mine = layer_of(module)
        for target in imports(path, module, root):
            top = target.split(".")[0]
            if top == root.name:
                if layer_of(target) > mine:
                    bad.append(f"{module} ({LAYERS[mine][0]}) imports {target} "
                               f"({LAYERS[layer_of(target)][0]})")
            elif top in ONLY_IN and LAYERS[mine][0] != ONLY_IN[top] \
                    and (module, top) not in ALSO:
                bad.append(f"{module} ({LAYERS[mine][0]}) imports {top}")
    return bad


def test_no_module_imports_a_higher_layer_or_a_foreign_heavy_package():
    assert violations(ROOT) == []


def test_every_module_is_in_a_layer():
    for path in ROOT.rglob("*.py"):
        layer_of(module_name(path, ROOT))


@pytest.mark.parametrize("source, expected", [
    ("from ckpt_browser.tui.app import CkptApp\n", "imports ckpt_browser.tui.app (tui)"),
    ("def later():\n    from ..analysis import open\n", "imports ckpt_browser.analysis (analysis)"),
    ("from ckpt_browser import cli\n", "imports ckpt_browser.cli (cli)"),
    ("import torch\n", "imports torch"),
])
def test_the_contract_catches_a_back_edge(tmp_path, source, expected):
    """Guard against a vacuous walk: a reader that reaches up, even lazily, is reported."""
    fake = tmp_path / "ckpt_browser"
    (fake / "readers").mkdir(parents=True)
    for name in ("__init__.py", "cli.py", "readers/__init__.py"):
        (fake / name).write_text("")
    (fake / "analysis").mkdir()
    (fake / "analysis" / "__init__.py").write_text("")
    (fake / "tui").mkdir()
    (fake / "tui" / "app.py").write_text("")
    (fake / "readers" / "bad.py").write_text(source)
    found = violations(fake)
    assert len(found) == 1 and found[0].startswith("ckpt_browser.readers.bad (readers)")
    assert found[0].endswith(expected)


def test_the_readme_layout_lists_every_package_and_layer():
    """The README's "Layout of the code" shows one line per package, and the same layers."""
    readme = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Layout of the code", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    listed = {line.split()[0].rstrip("/") for line in block.strip().splitlines()}
    packages = {str(p.parent.relative_to(ROOT.parent)) for p in ROOT.rglob("__init__.py")}
    assert listed == packages
    ground = block.strip().splitlines()[0]
    for module in LAYERS[0][1][1:]:
        name = module.rpartition(".")[2] + ".py"
        assert name in ground or not (ROOT / name).exists(), name
    order = [name for name, _ in LAYERS[1:]]
    said = section.split("in this list, never one below:", 1)[1].split(".\n", 1)[0]
    assert [w.strip(" `/\n").removesuffix(".py") for w in said.split(",")[1:]] == order


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the ckpt_browser modules it imports, deferred imports too."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    return {module: {t for t in imports(path, module, root) if t in paths and t != module}
            for module, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules():
    """A cycle, even through an import inside a function, ties modules that should be read
    and changed one at a time (the readers' detection was one knot of nine)."""
    assert cycles(import_graph(ROOT)) == []


def test_the_cycle_check_sees_a_deferred_import(tmp_path):
    fake = tmp_path / "ckpt_browser"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "a.py").write_text("from ckpt_browser.b import x\n")
    (fake / "b.py").write_text("def later():\n    from ckpt_browser import a\n")
    (fake / "c.py").write_text("from ckpt_browser import a\n")
    assert cycles(import_graph(fake)) == [["ckpt_browser.a", "ckpt_browser.b"]]
