"""System prompt templates: rendering, located errors, the sandbox and the folder boundary."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from builders import ROOT
from jinja2.exceptions import SecurityError, TemplateNotFound, UndefinedError

from runner.errors import ManifestError
from runner.manifest import Manifest
from runner.prompts import (
    RenderLimits,
    ServerSummary,
    SourceLocation,
    ToolSummary,
    compile_system_prompt,
    template_files,
)

NOW = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


def manifest(system: str | None, variables: dict[str, Any] | None = None) -> Manifest:
    return Manifest.model_validate({
        "version": 1,
        "name": "helper",
        "description": "Answers questions.",
        "prompts": {"system": system, "vars": variables or {}},
    })


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A manifest folder that is also the working directory, with a secret file beside it."""
    root = tmp_path / "agent"
    (root / "prompts").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    monkeypatch.chdir(root)
    return root


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def compile_error(system: str, folder: Path, **kwargs: Any) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        compile_system_prompt(manifest(system, **kwargs), folder)
    return caught.value


def test_a_file_template_sees_vars_servers_tools_now_and_agent(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", (
        "{{ agent.name }} / {{ agent.description }} / team {{ vars.team }} / {{ now.year }}\n"
        "{% for s in servers %}{{ s.key }}={{ s.status }}:{{ s.instructions }};{% endfor %}\n"
        "{% for t in tools %}{{ t.name }}({{ t.description }});{% endfor %}"
    ))
    template = compile_system_prompt(
        manifest("prompts/system.md.j2", {"team": "platform"}), folder
    )
    assert template is not None
    text = template.render(
        [ServerSummary("time", "ready", "Use UTC.")], [ToolSummary("time__now", "The time.")], NOW
    )
    assert text == (
        "helper / Answers questions. / team platform / 2026\n"
        "time=ready:Use UTC.;time__now(The time.);"  # trim_blocks eats the newline
    )


def test_inline_text_is_a_template_too(folder: Path) -> None:
    template = compile_system_prompt(manifest("Hello from {{ agent.name }}.\nBye."), folder)
    assert template is not None
    assert template.render([], [], NOW) == "Hello from helper.\nBye."


def test_a_manifest_without_a_system_prompt_has_no_template(folder: Path) -> None:
    assert compile_system_prompt(manifest(None), folder) is None
    assert template_files(manifest(None), folder) == set()


def test_the_bundled_default_prompt_renders_with_and_without_servers_and_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    template = compile_system_prompt(manifest("prompts/system.md.j2"), ROOT)
    assert template is not None
    empty = template.render([], [], NOW)
    assert "You are helper." in empty and "Answers questions." in empty
    assert "2026-03-04 05:06 UTC" in empty
    assert "No tools are available" in empty
    full = template.render(
        [ServerSummary("time", "ready", "Always answer in UTC."), ServerSummary("git", "failed")],
        [ToolSummary("time__now", "Current time.\nLong details."), ToolSummary("git__log")],
        NOW,
    )
    assert "- time: ready" in full and "- git: failed" in full
    assert "Always answer in UTC." in full
    assert "- `time__now`: Current time." in full and "Long details" not in full
    assert "- `git__log`" in full and "No tools are available" not in full


def test_a_syntax_error_is_located_in_the_template_file(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "line one\nline two\n{% if %}\n")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert (problem.file, problem.line, problem.column, problem.path) == (
        "prompts/system.md.j2", 3, 1, "prompts.system"
    )


@pytest.mark.parametrize(("line", "column"), [
    ("Hello {{ name( }}", 16),  # unexpected '}': where it stands
    ("x {{ a b }}", 8),  # got 'b'
    ("text, then {% for %}", 12),  # no token to find: where the tag being read opens
])
def test_a_syntax_error_is_located_at_the_column_of_what_jinja_did_not_expect(
    folder: Path, line: str, column: int
) -> None:
    write(folder, "prompts/system.md.j2", f"first line\n{line}\n")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert (problem.line, problem.column) == (2, column), str(problem)


def test_an_undefined_variable_is_located_at_its_line(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "a\nb\nc {{ environ }}\n")
    error = compile_error("prompts/system.md.j2", folder)
    assert isinstance(error.__cause__, UndefinedError)
    [problem] = error.problems
    assert (problem.file, problem.line, problem.path) == ("prompts/system.md.j2", 3, "prompts.system")
    assert str(problem).startswith("prompts/system.md.j2:3:1: prompts.system:")


def test_a_missing_attribute_of_agent_is_named_as_written_at_its_line_and_column(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "Hello.\n\nI am {{ agent.nme }} and fine.\n")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert str(problem) == ("prompts/system.md.j2:3:15: prompts.system: 'agent' has no attribute 'nme' "
                            "(did you mean 'name'?); it has name, description")


def test_a_missing_attribute_of_a_tool_names_the_tools_attributes(folder: Path) -> None:
    template = compile_system_prompt(manifest("{% for t in tools %}{{ t.nam }}{% endfor %}"), folder)
    assert template is not None
    with pytest.raises(ManifestError) as caught:
        template.render(servers=[], tools=[ToolSummary("notes__add")])
    [problem] = caught.value.problems
    assert "a tool (of 'tools') has no attribute 'nam' (did you mean 'name'?)" in problem.message


def test_a_missing_key_of_vars_is_located_at_its_line(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "{{ vars.team }}\n{{ vars.tema }}\n")
    [problem] = compile_error("prompts/system.md.j2", folder, variables={"team": "x"}).problems
    assert (problem.file, problem.line) == ("prompts/system.md.j2", 2)


def test_an_error_in_an_included_template_is_located_in_that_file(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "top\n{% include 'prompts/parts/tools.j2' %}\n")
    write(folder, "prompts/parts/tools.j2", "first\nsecond {{ nope }}\n")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert (problem.file, problem.line) == ("prompts/parts/tools.j2", 2)


def test_a_syntax_error_in_an_include_behind_a_false_branch_is_found(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "{% if false %}\n{% include 'prompts/bad.j2' %}{% endif %}")
    write(folder, "prompts/bad.j2", "\n\n{{ unclosed\n")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert (problem.file, problem.line) == ("prompts/bad.j2", 3)


def test_a_missing_include_is_located_at_the_include_line(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "a\n{% if false %}{% include 'prompts/none.j2' %}{% endif %}")
    [problem] = compile_error("prompts/system.md.j2", folder).problems
    assert (problem.file, problem.line) == ("prompts/system.md.j2", 2)


def test_a_missing_template_file_is_located_where_the_manifest_names_it(folder: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        compile_system_prompt(
            manifest("prompts/missing.md.j2"), folder, SourceLocation("agent.yaml", 12, 11)
        )
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.column) == ("agent.yaml", 12, 11)


def test_a_template_or_include_that_is_a_loop_of_symbolic_links_is_a_located_error(folder: Path) -> None:
    (folder / "prompts" / "a.md.j2").symlink_to("b.md.j2")
    (folder / "prompts" / "b.md.j2").symlink_to("a.md.j2")
    for system, location, line in (("prompts/a.md.j2", ("agent.yaml", 12, 11), 12),
                                   ("first\n{% include 'prompts/b.md.j2' %}", ("agent.yaml", 12, 11), 13)):
        with pytest.raises(ManifestError) as caught:
            compile_system_prompt(manifest(system), folder, SourceLocation(*location))
        [problem] = caught.value.problems
        assert (problem.file, problem.line) == ("agent.yaml", line)
        assert problem.message.endswith("is a loop of symbolic links")
    assert template_files(manifest("prompts/a.md.j2"), folder) == set()  # watch mode: nothing to follow


@pytest.mark.parametrize(
    ("text", "line"),
    [("first\nsecond {{ nope }}", 8), ("first\n{% for %}", 8), ("{{ vars.nope }}", 7)],
)
def test_inline_template_problems_are_located_in_the_manifest(
    folder: Path, text: str, line: int
) -> None:
    with pytest.raises(ManifestError) as caught:
        compile_system_prompt(manifest(text), folder, SourceLocation("agent.yaml", 7, 5))
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.column, problem.path) == (
        "agent.yaml", line, 5, "prompts.system"
    )


@pytest.mark.parametrize(
    "expression",
    [
        "''.__class__.__mro__",
        "vars.__class__",
        "agent.__class__.__init__.__globals__",
        "now.__class__",
        "cycler.__init__.__globals__",
        "vars.update({'team': 'stolen'})",
        "tools.append(1)",
        "'{0.__class__}'.format(vars)",
    ],
)
def test_the_sandbox_refuses_internals_and_mutation(folder: Path, expression: str) -> None:
    error = compile_error(f"hello {{{{ {expression} }}}}", folder, variables={"team": "x"})
    assert isinstance(error.__cause__, SecurityError)


def test_the_sandbox_refuses_internals_when_rendering_later_too(folder: Path) -> None:
    template = compile_system_prompt(
        manifest("ok\n{% for s in servers %}{{ s.__class__.__init__ }}{% endfor %}"),
        folder,
        SourceLocation("agent.yaml", 3, 9),
    )
    assert template is not None
    with pytest.raises(ManifestError) as caught:
        template.render([ServerSummary("time", "ready")], [], NOW)
    assert isinstance(caught.value.__cause__, SecurityError)
    assert (caught.value.problems[0].file, caught.value.problems[0].line) == ("agent.yaml", 4)


# Limits far below the defaults, so each hostile template below stays small even if a limit broke.
LOW = RenderLimits(chars=1000, steps=1000, seconds=60)


@pytest.mark.parametrize(
    ("hostile", "refused"),
    [
        ("{{ 'x' * 5000 }}", "would make a text of 5,000 characters; the limit is 1,000"),
        ("{{ [1] * 5000 }}", "would make a list of 5,000 items"),
        ("{{ 10 ** 5000 }}", "would make an integer of about 5,001 digits"),
        ("{{ 'x'|center(5000) }}", "would make a text of 5,000 characters"),
        ("{{ 'x'.ljust(5000) }}", "would make a text of 5,000 characters"),
        ("{{ '{:>5000}'.format(1) }}", "would make a text of 5,000 characters"),
        ("{{ '%5000s' % 'x' }}", "would make a text of 5,000 characters"),
        ("{{ '%5000s'|format('x') }}", "would make a text of 5,000 characters"),
        ("{{ ('x' * 900)|replace('x', 'yyyyyy') }}", "would make a text of 5,400 characters"),
        ("{{ (['x' * 900] * 6)|join }}", "would make a text of 5,400 characters"),
        ("{{ [1]|batch(5000, 0)|list }}", "would make a text of 5,000 characters"),
        ("{{ lipsum(5) }}", "would make a text of 6,000 characters"),
        ("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "would make a text of 1,024 characters"),
        ("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
         "the template's loops ran more than the limit of 1,000 steps"),
        ("{% macro m() %}{% for i in range(50) %}{{ 'y' * 100 }}{% endfor %}{% endmacro %}{{ m()|length }}",
         "the template wrote more than the limit of 1,000 characters"),
    ],
)
def test_a_template_past_a_limit_of_size_or_steps_is_refused_at_its_line(
    folder: Path, hostile: str, refused: str
) -> None:
    write(folder, "prompts/system.md.j2", f"You help.\n{hostile}\n")
    with pytest.raises(ManifestError) as caught:
        compile_system_prompt(manifest("prompts/system.md.j2"), folder, limits=LOW)
    problem = caught.value.problems[0]
    assert (problem.file, problem.line) == ("prompts/system.md.j2", 2)
    assert refused in problem.message
    assert isinstance(caught.value.__cause__, SecurityError)


def test_a_template_past_the_time_limit_is_stopped_at_its_line(folder: Path) -> None:
    # 2**22 macro calls and no loop: about a second of work a fortieth of a second may not take.
    write(folder, "prompts/system.md.j2", "You help.\n{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}"
                                          "{% endif %}{% endmacro %}\n{{ f(22) }}\n")
    limits = RenderLimits(seconds=0.025)
    with pytest.raises(ManifestError) as caught:
        compile_system_prompt(manifest("prompts/system.md.j2"), folder, limits=limits)
    problem = caught.value.problems[0]
    assert problem.file == "prompts/system.md.j2" and problem.line in (2, 3)
    assert "rendering took longer than the limit of 0.025 s" in problem.message


def test_each_rendering_has_the_whole_budget(folder: Path) -> None:
    template = compile_system_prompt(
        manifest("{% for tool in tools %}{{ tool.name }}{% endfor %}{% for i in range(600) %}{% endfor %}"),
        folder, limits=LOW)
    assert template is not None
    for _ in range(3):  # 600 steps each time, 1,800 in all: the limit of 1,000 is per rendering
        assert template.render([], [ToolSummary("a__b")], NOW) == "a__b"


def test_templates_within_the_limits_render_as_before(folder: Path) -> None:
    text = ("{{ 'ab' * 3 }} {{ 'x'|center(5) }}|{{ '%3s'|format(1) }} {{ '{:>4}'.format(2) }} "
            "{{ 2 ** 10 }} {{ [1, 2]|join(',') }} {{ ('a b')|replace(' ', '-') }} "
            "{% for i in range(3) %}{{ loop.index }}{% if loop.last %}.{% endif %}{% endfor %}")
    template = compile_system_prompt(manifest(text), folder)
    assert template is not None
    assert template.render([], [], NOW) == "ababab   x  |  1    2 1024 1,2 a-b 123."


def outside_names(folder: Path) -> list[str]:
    secret = folder.parent / "secret.txt"
    os.symlink(secret, folder / "prompts" / "link.txt")
    return ["../secret.txt", "prompts/../../secret.txt", str(secret), "prompts/link.txt"]


def test_includes_cannot_leave_the_manifest_folder(folder: Path) -> None:
    for name in outside_names(folder):
        write(folder, "prompts/system.md.j2", f"x\n{{% include '{name}' %}}\n")
        error = compile_error("prompts/system.md.j2", folder)
        assert isinstance(error.__cause__, TemplateNotFound), name
        assert (error.problems[0].file, error.problems[0].line) == ("prompts/system.md.j2", 2)
        assert "TOP-SECRET" not in str(error)


def test_includes_named_at_render_time_cannot_leave_the_folder_either(folder: Path) -> None:
    write(folder, "prompts/system.md.j2", "x\n{% include vars.part %}\n")
    for name in outside_names(folder):
        error = compile_error("prompts/system.md.j2", folder, variables={"part": name})
        assert isinstance(error.__cause__, TemplateNotFound), name
        assert (error.problems[0].file, error.problems[0].line) == ("prompts/system.md.j2", 2)


def test_the_main_template_cannot_leave_the_folder(folder: Path) -> None:
    os.symlink(folder.parent / "secret.txt", folder / "prompts" / "system.md")
    for name in ["../secret.txt", str(folder.parent / "secret.txt"), "prompts/system.md"]:
        error = compile_error(name, folder)
        assert isinstance(error.__cause__, TemplateNotFound), name


def test_include_extends_and_import_work_inside_the_folder(folder: Path) -> None:
    write(folder, "prompts/layout.j2", "[{% block body %}{% endblock %}]")
    write(folder, "prompts/macros.j2", "{% macro shout(x) %}{{ x | upper }}!{% endmacro %}")
    write(folder, "prompts/parts/tools.j2", "{{ tools | length }} tools")
    os.symlink(folder / "prompts" / "parts" / "tools.j2", folder / "prompts" / "tools-link.j2")
    write(folder, "prompts/system.md.j2", (
        "{% extends 'prompts/layout.j2' %}{% from 'prompts/macros.j2' import shout %}"
        "{% block body %}{{ shout(agent.name) }} {% include 'prompts/parts/tools.j2' %}, "
        "{% include 'prompts/tools-link.j2' %}{% endblock %}"
    ))
    template = compile_system_prompt(manifest("prompts/system.md.j2"), folder)
    assert template is not None
    assert template.render([], [ToolSummary("a__b")], NOW) == "[HELPER! 1 tools, 1 tools]"


def test_template_files_lists_every_file_the_template_uses(folder: Path) -> None:
    main = write(folder, "prompts/system.md.j2", (
        "{% extends 'prompts/layout.j2' %}{% import 'prompts/macros.j2' as m %}"
        "{% block body %}{% include ['prompts/absent.j2', 'prompts/parts/a.j2'] %}{% endblock %}"
    ))
    layout = write(folder, "prompts/layout.j2", "{% block body %}{% endblock %}")
    macros = write(folder, "prompts/macros.j2", "{% include 'prompts/parts/b.j2' %}")
    part_a = write(folder, "prompts/parts/a.j2", "a")
    part_b = write(folder, "prompts/parts/b.j2", "b")
    expected = {path.resolve() for path in (main, layout, macros, part_a, part_b)}
    assert template_files(manifest("prompts/system.md.j2"), folder) == expected


def test_template_files_still_lists_files_of_a_broken_template(folder: Path) -> None:
    main = write(folder, "prompts/system.md.j2", "{% include 'prompts/part.j2' %}")
    part = write(folder, "prompts/part.j2", "{% if %} broken")
    assert template_files(manifest("prompts/system.md.j2"), folder) == {
        main.resolve(), part.resolve()
    }
    inline = manifest("inline {% include 'prompts/part.j2' %}")
    assert template_files(inline, folder) == {part.resolve()}
    assert template_files(manifest("prompts/missing.j2"), folder) == set()


@pytest.mark.parametrize(("system", "located"), [
    ("|\n    Hello\n    I am {{ agent.nme }}\n", "7:5"),  # a block scalar's text starts a line below
    ('"Hi {{ agent.nme }}"\n', "5:11"),
])
def test_a_problem_of_inline_text_is_located_on_its_manifest_line(
    folder: Path, system: str, located: str
) -> None:
    from runner.agent.checks import check_agent

    write(folder, "agent.yaml", f"version: 1\nname: x\nmodel: offline\nprompts:\n  system: {system}")
    with pytest.raises(ManifestError) as caught:
        check_agent(folder / "agent.yaml")
    [problem] = caught.value.problems
    assert str(problem).startswith(f"{folder / 'agent.yaml'}:{located}: prompts.system: 'agent' has no")
