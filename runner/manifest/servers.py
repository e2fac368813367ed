"""The manifest's server entries: settings shared with ``defaults``, stdio and HTTP servers.

Servers are a discriminated union on ``transport`` (``type`` is accepted as an alias, as in Claude
Code / VS Code ``mcpServers`` entries; without either, ``command`` means stdio and ``url`` means
streamable HTTP). Fields marked ``RESTARTS`` need a new connection when edited.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from runner.manifest.basics import (
    RESTARTS,
    SERVER_KEY_PATTERN,
    Duration,
    EnvName,
    HeartbeatSpec,
    ImportPath,
    NameFilterSpec,
    PositiveInt,
    RestartSpec,
    Spec,
    ToolFilterSpec,
    UniqueNames,
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
        description="Folders offered to the server as roots, relative to the manifest"
        " (default: top-level roots).",
    )
    logging: Annotated[ServerLoggingSpec, RESTARTS] = Field(
        default_factory=ServerLoggingSpec, description="Log level asked of the server, and shown."
    )
    protocol: Annotated[Literal["auto", "2025-11-25", "2026-07-28"], RESTARTS] = Field(
        "auto",
        description="MCP protocol era: auto probes 2026-07-28 and falls back to the initialize "
        "handshake; 2025-11-25 starts with initialize (the server may settle on an older version); "
        "2026-07-28 adopts that era without a probe.",
    )
    tasks: Literal["auto", "always", "never"] = Field(
        "auto",
        description="Tool calls as tasks (2025-11-25): auto for tools that require it, always also "
        "for those that allow it, never (tools that require it are not offered).",
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
    command: Annotated[str, RESTARTS] = Field(
        min_length=1, description="Program to start (looked up on PATH)."
    )
    args: Annotated[list[str], RESTARTS] = Field(default_factory=list)
    env: Annotated[dict[EnvName, str], RESTARTS] = Field(
        default_factory=dict, repr=False, description="Variables set for the server (values are secret)."
    )
    env_passthrough: Annotated[list[EnvName], RESTARTS] = Field(
        default_factory=list, description="Host variables passed through beyond the allow-list."
    )
    cwd: Annotated[str | None, RESTARTS] = Field(
        None, description="Working directory, relative to the manifest."
    )
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

