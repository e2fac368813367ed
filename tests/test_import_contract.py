"""The layers of ``runner`` hold: a package imports only packages listed above it in
``runner/__init__.py``'s docstring, and no module imports itself back through others."""

from __future__ import annotations

import ast
from pathlib import Path

import runner

ROOT = Path(runner.__file__).resolve().parent


def layers() -> list[str]:
    """The pipeline's order, read from the package docstring's glossary."""
    doc = runner.__doc__ or ""
    names = []
    for line in doc.splitlines():
        if line.startswith("    ") and not line.startswith("     "):
            word = line.split()[0]
            if (ROOT / word).is_dir() or (ROOT / f"{word}.py").is_file():
                names.append(word)
    return names


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    name = ".".join(parts)
    return name.removesuffix(".__init__")


def imports_of(path: Path, *, module_level_only: bool) -> list[tuple[str, int]]:
    """``runner`` modules imported by a file, with their lines; module level only skips imports
    inside functions and ``if TYPE_CHECKING:`` blocks (they cannot form an import-time cycle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = True
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                inner = True
            if not (module_level_only and inner):
                if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                    if child.module == "runner" or child.module.startswith("runner."):
                        for alias in child.names:
                            candidate = f"{child.module}.{alias.name}"
                            target = candidate if module_exists(candidate) else child.module
                            found.append((target, child.lineno))
                elif isinstance(child, ast.Import):
                    found.extend((a.name, child.lineno) for a in child.names if a.name.startswith("runner"))
            visit(child, inner)

    visit(tree, False)
    return found


def module_exists(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file()


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_the_glossary_names_every_package_of_runner() -> None:
    named = set(layers())
    present = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in ROOT.glob("*.py") if p.stem not in {"__init__", "__main__"}}
    assert present - named == set(), "add these to the glossary in runner/__init__.py"


def test_no_package_imports_a_package_listed_below_it() -> None:
    order = {name: rank for rank, name in enumerate(layers())}
    upward = []
    for path in sources():
        me = package_of(module_name(path))
        if me is None or me == "__main__":
            continue
        for target, line in imports_of(path, module_level_only=False):
            other = package_of(target)
            if other is None:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports the root package")
            elif other != me and order[other] > order[me]:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} ({me}) imports {target} ({other})")
    assert upward == []


def test_no_module_imports_itself_back_at_import_time() -> None:
    graph: dict[str, set[str]] = {}
    for path in sources():
        me = module_name(path)
        graph[me] = {t for t, _ in imports_of(path, module_level_only=True) if t != me}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing its own modules is how packages export
            if node != "runner" and nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt in graph and not state.get(nxt):
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if not state.get(node):
            walk(node)
    assert cycles == []


def test_the_readme_architecture_lists_the_layers_of_the_glossary_in_order() -> None:
    readme = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("- `")]
    assert listed == layers()
