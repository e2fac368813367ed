"""Fixtures of the hosting tests: the gates server the served agents call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from mcp_servers import gates as gates_server
from serving import close_openai_clients


@pytest.fixture
def gates(serve_http: Callable[..., str]) -> tuple[gates_server.Gates, str]:
    """The gates server over HTTP, with its shared state: ``(gates, url)``."""
    shared = gates_server.Gates()
    return shared, serve_http(gates_server.build(shared))


@pytest.fixture
async def closed_openai_clients() -> AsyncIterator[None]:
    """The ``openai`` clients the test made (:func:`serving.openai_api`) are closed when it ends."""
    yield
    await close_openai_clients()
