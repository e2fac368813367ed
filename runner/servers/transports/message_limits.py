"""The largest message a server may send, on every transport, enforced while the bytes arrive.

A stdio server's line is cut at :data:`MAX_MESSAGE_BYTES` (``stdio``). Over HTTP the SDK reads a
JSON response whole before parsing it (a 1 GB body took 2.4 GB of memory), so the HTTP client's
transport is a :class:`BoundedTransport`: a JSON body, or one server-sent event (the bytes since
the last blank line), that grows past the limit stops being read at that point, and the request
fails with :class:`MessageTooLarge`, naming the server and the limit.

:class:`MessageTooLarge` is a signal to the SDK's HTTP client, not one of the runner's errors: it
is an ``httpx2.StreamError`` (a JSON body; the SDK answers the request with a parse error quoting
it) and an ``httpx2.SSEError`` (an event; the SDK fails the request with "SSE stream failed: ...").
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2

from runner import sdk
from runner.servers.transports.repeated_warnings import RepeatedWarning

logger = logging.getLogger(__name__)

# No single JSON-RPC message is this large; beyond it the bytes are junk and memory is at stake.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Two line ends in a row end a server-sent event (LF, CR or CRLF; CR LF alone is one line end).
_EVENT_END = re.compile(rb"\n\n|\r\r|\n\r")


def describe_size(size: int) -> str:
    """``256 MiB``, ``64 KiB``, ``1,000 bytes``: a limit as people read it."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor:,} {unit}"
    return f"{size:,} bytes"


class MessageTooLarge(httpx2.SSEError, httpx2.StreamError):
    """A response body or server-sent event of server ``key`` grew past ``limit`` bytes."""

    def __init__(self, key: str, limit: int, what: str) -> None:
        self.key = key
        self.limit = limit
        super().__init__(f"server {key} sent {what} larger than the limit of one message "
                         f"({describe_size(limit)}); it was not read further")


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, *, key: str, limit: int, events: bool,
                 warnings: RepeatedWarning) -> None:
        self._inner = inner
        self._key = key
        self._limit = limit
        self._events = events
        self._warnings = warnings

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0  # of the body, or of the event in progress
        last = b""  # the previous chunk's last byte: an event's end may straddle two chunks
        async for chunk in self._inner:
            if self._events:
                scanned, start = last + chunk, len(last)
                for end in _EVENT_END.finditer(scanned):
                    size += end.end() - start  # the event in progress ends here
                    if size > self._limit:
                        break
                    size, start = 0, end.end()
                else:
                    size += len(scanned) - start
                last = chunk[-1:] or last
            else:
                size += len(chunk)
            if size > self._limit:
                error = MessageTooLarge(self._key, self._limit, "an event" if self._events else "a response")
                self._warnings.warn(str(error))
                raise error
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with each response's body (or each event of an event stream) bounded to ``limit``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, *, key: str, limit: int,
                 warnings: RepeatedWarning) -> None:
        self._inner = inner
        self._key = key
        self._limit = limit
        self._warnings = warnings

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        bounded = _BoundedStream(response.stream, key=self._key, limit=self._limit,
                                 events=content_type == "text/event-stream", warnings=self._warnings)
        return httpx2.Response(response.status_code, headers=response.headers, stream=bounded,
                               extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        self._warnings.flush()
        await self._inner.aclose()


@dataclass(frozen=True)
class BoundedTransports:
    """What an ``httpx2.AsyncClient`` for server ``key`` is given: ``transport`` and ``mounts``."""

    transport: BoundedTransport
    mounts: dict[str, httpx2.AsyncBaseTransport | None]


def bounded_transports(key: str, limit: int) -> BoundedTransports:
    """The transports of a client of server ``key``, the environment's proxies included (a client
    given its own transport no longer reads them), each bounded to ``limit``."""
    warnings = RepeatedWarning(logger, key, "warnings about responses over the limit")

    def bounded(inner: httpx2.AsyncBaseTransport) -> BoundedTransport:
        return BoundedTransport(inner, key=key, limit=limit, warnings=warnings)

    # None: no proxy for that pattern (NO_PROXY), which is the client's own transport.
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else bounded(httpx2.AsyncHTTPTransport(proxy=proxy))
        for pattern, proxy in sdk.environment_proxies().items()
    }
    return BoundedTransports(bounded(httpx2.AsyncHTTPTransport()), mounts)
