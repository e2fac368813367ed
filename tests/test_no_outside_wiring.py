"""Objects get what they need at construction: no code in runner/ sets an attribute of another
object once it exists (``catalog.answer = ...``), so a reader can follow every dependency from
the constructor calls. A method sets its own object's attributes (``self``, ``cls``) only."""

from __future__ import annotations

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "runner"

# Third-party objects whose documented interface is setting an attribute.
ALLOWED = {
    "should_exit", "force_exit",  # uvicorn.Server: how a running server is told to stop
    "propagate",  # logging.Logger: whether records go on to the parent loggers
    "no_wrap",  # rich.table.Column: set on the column add_column returned
    "reserve_space_for_menu",  # prompt_toolkit's buffer control: its documented switch
    "text",  # xml.etree.ElementTree.Element: its text content (the JUnit report)
    "deadline",  # anyio.CancelScope: moving a scope's deadline is how anyio extends or shortens it
}

# The SDK's OAuth providers keep their flow's state in ``self.context`` and their own steps assign
# to it; runner.auth.flow's providers subclass them and continue those steps.
OWN_STATE = ("self.context.",)



def _owner(target: ast.Attribute) -> str | None:
    """The name an attribute assignment's object starts from (``a`` in ``a.b.c = ...``)."""
    node: ast.expr = target.value
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found: list[ast.expr] = []
        for target in node.targets:
            found += target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def outside_wiring(source: str, path: str) -> list[str]:
    """``path:line: target`` of each assignment to an attribute of an object other than
    ``self``/``cls`` (``self.x.y = ...`` counts: ``self.x`` is another object)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for target in _targets(node):
            if not isinstance(target, ast.Attribute):
                continue
            own = isinstance(target.value, ast.Name) and target.value.id in ("self", "cls")
            if own or target.attr in ALLOWED or ast.unparse(target).startswith(OWN_STATE):
                continue
            found.append(f"{path}:{target.lineno}: {ast.unparse(target)}")
    return found


def _all_wiring() -> list[str]:
    found = []
    for path in sorted(RUNNER.rglob("*.py")):
        relative = path.relative_to(RUNNER.parent).as_posix()
        found += outside_wiring(path.read_text(), relative)
    return found


def test_the_check_finds_attributes_set_on_other_objects() -> None:
    source = ("catalog.answer = f\nself.x = 1\ncls.y = 2\nself.fleet.sample = g\na.b, c = 1, 2\n"
              "server.should_exit = True\n")
    found = outside_wiring(source, "m.py")
    assert found == ["m.py:1: catalog.answer", "m.py:4: self.fleet.sample", "m.py:5: a.b"]


def test_no_module_sets_another_objects_attributes() -> None:
    assert _all_wiring() == []
