"""The lifetime task of one server: start, watch, restart, give up, stop.

``supervise`` owns every session of its connection, and its lifecycle (``ServerLifecycle``, which
the connection only reads): it enters the transport and the SDK client,
publishes the session once the handshake and the first listing succeed, and then watches it:

- the connection closing (a stdio process exiting is seen at once, not at the next call);
- a heartbeat: after ``heartbeat.interval`` without inbound traffic it probes the server (``ping``
  on 2025-11-25 connections, ``server/discover`` on 2026-07-28 ones, where ping does not exist);
  no answer by ``stale_after`` seconds after the last traffic means the server is stale and is
  killed and restarted;
- list_changed: notifications (2025) or a ``subscriptions/listen`` stream (2026), debounced, then
  re-listed; subscribers hear what changed.

A session that ends is restarted with exponential backoff, at most ``restart.max_attempts`` times
in a row; a session that stayed up ``STABLE_AFTER`` seconds resets the count. A failed first start,
or a permanent failure (command not found, HTTP 401), is not retried here (a reload starts a failed
server again). Stopping cancels the task;
every shutdown step below it is shielded and bounded.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runner import telemetry
from runner.errors import (
    ServerClosedError,
    ServerError,
    ServerRequestError,
    ServerStartError,
    ServerTimeoutError,
)
from runner.manifest import HttpServerSpec
from runner.redaction import redact_url
from runner.servers.connection import ServerConnection
from runner.servers.lifecycle import ServerLifecycle
from runner.servers.offerings import KINDS, fetch_catalogue
from runner.servers.translation import Boundary, describe, leaves, root_cause, translate, translated
from runner.servers.transports.links import Link

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="mcp-run", version="0.1.0")
STABLE_AFTER = 60.0  # a session up this long resets the restart count
RELISTEN_DELAY = 1.0  # before re-opening a listen stream the server closed

Ending = Literal["lost", "stale"]


async def supervise(connection: ServerConnection, lifecycle: ServerLifecycle) -> None:
    """Run ``connection`` until ``stop_requested`` is set or it fails for good; ``lifecycle`` is
    the connection's, written here only."""
    try:
        async with anyio.create_task_group() as tg:
            # The session is ended by _end_on_stop only, so that the requests in flight are
            # cancelled at the server first, also when the fleet's own scope is cancelled (a
            # signal): the SDK's notifications/cancelled still has a session to go through.
            lifetime = anyio.CancelScope(shield=True)
            tg.start_soon(_end_on_stop, connection, lifetime)
            with lifetime:
                await _lifetime(connection, lifecycle)
            tg.cancel_scope.cancel()
    finally:
        stopping = lifecycle.now.status != "failed"
        lifecycle.ended()
        if stopping:
            telemetry.server_status(connection, "stopped")


def _fail(connection: ServerConnection, lifecycle: ServerLifecycle, error: ServerError) -> None:
    """The server is given up on: whatever it offered is gone, then it is failed."""
    connection.forget_offerings()
    lifecycle.failed(error)
    telemetry.server_status(connection, "failed")


async def _end_on_stop(connection: ServerConnection, lifetime: anyio.CancelScope) -> None:
    """End ``lifetime`` once a stop is asked for or this task is cancelled, the requests in
    flight cancelled first (bounded)."""
    try:
        await connection.stop_requested.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await connection.cancel_requests()
        lifetime.cancel()


async def _lifetime(connection: ServerConnection, lifecycle: ServerLifecycle) -> None:
    restart = connection.spec.restart
    assert restart is not None, "specs are resolved against defaults"
    attempts = 0
    why = ""  # why the server is being restarted, for the one line each restart gets
    while True:
        if attempts:
            delay = min(restart.backoff * 2 ** (attempts - 1), restart.max_backoff)
            logger.warning(
                "server %s: %s; restarting in %.2gs (attempt %d of %d)",
                connection.key, why, delay, attempts, restart.max_attempts,
            )
            await anyio.sleep(delay)
            lifecycle.restart_attempted()
        started_at = anyio.current_time()
        try:
            error = await _session_in_its_era(connection, lifecycle)
        except ServerStartError as exc:
            lifecycle.start_failed(exc)
            first_start = not lifecycle.settled.is_set()
            if first_start or exc.permanent or attempts >= restart.max_attempts:
                # A first start is reported by the fleet (a warning, or the error it raises).
                logger.log(logging.DEBUG if first_start else logging.ERROR, "server failed for good: %s", exc)
                _fail(connection, lifecycle, exc)
                return
            why = f"restart failed: {_reason(connection, exc)}"
        else:
            lifecycle.session_ended(error)
            if anyio.current_time() - started_at >= STABLE_AFTER:
                attempts = 0
            if attempts >= restart.max_attempts:
                logger.error("server failed for good: %s", error)
                _fail(connection, lifecycle, error)
                return
            why = f"session ended: {_reason(connection, error)}"
        attempts += 1


def _reason(connection: ServerConnection, error: ServerError) -> str:
    return str(error).removeprefix(f"{connection.key}: ")


async def _session_in_its_era(connection: ServerConnection, lifecycle: ServerLifecycle) -> ServerError:
    """One session in the era the server is pinned to, remembered in, or probed for; a start
    that fails in a remembered era probes again, and a server that breaks the probe off (old SDKs
    exit on ``server/discover``) is started again at once with ``initialize``, unless an earlier
    session of it answered the probe. Neither retry counts as a restart."""
    spec, eras = connection.spec, connection.eras
    mode = await anyio.to_thread.run_sync(eras.connect_mode, spec)
    try:
        return await _run_session(connection, lifecycle, mode)
    except ServerStartError as exc:
        if spec.protocol != "auto" or exc.permanent:
            raise
        if mode == "legacy":
            if not await anyio.to_thread.run_sync(eras.forget, spec):
                raise
            logger.info(
                "server %s: start in the remembered era failed (%s); probing again", connection.key, exc
            )
            return await _run_session(connection, lifecycle, "auto")
        if not exc.broke_handshake or lifecycle.now.era in MODERN_PROTOCOL_VERSIONS:
            raise  # a timeout, an unreachable server, or one that answered the probe before
        logger.info(
            "server %s broke off the 2026-07-28 probe (%s); starting it with the initialize handshake",
            connection.key, exc,
        )
        return await _run_session(connection, lifecycle, "legacy", fell_back=True)


async def _run_session(
    connection: ServerConnection, lifecycle: ServerLifecycle, mode: str, *, fell_back: bool = False
) -> ServerError:
    """One session from spawn to end; the error describing why it ended (or ServerStartError).

    ``mode`` is the SDK client's: ``"auto"`` probes the era, ``"legacy"`` starts with
    ``initialize`` at once, a modern version is adopted without a probe. ``fell_back``: this
    ``legacy`` start follows a probe that killed the server, so its era is worth remembering.
    """
    spec = connection.spec
    assert spec.startup_timeout is not None and spec.timeout is not None
    link = Link(connection.key, spec, base_dir=connection.base_dir, stderr_log=connection.stderr_log)
    if connection.stderr_log is not None:
        try:
            await anyio.to_thread.run_sync(connection.stderr_log.open)  # file system: off the event loop
        except OSError as exc:  # the state folder is not writable: no restart would help
            raise ServerStartError(
                connection.key, f"cannot write its log {connection.stderr_log.path}: {describe(exc)}",
                permanent=True,
            ) from exc
    client = Client(
        link.transport(),
        mode=mode,
        cache=None,  # the catalogue is the cache; lists must reach the server
        read_timeout_seconds=spec.timeout,
        message_handler=connection.on_message,
        client_info=CLIENT_INFO,
        **connection.requests.client_options(),  # callbacks (and so capabilities) the spec enables
    )
    attached = False
    ending: Ending | None = None
    began = anyio.current_time()
    startup = anyio.CancelScope(deadline=began + spec.startup_timeout)
    try:
        with startup:
            async with client:
                # A probe unanswered until its timeout falls back too, but that is no answer
                # (a slow start under load): only an era settled sooner is learned.
                learned = fell_back or (mode == "auto" and anyio.current_time() - began < spec.timeout)
                listing = await fetch_catalogue(connection.key, client)
                startup.deadline = math.inf  # started: the scope stays, the deadline goes
                await _set_log_level(connection, client)
                if link.process is not None:
                    link.process.finished_handshake()
                # Remembered before attaching: between attach and _watch nothing may await, or a
                # change announced right after start-up can precede the subscription and be lost.
                era = client.protocol_version
                if connection.eras.worth_remembering(era, learned=learned):
                    await anyio.to_thread.run_sync(connection.eras.remember, connection.spec, era)
                connection.attach(client, link, listing)  # before ready: waiters find the client
                lifecycle.ready(era=era, instructions=client.instructions, pid=link.pid)
                telemetry.server_status(connection, "ready")
                if lifecycle.now.sessions > 1:  # the restarts said it was down: say it is back
                    logger.warning("server %s is back (session %d)", connection.key, lifecycle.now.sessions)
                attached = True
                try:
                    ending = await _watch(connection, client, link)
                finally:
                    connection.detach()
                    lifecycle.detached()
                    if lifecycle.now.status == "restarting":
                        telemetry.server_status(connection, "restarting")
                    if ending == "stale" and link.process is not None:
                        link.process.kill_at_close()
    except Exception as exc:  # foreign errors of a session, translated here and only here
        if not attached:
            error = _start_error(connection, link, exc)
            raise error from (error.__cause__ if error in leaves(exc) else exc)
        return ServerClosedError(connection.key, f"the connection failed: {describe(root_cause(exc))}")
    finally:
        connection.requests.close()
        if connection.stderr_log is not None:
            connection.stderr_log.close()
    if not attached:
        assert startup.cancelled_caught
        detail = _stderr_tail(link)
        raise ServerStartError(
            connection.key, f"did not finish starting within {spec.startup_timeout:g}s{detail}"
        )
    if ending == "stale":
        assert spec.heartbeat is not None
        return ServerTimeoutError(
            connection.key,
            f"no answer for {spec.heartbeat.stale_after:g}s: stale, killed",
            timeout=spec.heartbeat.stale_after,
        )
    if link.process is not None:
        return ServerClosedError(connection.key, f"the server {link.process.describe_exit()}")
    return ServerClosedError(connection.key, "the connection closed")


async def _set_log_level(connection: ServerConnection, client: Client) -> None:
    """2025-11-25 servers get ``logging/setLevel`` (2026 ones read the level from each request)."""
    capabilities = client.server_capabilities
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS or capabilities.logging is None:
        return
    try:
        with translated(Boundary(connection.key, "logging/setLevel")):
            with warnings.catch_warnings():  # deprecated in 2026-07-28, current in 2025-11-25
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.session.set_logging_level(connection.spec.logging.level)
    except ServerRequestError as exc:  # the server's own default level stays: worth a warning only
        logger.warning("server %s", exc)


async def _watch(connection: ServerConnection, client: Client, link: Link) -> Ending:
    """Wait until the session is lost or stale; meanwhile keep the catalogue current."""
    ending: Ending = "lost"
    async with anyio.create_task_group() as tg:

        async def until_closed() -> None:
            await link.closed.wait()
            tg.cancel_scope.cancel()

        async def heartbeat() -> None:
            nonlocal ending
            ending = await _heartbeat(connection, client, link)
            telemetry.heartbeat_failed(connection, ending)
            tg.cancel_scope.cancel()

        tg.start_soon(until_closed)
        tg.start_soon(heartbeat)
        tg.start_soon(_relist_on_change, connection, client)
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            tg.start_soon(_listen, connection, client)
    return ending


async def _heartbeat(connection: ServerConnection, client: Client, link: Link) -> Ending:
    settings = connection.spec.heartbeat
    assert settings is not None
    modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
    while True:
        await anyio.sleep(settings.interval)
        if link.idle_for() < settings.interval:
            continue  # traffic proves liveness
        answer_by = max(link.last_inbound + settings.stale_after, anyio.current_time() + settings.interval)
        with anyio.move_on_after(answer_by - anyio.current_time()) as probe:
            try:
                if modern:
                    await client.session.send_discover(client.protocol_version)
                else:
                    await client.session.send_ping()
            except MCPError as exc:
                error = translate(Boundary(connection.key, "heartbeat"), exc)
                if isinstance(error, ServerClosedError):
                    return "lost"
                if isinstance(error, ServerTimeoutError):
                    return "stale"
                # any other error is still an answer: the server is alive
        if probe.cancelled_caught:
            return "stale"


async def _relist_on_change(connection: ServerConnection, client: Client) -> None:
    while True:
        kinds = await connection.changes.next_batch()
        began = time.time_ns()
        try:
            with translated(Boundary(connection.key, f"re-listing {', '.join(sorted(kinds))}")):
                await connection.relist(client, kinds)
        except ServerError as exc:  # the next change or refresh retries; a closed link is seen apart
            logger.warning("server %s", exc)
        finally:
            connection.changes.done()
            telemetry.relisted(connection, kinds, began)


async def _listen(connection: ServerConnection, client: Client) -> None:
    """2026-07-28: list_changed events arrive on a subscriptions/listen stream."""
    while True:
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        connection.changes.mark("tools")
                    elif isinstance(event, PromptsListChanged):
                        connection.changes.mark("prompts")
                    elif isinstance(event, ResourcesListChanged):
                        connection.changes.mark("resources")
        except MCPError as exc:
            error = translate(Boundary(connection.key, "subscriptions/listen"), exc)
            if not isinstance(error, ServerClosedError):  # closed: the supervisor sees it
                logger.info("server %s does not serve subscriptions/listen (%s)", connection.key, exc)
            return
        except (SubscriptionLost, TimeoutError) as exc:
            logger.debug("server %s: listen stream lost (%s)", connection.key, exc)
        # No replay after a stream ends: re-listen, and re-list what may have changed meanwhile.
        await anyio.sleep(RELISTEN_DELAY)
        connection.changes.mark(*KINDS)


def _start_error(connection: ServerConnection, link: Link, exc: Exception) -> ServerStartError:
    cause = root_cause(exc)
    if isinstance(cause, ServerStartError):
        return cause
    if link.http_failure is not None:
        url = redact_url(link.spec.url)  # type: ignore[union-attr]
        return ServerStartError(
            connection.key, f"{url} answered {link.http_failure}", permanent=link.http_failure.permanent
        )
    if link.process is not None and link.process.returncode is not None:
        return ServerStartError(
            connection.key, f"the server {link.process.describe_exit(before='finishing the handshake')}",
            broke_handshake=True,
        )
    if isinstance(cause, httpx2.TransportError) or (
        isinstance(cause, ConnectionError) and isinstance(link.spec, HttpServerSpec)  # websocket
    ):
        url = redact_url(link.spec.url)  # type: ignore[union-attr]
        return ServerStartError(connection.key, f"cannot reach {url}: {describe(cause)}")
    timed_out = isinstance(cause, TimeoutError) or (
        isinstance(cause, MCPError) and cause.code == types.REQUEST_TIMEOUT
    )
    return ServerStartError(
        connection.key, f"the handshake failed: {describe(cause)}", broke_handshake=not timed_out
    )


def _stderr_tail(link: Link) -> str:
    if link.process is None:
        return ""
    tail = link.process.log.last_lines()
    return f"; last stderr lines:\n{tail}" if tail else ""
