"""A turn's stream (:class:`runner.web.app.TurnResponse`) when the page's Stop closes its request:
whatever the stream was doing, its generator is closed, so the turn it reads stops at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from runner.web.app import TurnResponse

pytestmark = pytest.mark.anyio


async def test_a_turn_stream_closed_by_the_page_while_an_event_is_being_sent_closes_its_turn() -> None:
    closed = anyio.Event()
    disconnected = anyio.Event()

    async def turn() -> AsyncIterator[bytes]:
        try:
            yield b"event: event\ndata: {}\n\n"
            await anyio.sleep_forever()
        finally:  # where the turn's stream stops the turn (runner.web.app.WebApi._turn_events)
            closed.set()

    async def receive() -> dict[str, Any]:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":  # the page is gone while this event is sent
            disconnected.set()
            await anyio.sleep_forever()

    response = TurnResponse(turn(), media_type="text/event-stream")
    with anyio.fail_after(30):
        await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
    assert closed.is_set()
