"""The servers of a replay: stand-ins that offer what the cassettes recorded and start nothing.

They have the shape the runtime and the catalog read (``status``, the listings, ``instructions``,
``changes``); calls never reach them, since the evals' call hook answers from the cassettes.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types

from runner.errors import CassetteDrift
from runner.evals.cassettes import Cassette, ServerListing
from runner.servers import CatalogueChange


class _NoChanges:
    """A replayed server's lists never change."""

    is_settled = True

    async def settled(self) -> None:
        return None


class ReplayConnection:
    """A server as a cassette recorded it."""

    def __init__(self, key: str, spec: Any, listing: ServerListing | None) -> None:
        self.key = key
        self.spec = spec
        self.status = "ready" if listing is not None else "failed"
        self.error = None if listing is not None else "not in the recordings"
        listing = listing or ServerListing()
        self.instructions = listing.instructions
        self.tools = [types.Tool.model_validate(tool) for tool in listing.tools]
        self.prompts = [types.Prompt.model_validate(prompt) for prompt in listing.prompts]
        self.resources = [types.Resource.model_validate(r) for r in listing.resources]
        self.resource_templates = [types.ResourceTemplate.model_validate(t)
                                   for t in listing.resource_templates]
        self.changes = _NoChanges()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        raise CassetteDrift(f"{self.key}: the call to {name} is not in the recording")

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        raise CassetteDrift(f"{self.key}: reading {uri} is not in the recording")


class ReplayFleet:
    """What ``Runtime`` uses of a fleet at start-up: ``start_all``, its connections and a stream
    of (no) changes. A replay never reloads, so servers are never added, updated or removed."""

    def __init__(self, listings: Mapping[str, ServerListing]) -> None:
        self.listings = listings
        self.connections: dict[str, ReplayConnection] = {}
        self._streams: list[MemoryObjectSendStream[CatalogueChange]] = []

    async def start_all(self, specs: Mapping[str, Any]) -> None:
        self.connections.update({key: ReplayConnection(key, spec, self.listings.get(key))
                                 for key, spec in specs.items()})

    def subscribe(self) -> MemoryObjectReceiveStream[CatalogueChange]:
        send, receive = anyio.create_memory_object_stream[CatalogueChange](math.inf)
        self._streams.append(send)
        return receive

    async def aclose(self) -> None:
        for stream in self._streams:
            await stream.aclose()


def listings_of(cassettes: list[Cassette]) -> dict[str, ServerListing]:
    """Each server's listing from the most recent cassette that has it."""
    listings: dict[str, ServerListing] = {}
    for cassette in sorted(cassettes, key=lambda c: c.now):
        listings.update(cassette.servers)
    return listings


def replay_servers(listings: Mapping[str, ServerListing]) -> Any:
    """An ``open_servers`` for ``load_agent`` that serves ``listings`` and starts nothing."""

    @asynccontextmanager
    async def open_replay_fleet(
        specs: Mapping[str, Any], *, base_dir: Path, state_dir: Path, sampling: Any = None,
        extensions: Any = (),
    ) -> AsyncIterator[ReplayFleet]:  # ``sampling``, ``extensions``: no server runs to get them
        fleet = ReplayFleet(listings)
        await fleet.start_all(specs)
        try:
            yield fleet
        finally:
            await fleet.aclose()

    return open_replay_fleet


def listing_of(connection: Any) -> ServerListing:
    """What a live server offers, to record."""

    def dump(items: list[Any]) -> list[dict[str, Any]]:
        return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]

    return ServerListing(instructions=connection.instructions, tools=dump(connection.tools),
                         prompts=dump(connection.prompts), resources=dump(connection.resources),
                         resource_templates=dump(connection.resource_templates))
