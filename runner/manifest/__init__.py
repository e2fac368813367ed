"""The manifest as validated data: pydantic models only, no I/O.

Every model forbids unknown keys and is frozen. Servers are a discriminated union on ``transport``
(``type`` is accepted as an alias, as in Claude Code / VS Code ``mcpServers`` entries; without
either, ``command`` means stdio and ``url`` means streamable HTTP). Fields a server leaves unset are
inherited from ``defaults`` when the manifest is validated, so consumers always see concrete values.

Cross-references (fallbacks, prompt bindings) are checked by :func:`reference_problems`, which
returns every problem with its path; loading uses it to report them all at once.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    model_validator,
)

# Consumers import every manifest name from here; the sub-modules only keep files short.
from runner.manifest.agents import (
    AGENT_NAME_PATTERN,
    AGENT_NAME_RULE,
    HANDOFFS_DESCRIPTION,
    MAIN_AGENT,
    AgentDefinition,
    AgentName,
    AgentNames,
    ChainSpec,
    FileAgentSpec,
    LoopSpec,
    ModelAgentSpec,
    ParallelSpec,
    RouterSpec,
    agent_kind,
    agent_problems,
)
from runner.manifest.basics import (
    CHAT_COMMANDS,
    ENV_NAME_PATTERN,
    IMPORT_PATH_PATTERN,
    OFFLINE_ID,
    PYTHON_COMMANDS,
    SCRIPTED_ID,
    SERVER_KEY_PATTERN,
    SERVER_KEY_RULE,
    TEMPLATE_SUFFIXES,
    Duration,
    EnvName,
    ImportPath,
    NameFilterSpec,
    PositiveInt,
    Spec,
    ToolFilterSpec,
    _unique,
    restart_fields,
)
from runner.manifest.context import ContextSpec
from runner.manifest.model import ModelField, ModelSpec
from runner.manifest.model_calls import RetrySpec
from runner.manifest.output import OutputSpec
from runner.manifest.policy import PolicyRuleSpec, PolicySpec
from runner.manifest.servers import (
    _TRANSPORT_ALIASES,
    AuthSpec,
    ContainerSpec,
    DefaultsSpec,
    HttpServerSpec,
    SandboxSpec,
    ServerBase,
    ServerKey,
    ServerSettings,
    ServerSpec,
    StdioServerSpec,
)
from runner.manifest.spending import BudgetSpec, LimitsSpec, PricingSpec


class McpPromptSpec(Spec):
    server: str = Field(description="Server key offering the prompt.")
    name: str = Field(min_length=1, description="The prompt's name on that server.")
    as_: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")] | None = Field(
        None, alias="as", description="Short alias, used as /alias in the chat."
    )
    arguments: dict[str, str] = Field(default_factory=dict, description="Fixed arguments.")


class PromptsSpec(Spec):
    system: str | None = Field(
        None,
        description=(
            "System prompt: a template file relative to the manifest (one line ending in .j2, "
            ".jinja, .jinja2, .md or .txt) or inline Jinja2 text."
        ),
    )
    vars: dict[str, Any] = Field(default_factory=dict, description="Variables for the templates.")
    mcp: list[McpPromptSpec] = Field(default_factory=list, description="Bound MCP prompts.")

    @property
    def system_is_file(self) -> bool:
        text = self.system or ""
        return "\n" not in text and text.strip().endswith(TEMPLATE_SUFFIXES)


def _mode_word(value: Any) -> Any:
    # YAML 1.1 reads a bare on / off as a boolean.
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


ToolSearchMode = Annotated[
    Literal["auto", "on", "off"],
    BeforeValidator(_mode_word, json_schema_input_type=Literal["auto", "on", "off"] | bool),
]


class ToolSearchSpec(Spec):
    """When the model is offered a ``search_tools`` tool instead of every tool."""

    mode: ToolSearchMode = Field(
        "auto",
        description="auto: search once the tools pass max_tools or max_bytes (or the provider's "
        "tool limit); on: always; off: never, every tool is offered.",
    )
    max_tools: PositiveInt = Field(64, description="auto: more tools than this turn search on.")
    max_bytes: PositiveInt = Field(
        32768, description="auto: tool definitions larger than this (bytes of JSON) turn search on."
    )
    results: Annotated[int, Field(gt=0, le=50, strict=True)] = Field(
        8, description="Tools one search returns at most."
    )


def _tool_search_from_mode(value: Any) -> Any:
    value = _mode_word(value)
    if isinstance(value, dict | ToolSearchSpec) or (
        isinstance(value, str) and value in ("auto", "on", "off")
    ):
        return {"mode": value} if isinstance(value, str) else value
    shown = "null" if value is None else f"'{value}'" if isinstance(value, str) else repr(value)
    raise ValueError(
        f"expected auto, on, off (true, false) or a mapping {{mode, max_tools, ...}}, not {shown}"
    )


class AgentSpec(Spec):
    max_steps: PositiveInt = Field(25, description="Model calls allowed in one turn.")
    tool_separator: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,3}$")] = Field(
        "__", description="Between the server key and the tool name in generated names."
    )
    tool_search: Annotated[
        ToolSearchSpec,
        BeforeValidator(
            _tool_search_from_mode,
            json_schema_input_type=Literal["auto", "on", "off"] | bool | ToolSearchSpec,
        ),
    ] = Field(
        default_factory=ToolSearchSpec,
        description="auto | on | off, or a mapping {mode, max_tools, max_bytes, results}.",
    )
    agents: AgentNames = Field(
        default_factory=list, description="Agents of 'agents:' this agent may call as tools."
    )
    handoffs: AgentNames = Field(default_factory=list, description=HANDOFFS_DESCRIPTION)


class WatchSpec(Spec):
    debounce: Duration = Field(0.2, description="Quiet time after a change before reloading.")
    paths: list[str] = Field(
        default_factory=list, description="Extra files or folders, relative to the manifest."
    )


def _attribute_names(value: Any) -> Any:
    if isinstance(value, dict) and "" in value:
        raise ValueError("an attribute name cannot be empty")
    return value


def _scalar(value: Any) -> Any:
    """One clear problem for a bad attribute value, not one per type it could have had."""
    if not isinstance(value, str | bool | int | float):
        raise ValueError("a value is text, a number or true/false")
    return value


def _telemetry_block(value: Any) -> Any:
    if isinstance(value, dict | TelemetrySpec):
        return value
    raise ValueError("a mapping: enabled, service_name, resource_attributes, capture_content")


class TelemetrySpec(Spec):
    enabled: bool | None = Field(
        None,
        description=(
            "Export OpenTelemetry traces and metrics (OTLP over HTTP; needs mcp-run[otel]). "
            "Unset: on when OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set."
        ),
    )
    service_name: Annotated[str, Field(min_length=1)] | None = Field(
        None,
        description="service.name of the exported data; default OTEL_SERVICE_NAME, else the agent's name.",
    )
    resource_attributes: Annotated[
        dict[Annotated[str, Field(min_length=1)],
             Annotated[str | bool | int | float, BeforeValidator(_scalar)]],
        BeforeValidator(_attribute_names),
    ] = Field(default_factory=dict, description="Added to the resource of everything exported.")
    capture_content: bool = Field(
        False, description="Record tool arguments and results in spans (off: only their sizes)."
    )


_CHECKPOINTER = re.compile(r"^(memory|sqlite:///.+|postgres(ql)?://.+)$")


class Manifest(Spec):
    version: Literal[1] = Field(description="Manifest format version; always 1.")
    name: str = Field(min_length=1, max_length=128, description="Name of the agent.")
    description: str | None = None
    model: ModelField = Field(
        default_factory=lambda: ModelSpec(id="offline"),
        description="The chat model: an id string or a mapping.",
    )
    defaults: DefaultsSpec = Field(default_factory=DefaultsSpec)
    servers: dict[ServerKey, ServerSpec] = Field(default_factory=dict)
    prompts: PromptsSpec = Field(default_factory=PromptsSpec)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    agents: dict[AgentName, AgentDefinition] = Field(
        default_factory=dict,
        description="More agents beside this one (a model loop, another manifest's 'file', or a "
        "chain, parallel, router or loop workflow), by name.",
    )
    local_tools: Annotated[list[ImportPath], AfterValidator(_unique)] = Field(
        default_factory=list, description="Python functions ('module:function') offered as tools."
    )
    checkpointer: Annotated[str, Field(pattern=_CHECKPOINTER.pattern)] | None = Field(
        None, description="memory, sqlite:///path or postgres://...; default SQLite in .mcp-run/."
    )
    watch: WatchSpec = Field(default_factory=WatchSpec)
    roots: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Folders offered as roots to every server without its own."
    )
    telemetry: Annotated[TelemetrySpec, BeforeValidator(_telemetry_block)] = Field(
        default_factory=TelemetrySpec)
    output: OutputSpec | None = Field(
        None, description="The final answer is an object valid against this JSON Schema.")
    limits: LimitsSpec = Field(default_factory=LimitsSpec, description="Budgets of a turn and a thread.")
    policy: PolicySpec = Field(
        default_factory=list,
        description="Ordered rules (tool glob, optional argument matchers, allow | deny | ask); "
        "the first that matches a call decides.",
    )
    context: ContextSpec = Field(
        default_factory=ContextSpec,
        description="What each model request carries: max_tokens, strategy, keep_last_turns, summarize_with.",
    )

    @model_validator(mode="after")
    def _inherit_and_check(self, info: ValidationInfo) -> Manifest:
        resolved = {
            key: spec.inherit(self.defaults).model_copy(
                update={} if spec.roots is not None else {"roots": list(self.roots)}
            )
            for key, spec in self.servers.items()
        }
        object.__setattr__(self, "servers", resolved)
        if not (info.context or {}).get("defer_references"):
            problems = reference_problems(self)
            if problems:
                path, message = problems[0]
                raise ValueError(f"{'.'.join(map(str, path))}: {message}")
        return self


def _fallback_chain(manifest: Manifest, start: str) -> Iterator[str]:
    seen = {start}
    current = manifest.servers[start].fallback
    while current is not None and current in manifest.servers:
        yield current
        if current in seen:
            return
        seen.add(current)
        current = manifest.servers[current].fallback


def reference_problems(manifest: Manifest, *, unchecked_servers: Collection[str] = (),
                       unchecked_agents: Collection[str] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems that span several parts of the manifest, each with the path it belongs to. The
    ``unchecked`` servers and agents were left out of ``manifest`` because their own entries are
    invalid (reported already): naming them is no problem, and nothing about them is checked."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    keys = sorted(manifest.servers)
    for key in keys:
        spec = manifest.servers[key]
        if spec.fallback is None or spec.fallback in unchecked_servers:
            continue
        path = ("servers", key, "fallback")
        if spec.fallback not in manifest.servers:
            problems.append((path, f"unknown server '{spec.fallback}'{did_you_mean(spec.fallback, keys)}"))
        elif spec.fallback == key:
            problems.append((path, "a server cannot be its own fallback"))
        elif key in _fallback_chain(manifest, key):
            chain = " -> ".join([key, *_fallback_chain(manifest, key)])
            problems.append((path, f"fallbacks form a cycle: {chain}"))
    for index, binding in enumerate(manifest.prompts.mcp):
        if binding.server not in manifest.servers and binding.server not in unchecked_servers:
            problems.append((
                ("prompts", "mcp", index, "server"),
                f"unknown server '{binding.server}'{did_you_mean(binding.server, keys)}",
            ))
    aliases = [b.as_ for b in manifest.prompts.mcp if b.as_]
    separator = manifest.agent.tool_separator
    for index, binding in enumerate(manifest.prompts.mcp):
        if binding.as_ and aliases.count(binding.as_) > 1:
            problems.append((("prompts", "mcp", index, "as"), f"alias '{binding.as_}' is used twice"))
        # Without an alias the command is server + separator + prompt name: it could spell one too.
        command = binding.as_ or f"{binding.server}{separator}{binding.name}"
        if command in CHAT_COMMANDS:
            where = ("prompts", "mcp", index, "as" if binding.as_ else "name")
            problems.append((where, f"'/{command}' is a command of the chat itself, so this prompt "
                                    "could never be reached; choose another name with 'as'"))
    for key in keys:
        if separator in key:
            problems.append((
                ("agent", "tool_separator"),
                f"separator '{separator}' occurs in server key '{key}'; names could not be split",
            ))
    for name in sorted(manifest.agents):
        if separator in name:
            problems.append((("agents", name), f"separator '{separator}' occurs in the agent name; "
                                                "it could be taken for a server's tool"))
    local_tools = [path.rsplit(":", 1)[-1] for path in manifest.local_tools]
    problems.extend(agent_problems(manifest.agents, manifest.agent.agents,
                                   sorted({*keys, *unchecked_servers}), separator, local_tools,
                                   main_handoffs=manifest.agent.handoffs, unchecked=unchecked_agents))
    return problems


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    import difflib

    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of the manifest, for editors (yaml-language-server) and docs."""
    schema = Manifest.model_json_schema(by_alias=True)
    for name, tag in (("StdioServerSpec", "stdio"), ("HttpServerSpec", "http")):
        properties = schema["$defs"][name]["properties"]
        spellings = [alias for alias, kind in _TRANSPORT_ALIASES.items() if kind == tag]
        if tag == "http":
            spellings += [alias for alias, kind in _TRANSPORT_ALIASES.items() if kind in ("sse", "websocket")]
        properties["transport"] = {
            "enum": spellings, "description": properties["transport"].get("description", tag)
        }
        # 'type' is the Claude Code / VS Code spelling of 'transport'.
        properties["type"] = properties["transport"]
    # Top-level 'x-…' keys are free-form, for YAML anchors (as in compose files).
    schema["patternProperties"] = {"^x-": {}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mcp-run.dev/schemas/agent.schema.json",
        **schema,
    }


__all__ = [
    "AGENT_NAME_PATTERN",
    "AGENT_NAME_RULE",
    "MAIN_AGENT",
    "AgentDefinition",
    "AgentName",
    "ChainSpec",
    "FileAgentSpec",
    "LoopSpec",
    "ModelAgentSpec",
    "ParallelSpec",
    "RouterSpec",
    "agent_kind",
    "CHAT_COMMANDS",
    "ENV_NAME_PATTERN",
    "IMPORT_PATH_PATTERN",
    "OFFLINE_ID",
    "PYTHON_COMMANDS",
    "SCRIPTED_ID",
    "SERVER_KEY_PATTERN",
    "SERVER_KEY_RULE",
    "TEMPLATE_SUFFIXES",
    "AgentSpec",
    "AuthSpec",
    "BudgetSpec",
    "ContainerSpec",
    "ContextSpec",
    "DefaultsSpec",
    "Duration",
    "EnvName",
    "HttpServerSpec",
    "ImportPath",
    "LimitsSpec",
    "Manifest",
    "McpPromptSpec",
    "ModelSpec",
    "NameFilterSpec",
    "OutputSpec",
    "PolicyRuleSpec",
    "PolicySpec",
    "PositiveInt",
    "PricingSpec",
    "PromptsSpec",
    "RetrySpec",
    "SandboxSpec",
    "ServerBase",
    "ServerKey",
    "ServerSettings",
    "ServerSpec",
    "Spec",
    "StdioServerSpec",
    "TelemetrySpec",
    "ToolFilterSpec",
    "ToolSearchMode",
    "ToolSearchSpec",
    "WatchSpec",
    "did_you_mean",
    "manifest_json_schema",
    "reference_problems",
    "restart_fields",
]
