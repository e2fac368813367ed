"""The websocket transport: JSON-RPC messages as text frames on one ``ws://`` / ``wss://`` connection.

The MCP SDK 2.x dropped its websocket client; this one uses the ``websockets`` library (the
``websocket`` extra) and, like the stdio transport, only moves ``SessionMessage`` objects between
the socket and the anyio memory streams the SDK session reads and writes. The end of the socket
ends the read stream, so the supervisor sees a dropped connection at once and restarts it. A frame
larger than one message may be (``message_limits``) is refused while it arrives: the library closes
the connection (code 1009), and a warning names the server and the limit.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from runner.errors import ServerStartError
from runner.servers.transports import message_limits

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from runner.sdk import TransportStreams

SUBPROTOCOL = "mcp"
MESSAGE_TOO_BIG = 1009  # the close code the library sends for a frame past max_size
MISSING_LIBRARY = (
    "the websocket transport needs the 'websockets' package: pip install 'mcp-run[websocket]'"
)


@asynccontextmanager
async def websocket_transport(
    key: str,
    url: str,
    *,
    headers: Mapping[str, str],
    open_timeout: float,
    on_http_failure: Callable[[int, str], None],
) -> AsyncIterator[TransportStreams]:
    """Streams of one websocket connection; an HTTP refusal of the upgrade is reported first."""
    try:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus
    except ImportError as exc:
        raise ServerStartError(key, MISSING_LIBRARY, permanent=True) from exc

    limit = message_limits.MAX_MESSAGE_BYTES
    try:
        socket = await connect(
            url,
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            additional_headers=dict(headers),
            open_timeout=open_timeout,
            max_size=limit,
        )
    except InvalidStatus as exc:
        on_http_failure(exc.response.status_code, exc.response.reason_phrase)
        raise
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    # Unbounded, as for stdio: a slow socket must not block the SDK's writes of cancellations.
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](math.inf)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read, socket, read_send, ConnectionClosed, lambda: _refused_too_big(key, limit))
            tg.start_soon(_write, socket, write_receive, read_send, ConnectionClosed)
            try:
                yield read_receive, write_send
            finally:
                write_send.close()
                read_receive.close()
                tg.cancel_scope.cancel()
    finally:
        read_send.close()
        write_receive.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(open_timeout):
            await socket.close()


def _refused_too_big(key: str, limit: int) -> None:
    logger.warning("%s", message_limits.MessageTooLarge(key, limit, "a message"))


async def _read(
    socket: Any,
    read_send: MemoryObjectSendStream[SessionMessage | Exception],
    closed: type[Exception],
    on_too_big: Callable[[], None],
) -> None:
    try:
        async for frame in socket:
            try:
                message = jsonrpc_message_adapter.validate_json(frame, by_name=False)
            except ValidationError as exc:
                await read_send.send(exc)  # the session reports it, as the SDK's own transports do
                continue
            await read_send.send(SessionMessage(message))
    except closed as exc:  # the socket dropped; we closed it ourselves if a frame was too big
        sent = getattr(exc, "sent", None)
        if sent is not None and sent.code == MESSAGE_TOO_BIG:
            on_too_big()
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the session went away: the stream ends here
    finally:
        read_send.close()


async def _write(
    socket: Any,
    write_receive: MemoryObjectReceiveStream[SessionMessage],
    read_send: MemoryObjectSendStream[SessionMessage | Exception],
    closed: type[Exception],
) -> None:
    try:
        async for message in write_receive:
            await socket.send(message.message.model_dump_json(by_alias=True, exclude_unset=True))
    except closed:
        read_send.close()  # requests fail at once instead of waiting for their timeouts
    finally:
        with contextlib.suppress(anyio.ClosedResourceError):
            write_receive.close()
