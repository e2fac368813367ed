"""Chat commands from MCP prompts: parsing, namespacing, filters, aliases, collisions, resolving."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import types

from runner.errors import BuildError, PromptError
from runner.manifest import SERVER_KEY_PATTERN, Manifest
from runner.prompts import (
    PromptRequest,
    build_prompt_catalog,
    parse_command_line,
)
from runner.tools.naming import NAME_PATTERN, generate_name


def prompt(name: str, *required: str, optional: tuple[str, ...] = ()) -> types.Prompt:
    arguments = [types.PromptArgument(name=arg, required=True) for arg in required]
    arguments += [types.PromptArgument(name=arg, required=False) for arg in optional]
    return types.Prompt(name=name, description=f"The {name} prompt.", arguments=arguments)


def manifest(servers: dict[str, Any], bindings: list[dict[str, Any]] | None = None,
             separator: str = "__") -> Manifest:
    return Manifest.model_validate({
        "version": 1,
        "name": "helper",
        "servers": {key: {"command": "server", **spec} for key, spec in servers.items()},
        "prompts": {"mcp": bindings or []},
        "agent": {"tool_separator": separator},
    })


GITHUB = [prompt("code_review", "language", optional=("topic",)), prompt("triage")]


# --- command lines -----------------------------------------------------------------------------

def test_a_command_line_gives_the_name_and_its_arguments() -> None:
    line = '/review language=python "topic=two words" note= path=a=b'
    assert parse_command_line(line) == (
        "review", {"language": "python", "topic": "two words", "note": "", "path": "a=b"}
    )
    assert parse_command_line("  /github__triage  ") == ("github__triage", {})
    assert parse_command_line("/review\tlanguage=go") == ("review", {"language": "go"})


@pytest.mark.parametrize(
    "line",
    [
        "review language=python",  # no slash
        "/",  # no name
        "/ review",  # space before the name
        "/review language",  # not key=value
        "/review =python",  # no key
        '/review "topic=unclosed',  # unclosed quote
        "/review a=1 a=2",  # twice
        "/9lives",  # not a command name
    ],
)
def test_a_malformed_command_line_is_refused(line: str) -> None:
    with pytest.raises(PromptError):
        parse_command_line(line)


# --- names -------------------------------------------------------------------------------------

def test_namespaced_names_replace_unsafe_characters() -> None:
    assert generate_name("github", "code_review", separator="__") == "github__code_review"
    assert generate_name("docs", "search.v2 (beta)", separator="-") == "docs-search_v2__beta_"


@given(
    server=st.from_regex(SERVER_KEY_PATTERN, fullmatch=True),
    separator=st.sampled_from(["__", "-", "_x_"]),
    name=st.text(min_size=1, max_size=200),
)
def test_namespaced_names_are_always_safe_and_stable(server: str, separator: str, name: str) -> None:
    generated = generate_name(server, name, separator=separator)
    assert NAME_PATTERN.match(generated)
    assert generated == generate_name(server, name, separator=separator)


def test_long_names_are_cut_with_a_hash_so_they_stay_distinct() -> None:
    first = generate_name("server", "x" * 80 + "a", separator="__")
    second = generate_name("server", "x" * 80 + "b", separator="__")
    assert len(first) == len(second) == 64
    assert first != second


def test_prompt_commands_are_named_as_tools_are() -> None:
    long = "résumé_" + "x" * 80
    catalog = build_prompt_catalog(
        manifest({"docs": {}}), {"docs": [prompt("révision"), prompt(long)]}
    )
    assert catalog.get("docs__revision") is not None  # accents folded, as in tool names
    assert catalog.get(generate_name("docs", long)) is not None  # shortened with the same hash


# --- the catalog -------------------------------------------------------------------------------

def test_every_exposed_prompt_is_a_namespaced_command() -> None:
    catalog = build_prompt_catalog(
        manifest({"github": {}, "time": {}}, separator="-"),
        {"github": GITHUB, "time": [prompt("now")]},
    )
    assert [command.name for command in catalog] == [
        "github-code_review", "github-triage", "time-now"
    ]
    command = catalog.get("github-code_review")
    assert command is not None and command.server == "github" and not command.alias
    assert command.description == "The code_review prompt."
    assert command.usage == "/github-code_review language=<language> [topic=<topic>]"


@pytest.mark.parametrize(
    ("prompts_filter", "expected"),
    [
        ({"only": ["code_*"]}, ["github__code_review"]),
        ({"except": ["code_*"]}, ["github__triage"]),
        ({"only": []}, []),
        ({}, ["github__code_review", "github__triage"]),
    ],
)
def test_the_server_prompt_filter_decides_which_prompts_become_commands(
    prompts_filter: dict[str, list[str]], expected: list[str]
) -> None:
    catalog = build_prompt_catalog(manifest({"github": {"prompts": prompts_filter}}),
                                   {"github": GITHUB})
    assert [command.name for command in catalog] == expected


def test_a_server_that_is_only_a_fallback_offers_no_commands() -> None:
    catalog = build_prompt_catalog(
        manifest({"github": {"fallback": "mirror"}, "mirror": {"expose": False}}),
        {"github": [prompt("triage")], "mirror": [prompt("triage")]},
    )
    assert [command.name for command in catalog] == ["github__triage"]


def test_an_alias_is_a_command_with_fixed_arguments_the_person_can_override() -> None:
    catalog = build_prompt_catalog(
        manifest({"github": {"prompts": {"only": []}}}, [
            {"server": "github", "name": "code_review", "as": "review",
             "arguments": {"language": "python"}},
        ]),
        {"github": GITHUB},
    )
    assert [command.name for command in catalog] == ["review"]  # the binding bypasses the filter
    review = catalog.get("review")
    assert review is not None and review.alias and review.usage == "/review [topic=<topic>]"
    assert catalog.resolve("review", {"topic": "naming"}) == PromptRequest(
        "github", "code_review", {"language": "python", "topic": "naming"}, GITHUB[0]
    )
    assert catalog.resolve("review", {"language": "go"}).arguments == {"language": "go"}


def test_a_binding_without_alias_fixes_arguments_of_the_namespaced_command() -> None:
    catalog = build_prompt_catalog(
        manifest({"github": {}}, [
            {"server": "github", "name": "code_review", "arguments": {"language": "rust"}},
        ]),
        {"github": GITHUB},
    )
    assert [command.name for command in catalog] == ["github__code_review", "github__triage"]
    assert catalog.resolve("github__code_review", {}).arguments == {"language": "rust"}


def test_resolving_checks_required_and_unknown_arguments() -> None:
    catalog = build_prompt_catalog(manifest({"github": {}}), {"github": GITHUB})
    with pytest.raises(PromptError):
        catalog.resolve("github__code_review", {"topic": "naming"})
    with pytest.raises(PromptError):
        catalog.resolve("github__code_review", {"language": "go", "mood": "calm"})


def test_an_unknown_command_suggests_the_closest_one() -> None:
    catalog = build_prompt_catalog(manifest({"github": {}}), {"github": GITHUB})
    with pytest.raises(PromptError) as caught:
        catalog.resolve("github__triag", {})
    assert "did you mean 'github__triage'" in str(caught.value)


def test_bindings_to_a_server_that_is_not_running_are_left_out() -> None:
    catalog = build_prompt_catalog(
        manifest({"github": {}, "time": {}}, [{"server": "github", "name": "triage", "as": "t"}]),
        {"time": [prompt("now")]},
    )
    assert [command.name for command in catalog] == ["time__now"]
    assert "t" not in catalog and len(catalog) == 1


@pytest.mark.parametrize(
    ("servers", "bindings", "listings"),
    [
        # an alias equal to a namespaced name
        ({"github": {}}, [{"server": "github", "name": "triage", "as": "github__code_review"}],
         {"github": GITHUB}),
        # two prompts that sanitise to one name
        ({"docs": {}}, [], {"docs": [prompt("search.v2"), prompt("search_v2")]}),
        # the same prompt bound twice without alias
        ({"github": {}}, [{"server": "github", "name": "triage"}] * 2, {"github": GITHUB}),
        # a bound prompt the server does not offer
        ({"github": {}}, [{"server": "github", "name": "code-review", "as": "r"}],
         {"github": GITHUB}),
        # a fixed argument the prompt does not declare
        ({"github": {}}, [{"server": "github", "name": "triage", "arguments": {"x": "1"}}],
         {"github": GITHUB}),
    ],
)
def test_conflicting_commands_are_build_errors(
    servers: dict[str, Any], bindings: list[dict[str, Any]], listings: dict[str, Any]
) -> None:
    with pytest.raises(BuildError):
        build_prompt_catalog(manifest(servers, bindings), listings)


def test_a_listing_for_an_undeclared_server_is_a_build_error() -> None:
    with pytest.raises(BuildError):
        build_prompt_catalog(manifest({"github": {}}), {"gitlab": GITHUB})
