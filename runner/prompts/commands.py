"""MCP prompts as chat commands: ``/review language=python "topic=two words"``.

Every prompt a server exposes (after its ``prompts`` only/except filter) is a command named
``{server}{separator}{prompt}`` by the rule that names tools (:mod:`runner.tools.naming`). Each
``prompts.mcp`` binding with an ``as`` alias adds a command of that name; a binding without one
attaches its fixed arguments to the namespaced command. Bindings name prompts explicitly, so they
bypass the server's filter. When a command runs, arguments typed by the person override the
binding's fixed ones: the fixed ones are defaults written ahead of time, the typed ones are what
the person asks for now.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType

from mcp import types

from runner.errors import BuildError, PromptError
from runner.manifest import Manifest, McpPromptSpec, NameFilterSpec, did_you_mean
from runner.prompts.messages import check_prompt_arguments, describe_arguments
from runner.tools.naming import NAME_PATTERN, generate_name

logger = logging.getLogger(__name__)


def parse_command_line(line: str) -> tuple[str, dict[str, str]]:
    """``/name key=value "key=two words"`` -> ``(name, {key: value})``; quoting as in a shell."""
    text = line.strip()
    if not text.startswith("/"):
        raise PromptError("a command starts with '/', as in /review language=python")
    name, _, rest = re.sub(r"\s", " ", text[1:], count=1).partition(" ")
    if not NAME_PATTERN.match(name):
        raise PromptError("a command needs a name right after '/', as in /review language=python")
    try:
        words = shlex.split(rest)
    except ValueError as exc:  # an unclosed quote or a trailing backslash
        raise PromptError(f"cannot read the command line: {exc}") from exc
    arguments: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise PromptError(
                f"'{word}' is not an argument: write key=value, quoted when the value has "
                'spaces ("topic=two words")'
            )
        if key in arguments:
            raise PromptError(f"argument '{key}' is given twice")
        arguments[key] = value
    return name, arguments


def exposed(prompts: Sequence[types.Prompt], spec: NameFilterSpec) -> list[types.Prompt]:
    """The prompts a server's ``prompts`` only/except filter lets through (shell-style globs)."""

    def matches(name: str, patterns: list[str]) -> bool:
        return any(fnmatchcase(name, pattern) for pattern in patterns)

    if spec.only is not None:
        return [prompt for prompt in prompts if matches(prompt.name, spec.only)]
    if spec.except_ is not None:
        return [prompt for prompt in prompts if not matches(prompt.name, spec.except_)]
    return list(prompts)


@dataclass(frozen=True)
class PromptCommand:
    """One chat command: the prompt it gets and the arguments fixed by the manifest."""

    name: str
    server: str
    prompt: types.Prompt
    fixed_arguments: Mapping[str, str] = field(default_factory=dict)
    alias: bool = False

    @property
    def description(self) -> str:
        return self.prompt.description or self.prompt.title or ""

    @property
    def usage(self) -> str:
        """``/review language=<language> [topic=<topic>]``, without the fixed arguments."""
        parts = [f"/{self.name}"]
        for argument in self.prompt.arguments or []:
            if argument.name in self.fixed_arguments:
                continue
            word = f"{argument.name}=<{argument.name}>"
            parts.append(word if argument.required else f"[{word}]")
        return " ".join(parts)


@dataclass(frozen=True)
class PromptRequest:
    """What to send: ``prompts/get`` of ``name`` on ``server`` with ``arguments``."""

    server: str
    name: str
    arguments: dict[str, str]
    prompt: types.Prompt


class PromptCatalog:
    """The chat commands of one generation, by name."""

    def __init__(self, commands: Sequence[PromptCommand]) -> None:
        self._commands = MappingProxyType({command.name: command for command in commands})

    def __iter__(self) -> Iterator[PromptCommand]:
        return iter(sorted(self._commands.values(), key=lambda command: command.name))

    def __len__(self) -> int:
        return len(self._commands)

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def get(self, name: str) -> PromptCommand | None:
        return self._commands.get(name)

    def resolve(self, name: str, arguments: Mapping[str, str]) -> PromptRequest:
        """The request for ``/name`` with the person's ``arguments`` (which override fixed ones)."""
        command = self._commands.get(name)
        if command is None:
            known = ", ".join(f"/{known}" for known in sorted(self._commands)) or "none"
            hint = did_you_mean(name, list(self._commands))
            raise PromptError(f"unknown command '/{name}'{hint}; commands: {known}")
        merged = {**command.fixed_arguments, **arguments}
        check_prompt_arguments(command.prompt, merged)
        return PromptRequest(command.server, command.prompt.name, merged, command.prompt)


def build_prompt_catalog(
    manifest: Manifest, listings: Mapping[str, Sequence[types.Prompt]]
) -> PromptCatalog:
    """Commands from each server's ``prompts/list`` result (unfiltered) and the bindings.

    ``listings`` holds the servers that answered; bindings to a server missing from it are left
    out (the server is down). A binding to a prompt the server does not offer, fixed arguments the
    prompt does not declare, and two commands with one name are :class:`BuildError`.
    """
    separator = manifest.agent.tool_separator
    problems: list[str] = []
    bound = {(binding.server, binding.name): binding for binding in manifest.prompts.mcp
             if binding.as_ is None}
    commands: list[tuple[PromptCommand, str]] = []  # with where each came from, for collisions

    for server in sorted(listings):
        spec = manifest.servers.get(server)
        if spec is None:
            raise BuildError(f"prompts listed for '{server}', which the manifest does not declare")
        if not spec.expose:
            continue
        for prompt in exposed(listings[server], spec.prompts):
            if (server, prompt.name) in bound:
                continue  # added below with its fixed arguments
            name = generate_name(server, prompt.name, separator=separator)
            commands.append((PromptCommand(name, server, prompt), f"{server}/{prompt.name}"))

    for index, binding in enumerate(manifest.prompts.mcp):
        if binding.server not in listings:
            logger.debug("prompt %s/%s is unavailable: its server is not running",
                        binding.server, binding.name)
            continue
        origin = f"prompts.mcp[{index}] ({binding.server}/{binding.name})"
        command = _bound_command(binding, listings[binding.server], separator, origin, problems)
        if command is not None:
            commands.append((command, origin))

    problems.extend(_collisions(commands))
    if problems:
        raise BuildError("prompt commands cannot be built:\n" + "\n".join(problems))
    return PromptCatalog([command for command, _ in commands])


def _bound_command(
    binding: McpPromptSpec,
    offered: Sequence[types.Prompt],
    separator: str,
    origin: str,
    problems: list[str],
) -> PromptCommand | None:
    prompt = next((prompt for prompt in offered if prompt.name == binding.name), None)
    if prompt is None:
        names = [prompt.name for prompt in offered]
        problems.append(
            f"{origin}: server '{binding.server}' offers no prompt '{binding.name}'"
            f"{did_you_mean(binding.name, names)}"
        )
        return None
    declared = {argument.name for argument in prompt.arguments or []}
    undeclared = sorted(set(binding.arguments) - declared)
    if undeclared:
        problems.append(
            f"{origin}: fixed argument(s) {', '.join(undeclared)} not declared by the prompt "
            f"({describe_arguments(prompt)})"
        )
        return None
    if binding.as_ is not None:
        name, alias = binding.as_, True
    else:
        name, alias = generate_name(binding.server, binding.name, separator=separator), False
    return PromptCommand(name, binding.server, prompt, MappingProxyType(dict(binding.arguments)),
                         alias)


def _collisions(commands: list[tuple[PromptCommand, str]]) -> Iterator[str]:
    origins: dict[str, list[str]] = {}
    for command, origin in commands:
        origins.setdefault(command.name, []).append(origin)
    for name, sources in sorted(origins.items()):
        if len(sources) > 1:
            yield f"command '/{name}' would come from {' and '.join(sources)}; rename one with 'as'"
