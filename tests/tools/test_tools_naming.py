"""Generated tool names, their reverse map, name filters and the import-path filter hook."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import types as mcp_types
from provider_names import ANTHROPIC_NAME, GEMINI_NAME, OPENAI_NAME

from runner.errors import BuildError
from runner.manifest import SERVER_KEY_PATTERN, NameFilterSpec, ToolFilterSpec
from runner.tools import (
    NAME_PATTERN,
    ImportPathError,
    NameCollisionError,
    NameTable,
    Origin,
    apply_filter_function,
    filter_problems,
    generate_name,
    load_import_path,
    matches_any,
    needs_approval,
    select_names,
)


def assert_every_provider_accepts(name: str) -> None:
    assert NAME_PATTERN.fullmatch(name)
    assert OPENAI_NAME.fullmatch(name)
    assert ANTHROPIC_NAME.fullmatch(name)
    assert GEMINI_NAME.fullmatch(name)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("get_time", "time__get_time"),
        ("files.read", "time__files_read"),
        ("ns:tool", "time__ns_tool"),
        ("read file", "time__read_file"),
        ("café-crème", "time__cafe-creme"),
        ("日本語", "time_____"),
    ],
)
def test_names_outside_the_safe_alphabet_are_folded_and_replaced(tool: str, expected: str) -> None:
    name = NameTable([("time", tool)]).name_for("time", tool)
    assert name == expected
    assert_every_provider_accepts(name)


def test_a_128_character_name_is_shortened_to_64_with_a_stable_hash() -> None:
    tool = "x" * 128
    name = NameTable([("github", tool)]).name_for("github", tool)
    assert len(name) == 64
    assert name.startswith("github__xxx")
    assert re.search(r"_[0-9a-f]{8}$", name)
    assert name == NameTable([("github", tool)]).name_for("github", tool)
    assert_every_provider_accepts(name)


def test_long_names_that_share_their_first_64_characters_stay_apart() -> None:
    first, second = "a" * 100 + "_first", "a" * 100 + "_second"
    table = NameTable([("srv", first), ("srv", second)])
    assert table.name_for("srv", first) != table.name_for("srv", second)
    assert table.origin(table.name_for("srv", second)) == Origin("srv", second)


def test_two_servers_with_the_same_tool_get_separate_names_and_origins() -> None:
    table = NameTable([("github", "search"), ("gitlab", "search")])
    assert table.name_for("github", "search") == "github__search"
    assert table.name_for("gitlab", "search") == "gitlab__search"
    assert table.origin("gitlab__search") == Origin("gitlab", "search")
    assert len(table) == 2
    assert dict(table.items()) == {
        "github__search": Origin("github", "search"),
        "gitlab__search": Origin("gitlab", "search"),
    }


def test_names_that_meet_after_sanitising_are_a_build_error_naming_both() -> None:
    with pytest.raises(NameCollisionError) as caught:
        NameTable([("fs", "read.file"), ("fs", "read_file")])
    assert caught.value.collisions == {
        "fs__read_file": [Origin("fs", "read.file"), Origin("fs", "read_file")]
    }
    assert isinstance(caught.value, BuildError)
    assert "read.file" in str(caught.value) and "'read_file'" in str(caught.value)


def test_a_name_that_meets_another_after_shortening_is_a_build_error() -> None:
    long_tool = "y" * 100
    shortened = generate_name("srv", long_tool)
    lookalike = shortened.removeprefix("srv__")
    with pytest.raises(NameCollisionError) as caught:
        NameTable([("srv", long_tool), ("srv", lookalike)])
    assert caught.value.collisions == {shortened: [Origin("srv", long_tool), Origin("srv", lookalike)]}


def test_every_collision_is_reported_at_once() -> None:
    with pytest.raises(NameCollisionError) as caught:
        NameTable([("a", "x.y"), ("a", "x_y"), ("a", "p q"), ("a", "p:q"), ("a", "p_q")])
    assert caught.value.collisions["a__p_q"] == [
        Origin("a", "p q"),
        Origin("a", "p:q"),
        Origin("a", "p_q"),
    ]
    assert set(caught.value.collisions) == {"a__x_y", "a__p_q"}


def test_a_tool_listed_twice_is_one_tool() -> None:
    assert len(NameTable([("a", "t"), ("a", "t")])) == 1


def test_a_rename_changes_the_tool_part_and_maps_back_to_the_original() -> None:
    table = NameTable(
        [("github", "search_repositories")], renames={"github": {"search_repositories": "find"}}
    )
    assert table.name_for("github", "search_repositories") == "github__find"
    assert table.origin("github__find") == Origin("github", "search_repositories")
    assert "github__search_repositories" not in table


def test_a_rename_onto_another_tool_is_a_collision() -> None:
    with pytest.raises(NameCollisionError):
        NameTable([("g", "a"), ("g", "b")], renames={"g": {"a": "b"}})


def test_renames_of_unknown_tools_are_reported() -> None:
    table = NameTable([("g", "a")], renames={"g": {"a": "x", "missing": "y"}})
    assert table.unused_renames() == [Origin("g", "missing")]


def test_the_separator_is_configurable() -> None:
    table = NameTable([("time", "now")], separator="-")
    assert table.name_for("time", "now") == "time-now"
    assert table.origin("time-now") == Origin("time", "now")


def test_local_tools_have_no_prefix_and_never_start_with_a_digit() -> None:
    table = NameTable([(None, "lookup"), (None, "3d-render")])
    assert table.name_for(None, "lookup") == "lookup"
    assert table.name_for(None, "3d-render") == "_3d-render"
    assert table.origin("_3d-render") == Origin(None, "3d-render")


def test_prompts_use_the_same_table_and_say_so_in_errors() -> None:
    with pytest.raises(NameCollisionError, match="prompt names collide"):
        NameTable([("g", "re.view"), ("g", "re_view")], kind="prompt")


def test_looking_up_an_unknown_name_is_a_key_error() -> None:
    table = NameTable([("g", "a")])
    with pytest.raises(KeyError):
        table.origin("g__b")
    with pytest.raises(KeyError):
        table.name_for("h", "a")


@settings(max_examples=300, deadline=None)
@given(server=st.from_regex(SERVER_KEY_PATTERN, fullmatch=True), tool=st.text(min_size=1, max_size=200))
def test_any_server_and_tool_name_give_a_valid_name(server: str, tool: str) -> None:
    name = generate_name(server, tool)
    assert_every_provider_accepts(name)
    assert name == generate_name(server, tool)


@settings(max_examples=200, deadline=None)
@given(tool=st.text(max_size=200))
def test_any_local_tool_name_gives_a_valid_name(tool: str) -> None:
    assert_every_provider_accepts(generate_name(None, tool))


@settings(max_examples=200, deadline=None)
@given(
    origins=st.lists(
        st.tuples(st.sampled_from(["a", "b-c", "srv"]), st.text(alphabet="ab._: é", min_size=1, max_size=80)),
        max_size=12,
    )
)
def test_a_table_is_either_unique_and_reversible_or_a_collision_error(
    origins: list[tuple[str, str]],
) -> None:
    try:
        table = NameTable(origins)
    except NameCollisionError as error:
        for generated, colliding in error.collisions.items():
            assert len(set(colliding)) >= 2
            assert {generate_name(*origin) for origin in colliding} == {generated}
        return
    for server, tool in origins:
        generated = table.name_for(server, tool)
        assert_every_provider_accepts(generated)
        assert table.origin(generated) == Origin(server, tool)
    assert len(table) == len(set(origins))


# --- filters ------------------------------------------------------------------------------------

TOOLS = ["get_time", "convert_time", "delete_repo", "delete_branch", "create_issue", "weird[1]"]


def test_only_keeps_exact_names_and_globs_in_their_order() -> None:
    spec = NameFilterSpec(only=["get_time", "delete_*"])
    assert select_names(TOOLS, spec) == ["get_time", "delete_repo", "delete_branch"]


def test_except_drops_exact_names_and_globs() -> None:
    spec = NameFilterSpec(**{"except": ["delete_*", "convert_time"]})
    assert select_names(TOOLS, spec) == ["get_time", "create_issue", "weird[1]"]


def test_an_exact_name_with_glob_characters_matches_itself() -> None:
    assert select_names(TOOLS, NameFilterSpec(only=["weird[1]"])) == ["weird[1]"]


def test_matching_is_case_sensitive() -> None:
    assert not matches_any("Get_Time", ["get_*"])


def test_approval_globs_select_tools() -> None:
    spec = ToolFilterSpec(approve=["create_*"])
    assert needs_approval("create_issue", spec)
    assert not needs_approval("get_time", spec)


def test_filter_entries_that_match_nothing_are_reported_with_a_suggestion() -> None:
    spec = ToolFilterSpec(
        only=["get_tme", "delete_*", "nothing_*"],
        approve=["creat_issue"],
        pin=["get_time", "list_*"],
        rename={"convert_tim": "convert"},
        timeouts={"get_time": 5},
    )
    problems = filter_problems(spec, TOOLS)
    assert [path for path, _ in problems] == [
        ("only", 0),
        ("only", 2),
        ("approve", 0),
        ("pin", 1),
        ("pin", 0),  # get_time exists, but tools.only keeps it out
        ("rename", "convert_tim"),
    ]
    messages = dict(problems)
    assert messages[("pin", 0)] == "'get_time' pins only tools that tools.only removes"
    assert "did you mean 'get_time'" in messages[("only", 0)]
    assert "did you mean" not in messages[("only", 2)]
    assert "did you mean 'convert_time'" in messages[("rename", "convert_tim")]


def test_except_entries_that_match_nothing_are_reported() -> None:
    problems = filter_problems(NameFilterSpec(**{"except": ["delet_repo"]}), TOOLS, kind="prompt")
    assert problems == [(("except", 0), "'delet_repo' matches no prompt (did you mean 'delete_repo'?)")]


# --- the import-path filter hook ----------------------------------------------------------------


@pytest.fixture
def user_module(tmp_path, monkeypatch, request):
    """Writes a module next to a pretend manifest; returns its unique name."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"user_filters_{abs(hash(request.node.name))}"

    def write(source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    yield write
    sys.modules.pop(name, None)


def tool(name: str, **extra) -> mcp_types.Tool:
    return mcp_types.Tool(name=name, input_schema={"type": "object"}, **extra)


def test_a_filter_function_is_imported_and_keeps_what_it_accepts(user_module, tmp_path) -> None:
    module = user_module("""
        def read_only(tool):
            return not tool.name.startswith("delete")
    """)
    keep = load_import_path(f"{module}:read_only", base_dir=tmp_path)
    tools = [tool("get_time"), tool("delete_repo")]
    kept = apply_filter_function(tools, keep, import_path=f"{module}:read_only")
    assert [t.name for t in kept] == ["get_time"]


def test_a_missing_module_is_an_import_path_error(tmp_path) -> None:
    with pytest.raises(ImportPathError) as caught:
        load_import_path("no_such_module_here:keep", base_dir=tmp_path)
    assert caught.value.import_path == "no_such_module_here:keep"
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


def test_a_missing_function_is_an_import_path_error_with_a_suggestion(user_module, tmp_path) -> None:
    module = user_module("def keep_tool(tool):\n    return True\n")
    with pytest.raises(ImportPathError, match="did you mean 'keep_tool'"):
        load_import_path(f"{module}:keep_tol", base_dir=tmp_path)


def test_a_module_that_fails_to_import_is_an_import_path_error(user_module, tmp_path) -> None:
    module = user_module("raise RuntimeError('broken at import')\n")
    with pytest.raises(ImportPathError) as caught:
        load_import_path(f"{module}:keep", base_dir=tmp_path)
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_module_with_a_syntax_error_is_named_by_file_line_and_column(user_module, tmp_path) -> None:
    module = user_module("def add(a: int, b: int) -> int\n    return a + b\n")
    with pytest.raises(ImportPathError) as caught:
        load_import_path(f"{module}:add", base_dir=tmp_path)
    where = tmp_path / f"{module}.py"
    assert f"importing '{module}' failed: {where}:1:31: SyntaxError: expected ':'" in str(caught.value)
    assert "('" not in str(caught.value)  # not the exception's tuple repr


def test_something_that_is_not_callable_is_an_import_path_error(user_module, tmp_path) -> None:
    module = user_module("keep = 42\n")
    with pytest.raises(ImportPathError, match="not a function"):
        load_import_path(f"{module}:keep", base_dir=tmp_path)


def test_a_malformed_import_path_is_an_import_path_error() -> None:
    with pytest.raises(ImportPathError):
        load_import_path("not a path")


def test_a_filter_function_that_raises_names_the_tool(user_module, tmp_path) -> None:
    module = user_module("def keep(tool):\n    raise ValueError(tool.name)\n")
    function = load_import_path(f"{module}:keep", base_dir=tmp_path)
    with pytest.raises(ImportPathError, match="get_time") as caught:
        apply_filter_function([tool("get_time")], function, import_path=f"{module}:keep")
    assert isinstance(caught.value.__cause__, ValueError)


def test_an_async_filter_function_is_refused(user_module, tmp_path) -> None:
    module = user_module("async def keep(tool):\n    return True\n")
    function = load_import_path(f"{module}:keep", base_dir=tmp_path)
    with pytest.raises(ImportPathError, match="not async"):
        apply_filter_function([tool("get_time")], function, import_path=f"{module}:keep")
