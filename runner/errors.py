"""The one exception tree of mcp-run.

    RunnerError                    anything the runner reports to a person
    ├── ManifestError              the manifest (or a template it names) is wrong; carries Problems
    ├── ServerError                one MCP server misbehaved; carries the server key
    │   ├── ServerStartError       it could not be started or did not finish the handshake
    │   │   └── AuthError          its OAuth authorization failed (permanent: a restart fails alike)
    │   │       ├── StaleClientError    the authorization server forgot mcp-run's client: register anew
    │   │       └── LoginRequiredError  no usable token and nobody to ask: ``mcp-run auth login``
    │   ├── ServerClosedError      its connection is gone (process exited, stream closed)
    │   ├── ServerTimeoutError     a request got no answer in time (carries the timeout)
    │   ├── ServerRequestError     it answered a request with a JSON-RPC error (carries the code)
    │   └── AppResourceError       its MCP App page cannot be shown (type, size, metadata; carries the URI)
    ├── ToolError                  a tool call failed in a way the model should hear about
    ├── PromptError                a prompt command cannot be run (bad line, unknown, arguments)
    ├── BuildError                 tools or prompts cannot be assembled
    │   ├── NameCollisionError     two tools (or prompts) would get the same generated name
    │   ├── ImportPathError        a 'module:function' path cannot be imported or is no function
    │   └── UnusableSchemaError    a tool's input schema cannot be offered to the model
    │       └── StrictSchemaError  ... in OpenAI strict mode (it may still be offered without it)
    ├── ModelError                 the chat model cannot be created or answered with an error
    │   └── OutputError            its final answer did not validate against ``output.schema``
    ├── CheckpointerError          the conversation store cannot be opened
    ├── StateError                 the state folder (logs, conversations) cannot be created
    ├── CassetteDrift              an eval case no longer matches its recording (``mcp-run test``)
    ├── CassetteMissing            an eval case has no cassette to replay (``mcp-run test --replay``)
    ├── CaseSaveError              a chat thread cannot be saved as an eval case (``/save``)
    └── ServeError                 a request to the served agent cannot be taken (``mcp-run serve``)
        ├── BusyError              too many turns running and waiting: the caller may try again later
        ├── AskError               the request itself is wrong (empty message, bad thread id, ...)
        └── ApiRequestError        an HTTP API request refused: its status, OpenAI's error type, code, param

Foreign exceptions (yaml, pydantic, mcp, httpx, anyio) are translated into this tree at one place
per boundary and chained with ``raise ... from exc``; for everything said to or by an MCP server
that place is the table in ``runner.servers.translation``. Nothing here imports from the rest of
runner.

Failed requests carry an :class:`ErrorKind` that decides fallbacks: JSON-RPC -32700, -32600,
-32601 and -32602 (the request itself is wrong) are permanent and would fail on any server; -32603
and -32000..-32099 (send failure, timeout, refused, connection lost) and transport failures are
transient and go to the server's ``fallback`` (but -32042, a URL the user must visit first, is
permanent); -32003 (cancelled on purpose) is never retried. A
tool's ``isError`` result is the tool's answer, not an error here, and never falls back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum


class RunnerError(Exception):
    """Base of every error the runner raises on purpose."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One located complaint about a manifest or template.

    ``path`` is the dotted location inside the document (``servers.github.timeout``); ``line`` and
    ``column`` are 1-based. ``file`` is the file the problem is in (the manifest or a template).
    """

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ManifestError(RunnerError):
    """The manifest is invalid; ``problems`` holds every located problem found, in file order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column, p.path))
        super().__init__("\n".join(str(p) for p in self.problems))


class ErrorKind(Enum):
    """How a failed request should be treated by retries and fallbacks."""

    TRANSIENT = "transient"  # transport trouble, timeouts, server-side failures: try elsewhere
    PERMANENT = "permanent"  # malformed request, unknown method, bad params: same everywhere
    CANCELLED = "cancelled"  # the request was cancelled on purpose: never retried


class ServerError(RunnerError):
    """A server-level failure; ``server`` is the manifest key of the server."""

    kind: ErrorKind = ErrorKind.TRANSIENT

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"{server}: {message}")


class ServerStartError(ServerError):
    """The server could not be started or did not complete the handshake.

    ``permanent`` says a restart would fail the same way (command not found, bad URL).
    ``broke_handshake`` says the server was reached and broke the handshake off (it exited or the
    connection failed, not a timeout): a start in another protocol era may get through.
    """

    def __init__(
        self, server: str, message: str, *, permanent: bool = False, broke_handshake: bool = False
    ) -> None:
        self.permanent = permanent
        self.broke_handshake = broke_handshake
        super().__init__(server, message)


class AuthError(ServerStartError):
    """Authorizing with server ``server`` failed (metadata, registration, token, state, issuer)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(server, message, permanent=True)


class StaleClientError(AuthError):
    """The authorization server no longer knows the client mcp-run registered with it (restarted,
    clients kept in memory); the stored registration was dropped, so a new login registers again."""


class LoginRequiredError(AuthError):
    """Server ``server`` needs a login and this run cannot ask for one; ``command`` is what to run."""

    def __init__(self, server: str, command: str) -> None:
        self.command = command
        super().__init__(server, f"needs a login: run `{command}`")


class ServerClosedError(ServerError):
    """The connection to the server is gone (process exited, stream closed, connection reset)."""


class ServerTimeoutError(ServerError):
    """A request to the server got no answer within its timeout."""

    def __init__(self, server: str, message: str, *, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(server, message)


# JSON-RPC codes that mean the request itself is wrong and would fail on any server, and -32042:
# the user must visit a URL first (URL elicitation), which another server would not change.
PERMANENT_CODES = frozenset({-32700, -32600, -32601, -32602, -32042})
CANCELLED_CODE = -32003


def classify_code(code: int) -> ErrorKind:
    """Classify a JSON-RPC error code for fallbacks (see the module docstring)."""
    if code in PERMANENT_CODES:
        return ErrorKind.PERMANENT
    if code == CANCELLED_CODE:
        return ErrorKind.CANCELLED
    if code == -32603 or -32099 <= code <= -32000:
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


class ServerRequestError(ServerError):
    """The server answered with a JSON-RPC error (``data``: the error's data, as sent)."""

    def __init__(self, server: str, message: str, *, code: int, data: object = None) -> None:
        self.code = code
        self.data = data
        self.kind = classify_code(code)
        super().__init__(server, f"{message} (code {code})")


class AppResourceError(ServerError):
    """The ``ui://`` resource (an MCP App's page) ``uri`` of server ``server`` cannot be shown: it is
    missing, of the wrong type, too big, or declares unusable security metadata. The same resource
    would fail again, so it is permanent."""

    kind = ErrorKind.PERMANENT

    def __init__(self, server: str, uri: str, message: str) -> None:
        self.uri = uri
        super().__init__(server, f"app resource {uri!r}: {message}")


class ToolError(RunnerError):
    """A tool call failed; the text is meant for the model."""


class PromptError(RunnerError):
    """A prompt command cannot be run: malformed line, unknown command, wrong arguments."""


class BuildError(RunnerError):
    """Tools or prompts cannot be assembled from what the servers offer."""


class NameCollisionError(BuildError):
    """Two or more origins map to the same generated name.

    ``collisions`` maps each contested generated name to every origin (a tool or prompt and its
    server, ``runner.tools.naming.Origin``) that wanted it.
    """

    def __init__(self, kind: str, collisions: Mapping[str, Sequence[object]]) -> None:
        self.collisions = dict(collisions)
        lines = [
            f"{kind} names collide: {' and '.join(map(str, origins))} all become '{name}'"
            for name, origins in sorted(collisions.items())
        ]
        hint = "give one of them another name with 'rename'"
        super().__init__("; ".join(lines) + f" ({hint})")


class ImportPathError(BuildError):
    """A ``module:function`` path cannot be imported or does not name a function.

    ``import_path`` is the path as written, so the loader can locate it in the manifest.
    """

    def __init__(self, import_path: str, reason: str) -> None:
        self.import_path = import_path
        self.reason = reason
        super().__init__(f"cannot use '{import_path}': {reason}")


class UnusableSchemaError(BuildError):
    """A tool's input schema cannot be offered to the model; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"unusable input schema: {reason}")


class StrictSchemaError(UnusableSchemaError):
    """The schema cannot be expressed in OpenAI strict mode (it may still work without it)."""


class ModelError(RunnerError):
    """The chat model cannot be created, or failed in a way no fallback could absorb."""


class OutputError(ModelError):
    """The model's final answer did not validate against ``output.schema``, after its retries;
    ``problems`` are the last answer's validation errors, each located."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class CheckpointerError(RunnerError):
    """The checkpointer (conversation store) cannot be opened or is misconfigured."""


class StateError(RunnerError):
    """The state folder (server logs, the conversation store) cannot be created or written."""


class CassetteDrift(RunnerError):
    """The agent no longer matches its recording: a tool is gone, a schema or the prompt changed."""


class CassetteMissing(RunnerError):
    """A case has no cassette to replay: it was never recorded."""


class CaseSaveError(RunnerError):
    """A case could not be written (a bad name, a file already there, nothing to save)."""


class ServeError(RunnerError):
    """A request to the served agent cannot be taken; the caller gets it as a tool error."""


class BusyError(ServeError):
    """Every turn slot is taken and the queue is full."""


class AskError(ServeError):
    """The request itself is wrong: an empty message, a malformed thread id, a stale answer."""


class ApiRequestError(ServeError):
    """A request to the OpenAI-compatible API refused: ``status`` (HTTP), OpenAI's error ``type``
    and ``code``, and the ``param`` at fault (``messages[2].role``), all in the error body its
    clients read."""

    def __init__(self, message: str, *, status: int = 400, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.code = code
        self.param = param
