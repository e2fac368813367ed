"""Structure-aware fuzzing of the whole load -> validate path: ``runner.agent.runtime.check_agent`` on
generated projects written to a folder - a manifest, system prompt templates that include, extend
and import each other (or files outside the folder), Python modules named by ``filter``,
``on_fallback`` and ``local_tools`` (valid, broken, raising, missing), and scripted-model scripts.

Whatever the project, ``check_agent`` returns, or raises ``ManifestError`` whose every problem
names a file of the project and a line and column; nothing else ever escapes. (The loader alone
is fuzzed in tests/manifest/test_manifest_fuzz.py.)
"""

from __future__ import annotations

import importlib
import itertools
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.agent.checks import check_agent
from runner.errors import ManifestError

EXAMPLES = 2000

MODULE_BODIES = [
    "def fn(*args, **kwargs):\n    return True\n",
    "async def fn(*args):\n    return True\n",
    "fn = 3\n",
    "def fn(:\n    pass\n",
    "raise RuntimeError('broken at import')\n",
    "import mcp_run_fuzz_no_such_module\n",
    "class fn:\n    pass\n",
    "",
    "x = 1 / 0\n",
]
# Import paths name this example's modules (M0, M1), missing ones, or harmless standard ones;
# now and then one that is not an import path at all.
WELL_FORMED_IMPORT_PATHS = st.builds(
    "{}:{}".format, st.sampled_from(["M0", "M0", "M1", "mcp_run_fuzz_missing", "json", "os.path"]),
    st.sampled_from(["fn", "fn", "missing", "loads", "join", "sep"]))
MALFORMED_IMPORT_PATHS = st.sampled_from(["", ":", "a:b:c", "no colon", "1mod:fn", "mod:", ":fn", "é:fn"])
# (Hypothesis favours the first choice of a sampled list and small numbers: bad ones go last.)
IMPORT_PATHS = st.integers(0, 15).flatmap(
    lambda n: MALFORMED_IMPORT_PATHS if n == 15 else WELL_FORMED_IMPORT_PATHS)
FRAGMENTS = [
    "text ", "\n", "{{ agent.name }}", "{{ agent.description|default('none') }}", "{{ vars.team }}",
    "{{ vars.missing }}", "{{ vars.n * 2 }}", "{{ vars|tojson }}", "{{ now.year }}",
    "{{ now.strftime('%Y') }}", "{% for s in servers %}{{ s.key }}{% endfor %}",
    "{% for t in tools %}{{ t.name }}{% endfor %}", "{{ tools|length }}",
    "{% include 'prompts/t0.j2' %}", "{% include 'prompts/t1.j2' %}", "{% include '../outside.j2' %}",
    "{% include '/etc/hostname' %}", "{% include vars.part %}",
    "{% include ['prompts/missing.j2', 'prompts/t2.j2'] %}", "{% extends 'prompts/t1.j2' %}",
    "{% block body %}x{% endblock %}", "{% import 'prompts/t2.j2' as m %}{{ m.shout }}",
    "{% macro shout() %}!{% endmacro %}", "{% set x = 1 %}{{ x }}", "{% if %}", "{% endif %}",
    "{% if vars.team %}", "{{", "}}", "{% raw %}", "{# note #}", "{{ 1/0 }}", "{{ 'a' + 1 }}",
    "{{ ''.__class__ }}", "{{ cycler.__init__.__globals__ }}", "{{ vars.update({}) }}",
    "{{ range(5)|list }}", "{{ lipsum(1) }}", "{{ '%s'|format(vars) }}", "{{ vars.team|upper }}",
]
TEMPLATES = st.lists(st.sampled_from(FRAGMENTS) | st.text(alphabet="{}%#ab \n'\".|", max_size=8),
                     max_size=6).map("".join)
SCRIPTS = st.sampled_from([
    "- hello\n",
    "- tool_calls: [{name: a__fn, args: {x: 1}}]\n- done\n",
    "- tool_calls: []\n",
    "- {text: 1}\n",
    "- {unknown: key}\n",
    "hello: [unclosed\n",
    "42\n",
    "",
    "- - nested\n",
])
VARIABLES = st.dictionaries(
    st.sampled_from(["team", "part", "n"]),
    st.one_of(st.text(max_size=5), st.integers(-3, 3),
              st.sampled_from(["prompts/t0.j2", "../secret.txt", "${HOME}", "${FUZZ_UNSET:-x}"] * 3
                              + ["${FUZZ_UNSET}"])),
    max_size=3,
)


def server(key: str) -> st.SearchStrategy[dict[str, Any]]:
    other = "b" if key == "a" else "a"
    return st.fixed_dictionaries(
        {"command": st.sampled_from(["python", "mcp-run-fuzz-absent"])},
        optional={
            "tools": st.fixed_dictionaries({}, optional={
                "filter": IMPORT_PATHS, "only": st.lists(st.sampled_from(["fn", "b*"]), max_size=2)}),
            "on_fallback": IMPORT_PATHS,
            "fallback": st.sampled_from([other] * 4 + [key, "zz"]),
            "timeout": st.sampled_from(["1s", "500ms", "2m"] * 3 + ["soon"]),
        },
    )



@dataclass
class Project:
    """A generated agent folder, before it is written."""

    manifest: dict[str, Any]
    modules: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    script: str | None = None
    typo_at: int | None = None  # insert one stray character into the manifest text here


@st.composite
def projects(draw: st.DrawFn) -> Project:
    templates = draw(st.lists(TEMPLATES, max_size=3))
    files = [f"prompts/t{index}.j2" for index in range(len(templates))]
    system = draw(st.one_of(
        st.none(), TEMPLATES, st.sampled_from(files or ["prompts/t0.j2"]), st.sampled_from(files or ["x.j2"]),
        st.sampled_from(["prompts/missing.j2", "../outside.j2", "/etc/hostname.j2"])))
    manifest: dict[str, Any] = {"version": draw(st.sampled_from([1] * 19 + [2])), "name": "fuzz"}
    if system is not None or draw(st.booleans()):
        manifest["prompts"] = {"system": system, "vars": draw(VARIABLES)}
    scripted = {"id": "scripted", "script": "script.yaml"}
    model = draw(st.sampled_from([None, "offline", scripted, scripted, scripted, scripted,
                                  {"id": "scripted", "script": "missing.yaml"}, {"id": "scripted"}]))
    if model is not None:
        manifest["model"] = model
    keys = draw(st.lists(st.sampled_from(["a", "b"]), unique=True, max_size=2))
    if servers := {key: draw(server(key)) for key in keys}:
        manifest["servers"] = servers
    if local_tools := draw(st.lists(IMPORT_PATHS, max_size=3)):
        manifest["local_tools"] = local_tools
    return Project(
        manifest=manifest,
        modules=draw(st.lists(st.sampled_from(MODULE_BODIES), max_size=2)),
        templates=templates,
        script=draw(st.none() | SCRIPTS),
        typo_at=draw(st.sampled_from([None] * 9 + [0]).flatmap(
            lambda at: st.none() if at is None else st.integers(0, 400))),
    )


_examples = itertools.count()


def write_project(project: Project, folder: Path) -> Path:
    """Write ``project`` into ``folder``; module placeholders become names never imported before."""
    prefix = f"mcp_run_fuzz_{next(_examples)}_"
    text = yaml.safe_dump(project.manifest, allow_unicode=True).replace("M0:", f"{prefix}0:")
    text = text.replace("M1:", f"{prefix}1:")
    if project.typo_at is not None:
        at = project.typo_at % (len(text) + 1)
        text = text[:at] + ":" + text[at:]
    for index, body in enumerate(project.modules):
        (folder / f"{prefix}{index}.py").write_text(body)
    (folder / "prompts").mkdir()
    for index, template in enumerate(project.templates):
        (folder / "prompts" / f"t{index}.j2").write_text(template)
    if project.script is not None:
        (folder / "script.yaml").write_text(project.script)
    path = folder / "agent.yaml"
    path.write_text(text)
    return path


def forget(folder: Path) -> None:
    """Undo what importing the project's modules did to this process."""
    while str(folder) in sys.path:
        sys.path.remove(str(folder))
    for name in [name for name in sys.modules if name.startswith("mcp_run_fuzz_")]:
        del sys.modules[name]


def assert_checks_or_reports_located_problems(project: Project) -> None:
    folder = Path(tempfile.mkdtemp(prefix="mcp-run-fuzz-")).resolve()
    try:
        path = write_project(project, folder)
        importlib.invalidate_caches()
        try:
            check_agent(path, environ={"HOME": "/home/fuzz"})
        except ManifestError as exc:
            assert exc.problems
            assert "Traceback" not in str(exc)
            for problem in exc.problems:
                assert problem.line >= 1 and problem.column >= 1 and problem.message, problem
                named = Path(problem.file)
                assert problem.file == str(path) or (folder / named).is_file() or (
                    named.is_absolute() and named.is_relative_to(folder)), problem
    finally:
        forget(folder)
        shutil.rmtree(folder, ignore_errors=True)


def test_check_agent_on_generated_projects_returns_or_reports_only_located_manifest_errors() -> None:
    examples = 0

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(projects())
    def check(project: Project) -> None:
        nonlocal examples
        examples += 1
        assert_checks_or_reports_located_problems(project)

    dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        check()
    finally:
        sys.dont_write_bytecode = dont_write_bytecode
    assert examples >= EXAMPLES
