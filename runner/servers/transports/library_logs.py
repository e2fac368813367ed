"""What the MCP SDK logs about a server's bad output: one warning line naming the server.

The SDK's transports log a server's malformed message with a traceback (``Error parsing SSE
message`` and pydantic's whole error, four times over for one nested answer) and carry on. Without
``--debug`` (the root logger above DEBUG) such a record becomes a single warning that names the
server and the error's first line, counted per server like the transport's own warnings
(:class:`RepeatedWarning`); with ``--debug`` the record stays as it was, traceback included.

Which server a record is about comes from a context variable: a :class:`Link` sets it for the
tasks that run its transport and session (:func:`speaking_for`), and around each message it sends,
whose context the SDK's HTTP transport runs that message's request in.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from runner.servers.transports.message_limits import MessageTooLarge
from runner.servers.transports.repeated_warnings import RepeatedWarning

logger = logging.getLogger(__name__)

# The SDK modules that log a server's bad output with a traceback.
SDK_LOGGERS = ("mcp.client.streamable_http", "mcp.client.sse", "mcp.client.session",
               "mcp.shared.jsonrpc_dispatcher")
FIRST_LINE_CHARS = 200

_speaking: contextvars.ContextVar[RepeatedWarning | None] = contextvars.ContextVar(
    "mcp_run_server_warnings", default=None
)


@contextmanager
def speaking_for(warnings: RepeatedWarning) -> Iterator[None]:
    """Records the SDK logs within the block are about the server of ``warnings``."""
    token = _speaking.set(warnings)
    try:
        yield
    finally:
        _speaking.reset(token)


def summary(record: logging.LogRecord) -> str:
    """``message (ErrorType: first line of the error)``."""
    message = record.getMessage()
    if not record.exc_info or record.exc_info[1] is None:
        return message
    error = record.exc_info[1]
    first = (str(error).strip().splitlines() or [""])[0][:FIRST_LINE_CHARS]
    return f"{message} ({type(error).__name__}: {first})" if first else f"{message} ({type(error).__name__})"


class _OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or logging.getLogger().isEnabledFor(logging.DEBUG):
            return True
        if isinstance(record.exc_info[1], MessageTooLarge):
            return False  # the transport has said it, naming the server and the limit
        warnings = _speaking.get()
        if warnings is None:  # not about one server (or outside any link): one line all the same
            logger.warning("%s", summary(record))
        else:
            warnings.warn(f"server {warnings.key}: {summary(record)}")
        return False  # the line above replaces the record


_FILTER = _OneLine()


def install() -> None:
    """Put the filter on the SDK's loggers (once; later calls do nothing)."""
    for name in SDK_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if _FILTER not in sdk_logger.filters:
            sdk_logger.addFilter(_FILTER)
