"""The server fleet: persistent, supervised MCP connections over stdio, HTTP, SSE and websocket.

    async with open_fleet(manifest.servers, base_dir=manifest_dir, state_dir=state_dir) as fleet:
        demo = fleet.connections["demo"]
        result = await demo.call_tool("echo", {"text": "hi"})
        async with fleet.subscribe() as changes:
            async for change in changes:  # CatalogueChange(server, kind, added, removed, changed)
                ...

Modules: ``translation`` (the one table from SDK, anyio, httpx and pydantic errors to runner
errors), ``transports/`` (how a connection reaches its server: stdio, HTTP, SSE, websocket,
isolation, environment, child reaping), ``protocol_eras`` (the protocol era each server spoke
last, kept in the state folder), ``offerings`` (what a server offers: listing, diffing,
debouncing), ``inbound_requests`` (what servers ask of the client), ``lean_calls`` (``tools/call``
without the SDK's redundant work), ``tasks`` (tool calls run as tasks), ``connection`` (catalogue and
requests), ``lifecycle`` (status, restarts, errors: written by the lifetime task only),
``supervision`` (the lifetime task), ``fleet`` (start, stop, and
:meth:`ServerFleet.update`: restart or live update, as the manifest's ``RESTARTS`` fields say).
"""

from runner.servers.connection import ServerConnection, ServerSpecType
from runner.servers.fleet import ServerFleet, SignalStop, open_fleet, stop_on_signals
from runner.servers.lifecycle import Status
from runner.servers.offerings import Catalogue, CatalogueChange, CatalogueKind
from runner.servers.transports.environment import HOST_ENV_ALLOWLIST, server_environment

__all__ = [
    "HOST_ENV_ALLOWLIST",
    "Catalogue",
    "CatalogueChange",
    "CatalogueKind",
    "ServerConnection",
    "ServerFleet",
    "ServerSpecType",
    "SignalStop",
    "Status",
    "open_fleet",
    "server_environment",
    "stop_on_signals",
]
