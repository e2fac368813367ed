"""The one exception tree of mcp-run.

    RunnerError                    anything the runner reports to a person
    ├── ManifestError              the manifest (or a template it names) is wrong; carries Problems
    ├── ServerError                one MCP server misbehaved; carries the server key
    │   ├── ServerStartError       it could not be started or did not finish the handshake
    │   ├── ServerClosedError      its connection is gone (process exited, stream closed)
    │   ├── ServerTimeoutError     a request got no answer in time
    │   └── ServerRequestError     it answered a request with a JSON-RPC error (carries the code)
    ├── ToolError                  a tool call failed in a way the model should hear about
    ├── PromptError                a prompt command cannot be run (bad line, unknown, arguments)
    ├── BuildError                 tools or prompts cannot be assembled (name collisions, ...)
    ├── ModelError                 the chat model cannot be created or answered with an error
    ├── CheckpointerError          the conversation store cannot be opened
    └── AuthError                  a server's OAuth authorization failed (carries the server key)
        └── LoginRequiredError     no usable token and nobody to ask: run ``mcp-run auth login``

``AuthError`` is also a ``ServerStartError`` (permanent): a server whose authorization failed
cannot start, and restarting it would fail the same way.

Foreign exceptions (yaml, pydantic, mcp, httpx, anyio) are translated into this tree at one place
per boundary and chained with ``raise ... from exc``. Nothing here imports from the rest of runner.
"""

from __future__ import annotations

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
    """

    def __init__(self, server: str, message: str, *, permanent: bool = False) -> None:
        self.permanent = permanent
        super().__init__(server, message)


class ServerClosedError(ServerError):
    """The connection to the server is gone (process exited, stream closed, connection reset)."""


class ServerTimeoutError(ServerError):
    """A request to the server got no answer within its timeout."""

    def __init__(self, server: str, message: str, *, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(server, message)


# JSON-RPC codes that mean the request itself is wrong and would fail on any server.
PERMANENT_CODES = frozenset({-32700, -32600, -32601, -32602})
CANCELLED_CODE = -32003


def classify_code(code: int) -> ErrorKind:
    """Classify a JSON-RPC error code for fallbacks (see DESIGN.md §6)."""
    if code in PERMANENT_CODES:
        return ErrorKind.PERMANENT
    if code == CANCELLED_CODE:
        return ErrorKind.CANCELLED
    if code == -32603 or -32099 <= code <= -32000:
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


class ServerRequestError(ServerError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, server: str, message: str, *, code: int) -> None:
        self.code = code
        self.kind = classify_code(code)
        super().__init__(server, f"{message} (code {code})")


class ToolError(RunnerError):
    """A tool call failed; the text is meant for the model."""


class PromptError(RunnerError):
    """A prompt command cannot be run: malformed line, unknown command, wrong arguments."""


class BuildError(RunnerError):
    """Tools or prompts cannot be assembled from what the servers offer."""


class ModelError(RunnerError):
    """The chat model cannot be created, or failed in a way no fallback could absorb."""


class CheckpointerError(RunnerError):
    """The checkpointer (conversation store) cannot be opened or is misconfigured."""


class AuthError(ServerStartError):
    """Authorizing with server ``server`` failed (metadata, registration, token, state, issuer)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(server, message, permanent=True)


class LoginRequiredError(AuthError):
    """Server ``server`` needs a login and this run cannot ask for one; ``command`` is what to run."""

    def __init__(self, server: str, command: str) -> None:
        self.command = command
        super().__init__(server, f"needs a login: run `{command}`")
