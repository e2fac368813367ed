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
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

SERVER_KEY_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
SERVER_KEY_RULE = (
    "server keys become tool name prefixes, so they must start with a lowercase letter and use only "
    "lowercase letters, digits and '-' (at most 32 characters)"
)
IMPORT_PATH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".md", ".txt")
# A stdio command spelled like this runs the interpreter running mcp-run (and its packages).
PYTHON_COMMANDS = ("python", "python3")
# The built-in models (no provider, no network).
OFFLINE_ID = "offline"
SCRIPTED_ID = "scripted"
# The chat's own commands (``/help`` ...): a prompt command may not take one of these names.
CHAT_COMMANDS = ("help", "tools", "prompts", "call", "thread", "reload", "save", "exit", "quit")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """``500ms``, ``30s``, ``2m``, ``1h`` or a number of seconds -> seconds (must be positive)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 2m or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        if isinstance(value, str) and value.strip().startswith("-"):
            raise ValueError("a duration must be positive")
        raise ValueError("expected a duration such as 500ms, 30s, 2m or a number of seconds")
    if not 0 < seconds < float("inf"):  # also refuses NaN
        raise ValueError("a duration must be positive and finite")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema({
        "anyOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\d+(\.\d+)?(ms|s|m|h)?$"},
        ],
    }),
]
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
ImportPath = Annotated[
    str,
    Field(pattern=IMPORT_PATH_PATTERN, description="Python import path 'package.module:function'"),
]
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]


def _unique(items: list[str]) -> list[str]:
    duplicates = sorted({item for item in items if items.count(item) > 1})
    if duplicates:
        raise ValueError(f"listed more than once: {', '.join(duplicates)}")
    return items


UniqueNames = Annotated[list[Annotated[str, Field(min_length=1)]], AfterValidator(_unique)]


class Spec(BaseModel):
    """Base of every manifest model: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class HeartbeatSpec(Spec):
    interval: Duration = Field(15.0, description="Seconds between liveness checks.")
    stale_after: Duration = Field(
        45.0, description="A server silent this long is considered stale and restarted."
    )

    @model_validator(mode="after")
    def _stale_after_interval(self) -> HeartbeatSpec:
        if self.stale_after < self.interval:
            raise ValueError("stale_after must be at least interval")
        return self


class RestartSpec(Spec):
    max_attempts: PositiveInt = Field(5, description="Restarts tried before the server is failed.")
    backoff: Duration = Field(1.0, description="First delay between restarts; doubles each time.")
    max_backoff: Duration = Field(30.0, description="Upper bound of the delay between restarts.")


class NameFilterSpec(Spec):
    """Which names a server contributes: exact names or shell-style globs."""

    only: UniqueNames | None = Field(None, description="Keep only these names (exact or glob).")
    except_: UniqueNames | None = Field(
        None, alias="except", description="Drop these names (exact or glob)."
    )

    @model_validator(mode="after")
    def _only_or_except(self) -> NameFilterSpec:
        if self.only is not None and self.except_ is not None:
            raise ValueError("'only' and 'except' cannot be used together; pick one")
        return self


class ToolFilterSpec(NameFilterSpec):
    filter: ImportPath | None = Field(
        None, description="Function called with each MCP tool definition; keeps it if truthy."
    )
    approve: UniqueNames = Field(
        default_factory=list, description="Globs of tools that need approval before each call."
    )
    rename: dict[str, Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")]] = Field(
        default_factory=dict, description="Original tool name -> name shown to the model."
    )
    timeouts: dict[str, Duration] = Field(
        default_factory=dict, description="Per-tool request timeouts, by original tool name."
    )


class _Restarts:
    """Marks a server field whose change needs a new connection (see :func:`restart_fields`)."""

    def __repr__(self) -> str:
        return "RESTARTS"


RESTARTS = _Restarts()  # ``Annotated[T, RESTARTS]``: editing the field restarts the server


def restart_fields(spec_type: type[BaseModel]) -> frozenset[str]:
    """The fields of a server spec whose change restarts the server; the others apply live."""
    return frozenset(
        name for name, info in spec_type.model_fields.items() if any(m is RESTARTS for m in info.metadata)
    )


LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class ServerLoggingSpec(Spec):
    """What a server logs (``notifications/message``): all of it goes to the server's log file."""

    level: LogLevel = Field("info", description="Level asked of the server when connecting.")
    terminal: LogLevel = Field("warning", description="Messages at or above this level are also shown.")


class ServerSettings(Spec):
    """Settings every server has; ``defaults`` gives them values, a server may override them."""

    timeout: Duration | None = Field(
        None, description="Timeout of one request (default 30s); with max_timeout, the idle limit."
    )
    max_timeout: Duration | None = Field(
        None, description="Progress notifications extend a tool call's timeout up to this total.",
    )
    startup_timeout: Annotated[Duration | None, RESTARTS] = Field(
        None, description="Time allowed to start and finish the handshake (default 20s)."
    )
    heartbeat: Annotated[HeartbeatSpec | None, RESTARTS] = Field(None, description="Liveness checks.")
    restart: Annotated[RestartSpec | None, RESTARTS] = Field(None, description="Restarts after a crash.")
    required: bool | None = Field(
        None, description="A required server that cannot start stops the run (default false)."
    )
    max_output_chars: PositiveInt | None = Field(
        None, description="Tool text beyond this is cut to head and tail (default 100000)."
    )


class DefaultsSpec(ServerSettings):
    timeout: Duration = 30.0
    startup_timeout: Duration = 20.0
    heartbeat: HeartbeatSpec = Field(default_factory=HeartbeatSpec)
    restart: RestartSpec = Field(default_factory=RestartSpec)
    required: bool = False
    max_output_chars: PositiveInt = 100_000


class ServerBase(ServerSettings):
    fallback: str | None = Field(
        None, description="Key of a server that gets the same call when this one fails transiently."
    )
    on_fallback: ImportPath | None = Field(None, description="Hook called before each fallback.")
    expose: bool = Field(True, description="False: the server only serves as a fallback.")
    tools: ToolFilterSpec = Field(default_factory=ToolFilterSpec)
    prompts: NameFilterSpec = Field(default_factory=NameFilterSpec)
    resources: bool = Field(False, description="Offer tools to list and read the server's resources.")
    elicitation: Annotated[Literal["ask", "decline"], RESTARTS] = Field(
        "ask", description="Requests for input from the server: ask the user, or decline them."
    )
    sampling: Annotated[Literal["ask", "allow", "deny"] | None, RESTARTS] = Field(
        None,
        description="Completions the server asks of the model (default ask in the chat, deny elsewhere).",
    )
    roots: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None,
        description="Folders offered to the server as roots, relative to the manifest (default: top-level roots).",
    )
    logging: Annotated[ServerLoggingSpec, RESTARTS] = Field(
        default_factory=ServerLoggingSpec, description="Log level asked of the server, and shown."
    )

    def inherit(self, defaults: DefaultsSpec) -> ServerBase:
        """A copy with every unset setting taken from ``defaults``."""
        unset = {
            name: getattr(defaults, name)
            for name in ServerSettings.model_fields
            if getattr(self, name) is None
        }
        return self.model_copy(update=unset)


def _mount_from_text(value: Any) -> Any:
    """``host:container`` or ``host:container:rw`` (``:ro`` is the default) -> a mount mapping."""
    if not isinstance(value, str):
        return value
    parts = value.split(":")
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        return {"source": parts[0], "target": parts[1], "writable": parts[2] == "rw"}
    if len(parts) == 2:
        return {"source": parts[0], "target": parts[1]}
    raise ValueError("a mount is 'host:container', 'host:container:rw' or a mapping")


class MountSpec(Spec):
    source: str = Field(min_length=1, description="Host path, relative to the manifest.")
    target: str = Field(pattern=r"^/", description="Absolute path inside the container.")
    writable: bool = Field(False, description="Mounted read-only unless true.")


class ContainerSpec(Spec):
    """Run the server's command in a container: a fresh one from ``image``, or ``exec`` in a running one."""

    image: str | None = Field(None, min_length=1, description="Image of a fresh container (run --rm -i).")
    exec_: str | None = Field(
        None, alias="exec", min_length=1, description="Name of a running container to exec into."
    )
    engine: Literal["docker", "podman"] | None = Field(
        None, description="Container engine; found on PATH when omitted (docker, then podman)."
    )
    mounts: list[Annotated[MountSpec, BeforeValidator(_mount_from_text)]] = Field(
        default_factory=list,
        description="Host paths made visible ('host:container[:rw]'), read-only unless marked.",
    )
    network: str = Field("none", min_length=1, description="Container network (default none: no network).")
    workdir: str | None = Field(None, pattern=r"^/", description="Working directory inside the container.")
    user: str | None = Field(None, min_length=1, description="User (name or uid[:gid]) inside the container.")
    args: list[str] = Field(default_factory=list, description="Extra arguments for the engine's run/exec.")

    @model_validator(mode="after")
    def _image_or_exec(self) -> ContainerSpec:
        if (self.image is None) == (self.exec_ is None):
            raise ValueError("a container needs either 'image' (a fresh container) or 'exec' (a running one)")
        if self.exec_ is not None and (self.mounts or "network" in self.model_fields_set):
            raise ValueError(
                "'mounts' and 'network' belong to the container 'exec' enters, not to the server"
            )
        return self


class SandboxSpec(Spec):
    """Run the server's command under bubblewrap: read-only host, private /tmp, no network."""

    network: bool = Field(False, description="Allow network access (default: none, not even loopback).")
    writable: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Paths the server may write, relative to the manifest."
    )


class StdioServerSpec(ServerBase):
    transport: Annotated[Literal["stdio"], RESTARTS] = Field(
        "stdio", validation_alias=AliasChoices("transport", "type"), description="stdio"
    )
    command: Annotated[str, RESTARTS] = Field(min_length=1, description="Program to start (looked up on PATH).")
    args: Annotated[list[str], RESTARTS] = Field(default_factory=list)
    env: Annotated[dict[EnvName, str], RESTARTS] = Field(
        default_factory=dict, repr=False, description="Variables set for the server (values are secret)."
    )
    env_passthrough: Annotated[list[EnvName], RESTARTS] = Field(
        default_factory=list, description="Host variables passed through beyond the allow-list."
    )
    cwd: Annotated[str | None, RESTARTS] = Field(None, description="Working directory, relative to the manifest.")
    container: Annotated[ContainerSpec | None, RESTARTS] = Field(
        None, description="Run the command inside a container (docker or podman)."
    )
    sandbox: Annotated[SandboxSpec | None, RESTARTS] = Field(
        None, description="Run the command under bubblewrap (bwrap), without a container engine."
    )

    @model_validator(mode="after")
    def _one_isolation(self) -> StdioServerSpec:
        if self.container is not None and self.sandbox is not None:
            raise ValueError("a server runs in a 'container' or in a 'sandbox', not both")
        return self


class AuthSpec(Spec):
    """OAuth 2.1 authorization of an http/sse server (the MCP authorization flow); all optional.

    Without ``client_id`` the client registers itself (a Client ID Metadata Document when
    ``client_metadata_url`` is given and the server supports it, else Dynamic Client Registration).
    """

    grant: Literal["authorization_code", "client_credentials"] = Field(
        "authorization_code",
        description="authorization_code (a person logs in once) or client_credentials (unattended).",
    )
    client_id: str | None = Field(None, min_length=1, description="A pre-registered client id.")
    client_secret: str | None = Field(
        None, min_length=1, repr=False, description="Its secret (secret; use ${VAR})."
    )
    client_metadata_url: str | None = Field(
        None,
        pattern=r"^https://[^\s/]+/\S+",
        description="HTTPS URL of a Client ID Metadata Document, used as client id where supported.",
    )
    scopes: UniqueNames | None = Field(
        None, description="Scopes to request (default: what the server asks for or supports)."
    )
    callback_port: int | None = Field(
        None, ge=1, le=65535, description="Port of the login redirect on 127.0.0.1 (default 33418)."
    )
    issuer: str | None = Field(
        None,
        pattern=r"^https?://[^\s/]+",
        description="client_credentials: the authorization server the credentials belong to.",
    )

    @model_validator(mode="after")
    def _grant_needs(self) -> AuthSpec:
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("grant client_credentials needs client_id and client_secret")
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret needs client_id")
        return self


class HttpServerSpec(ServerBase):
    transport: Annotated[Literal["http", "sse", "websocket"], RESTARTS] = Field(
        "http",
        validation_alias=AliasChoices("transport", "type"),
        description="http (streamable HTTP), sse (legacy) or websocket; 'type' is accepted too",
    )
    url: Annotated[str, RESTARTS] = Field(
        pattern=r"^(https?|wss?)://[^\s/]+",
        description="Streamable HTTP (or SSE) endpoint, or a ws:// / wss:// websocket endpoint.",
    )
    headers: Annotated[dict[str, str], RESTARTS] = Field(
        default_factory=dict, repr=False, description="Request headers (values are secret)."
    )
    auth: Annotated[AuthSpec | None, RESTARTS] = Field(
        None, repr=False, description="OAuth authorization (log in once with `mcp-run auth login`)."
    )

    @model_validator(mode="before")
    @classmethod
    def _websocket_from_url(cls, value: Any) -> Any:
        """A ``ws://`` or ``wss://`` url without a declared transport means websocket."""
        if isinstance(value, dict) and "transport" not in value and "type" not in value:
            url = value.get("url")
            if isinstance(url, str) and url.startswith(("ws://", "wss://")):
                return {**value, "transport": "websocket"}
        return value

    @model_validator(mode="after")
    def _one_authorization(self) -> HttpServerSpec:
        if self.auth is not None and any(name.lower() == "authorization" for name in self.headers):
            raise ValueError(
                "'auth' and an 'Authorization' header both authorize the requests: keep one "
                "(the header is a static token, 'auth' logs in with OAuth)"
            )
        return self

    @model_validator(mode="after")
    def _scheme_matches_transport(self) -> HttpServerSpec:
        websocket_url = self.url.startswith(("ws://", "wss://"))
        if websocket_url != (self.transport == "websocket"):
            wanted = "ws:// or wss://" if self.transport == "websocket" else "http:// or https://"
            raise ValueError(f"transport {self.transport} needs a {wanted} url")
        return self


_TRANSPORT_ALIASES = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
    "sse": "sse",
    "websocket": "websocket",
    "ws": "websocket",
}


def _transport_tag(value: Any) -> str | None:
    """Which server model a raw mapping is meant for."""
    if isinstance(value, BaseModel):
        return "stdio" if isinstance(value, StdioServerSpec) else "http"
    if not isinstance(value, dict):
        return None
    declared = value.get("transport", value.get("type"))
    if declared is None:
        if "command" in value:
            return "stdio"
        return "http" if "url" in value else None
    tag = _TRANSPORT_ALIASES.get(declared) if isinstance(declared, str) else None
    return "stdio" if tag == "stdio" else ("http" if tag else None)


def _normalise_transport(value: Any) -> Any:
    if isinstance(value, dict):
        declared = value.get("transport", value.get("type"))
        if "transport" in value and "type" in value:
            raise ValueError("give either 'transport' or 'type', not both")
        if "command" in value and "url" in value:
            raise ValueError(
                "a server has either 'command' (stdio) or 'url' (http, sse, websocket), not both"
            )
        if isinstance(declared, str) and declared in _TRANSPORT_ALIASES:
            key = "transport" if "transport" in value else "type"
            value = {**value, key: _TRANSPORT_ALIASES[declared]}
    return value


ServerSpec = Annotated[
    Annotated[StdioServerSpec, Tag("stdio")] | Annotated[HttpServerSpec, Tag("http")],
    Discriminator(
        _transport_tag,
        custom_error_type="server_kind",
        custom_error_message=(
            "a server needs 'command' (stdio) or 'url' (http, ws); 'transport' is one of "
            "stdio, http, sse, websocket"
        ),
    ),
    BeforeValidator(_normalise_transport),
]
ServerKey = Annotated[str, Field(pattern=SERVER_KEY_PATTERN)]


class ModelSpec(Spec):
    id: str = Field(
        min_length=1,
        description="init_chat_model id (provider:model), or the built-in 'offline' / 'scripted'.",
    )
    fallbacks: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Model ids tried in order when the model call fails."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Passed to the model.")
    base_url: str | None = Field(None, description="Endpoint of an OpenAI-compatible server.")
    api_key_env: EnvName | None = Field(None, description="Variable holding the API key.")
    script: str | None = Field(None, description="Turns file of the 'scripted' model.")

    @model_validator(mode="after")
    def _script_for_scripted(self) -> ModelSpec:
        if self.id == "scripted" and not self.script:
            raise ValueError("the 'scripted' model needs 'script: path/to/turns.yaml'")
        if self.script and self.id != "scripted":
            raise ValueError("'script' is only used by the 'scripted' model")
        return self


def _model_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


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


class AgentSpec(Spec):
    max_steps: PositiveInt = Field(25, description="Model calls allowed in one turn.")
    tool_separator: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,3}$")] = Field(
        "__", description="Between the server key and the tool name in generated names."
    )


class WatchSpec(Spec):
    debounce: Duration = Field(0.2, description="Quiet time after a change before reloading.")
    paths: list[str] = Field(
        default_factory=list, description="Extra files or folders, relative to the manifest."
    )


_CHECKPOINTER = re.compile(r"^(memory|sqlite:///.+|postgres(ql)?://.+)$")


class Manifest(Spec):
    version: Literal[1] = Field(description="Manifest format version; always 1.")
    name: str = Field(min_length=1, max_length=128, description="Name of the agent.")
    description: str | None = None
    model: Annotated[
        ModelSpec, BeforeValidator(_model_from_id, json_schema_input_type=str | ModelSpec)
    ] = Field(
        default_factory=lambda: ModelSpec(id="offline"),
        description="The chat model: an id string or a mapping.",
    )
    defaults: DefaultsSpec = Field(default_factory=DefaultsSpec)
    servers: dict[ServerKey, ServerSpec] = Field(default_factory=dict)
    prompts: PromptsSpec = Field(default_factory=PromptsSpec)
    agent: AgentSpec = Field(default_factory=AgentSpec)
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


def reference_problems(manifest: Manifest) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems that span several parts of the manifest, each with the path it belongs to."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    keys = sorted(manifest.servers)
    for key in keys:
        spec = manifest.servers[key]
        if spec.fallback is None:
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
        if binding.server not in manifest.servers:
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
    return problems


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
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
