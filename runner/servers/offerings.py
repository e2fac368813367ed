"""What a server offers (tools, prompts, resources), listed page by page, cached and compared.

A :class:`Catalogue` holds the last complete listing of one server. Replacing a kind's items yields
a :class:`CatalogueChange` naming what was added, removed and changed (by tool/prompt name, by
resource URI and template URI). :class:`ChangeSignal` collects list_changed notifications and
hands them out: the first of a burst at once, the rest coalesced (servers send bursts).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from runner.errors import ServerRequestError
from runner.servers.listings import ToolPages
from runner.servers.translation import Boundary, translate

logger = logging.getLogger(__name__)

CatalogueKind = Literal["tools", "prompts", "resources"]
KINDS: tuple[CatalogueKind, ...] = ("tools", "prompts", "resources")
MAX_PAGES = 1000  # a paginator that never ends must not hang start-up
DEBOUNCE_QUIET = 0.1  # a burst's tail is over after this much silence ...
DEBOUNCE_MAX_DELAY = 1.0  # ... or this long after its first notification, whichever comes first

_Item = TypeVar("_Item", bound=BaseModel)


@dataclass(frozen=True)
class CatalogueChange:
    """One server's tools, prompts or resources changed; names are sorted."""

    server: str
    kind: CatalogueKind
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]


@dataclass
class Catalogue:
    """The cached listing of one server."""

    tools: list[types.Tool] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    resource_templates: list[types.ResourceTemplate] = field(default_factory=list)

    def keyed(self, kind: CatalogueKind) -> dict[str, BaseModel]:
        """The items of ``kind`` by name (templates by their URI template)."""
        if kind == "tools":
            return {tool.name: tool for tool in self.tools}
        if kind == "prompts":
            return {prompt.name: prompt for prompt in self.prompts}
        keyed: dict[str, BaseModel] = {str(resource.uri): resource for resource in self.resources}
        keyed.update({template.uri_template: template for template in self.resource_templates})
        return keyed

    def update(
        self, server: str, listing: Catalogue, kinds: Iterable[CatalogueKind]
    ) -> list[CatalogueChange]:
        """Take ``kinds`` from ``listing``; the changes, for kinds that differ."""
        changes = []
        for kind in kinds:
            before = self.keyed(kind)
            change = compare(server, kind, before, listing.keyed(kind))
            if kind == "resources":
                self.resources, self.resource_templates = listing.resources, listing.resource_templates
            elif kind == "tools" and change is not None:
                # Unchanged tools keep their objects, so what was built from them can be reused.
                renewed = set(change.added) | set(change.changed)
                kept = {tool.name: tool for tool in self.tools}
                self.tools = [tool if tool.name in renewed else kept[tool.name] for tool in listing.tools]
            elif change is not None:
                setattr(self, kind, getattr(listing, kind))
            if change is not None:
                changes.append(change)
        return changes


def compare(
    server: str, kind: CatalogueKind, before: dict[str, BaseModel], after: dict[str, BaseModel]
) -> CatalogueChange | None:
    """What changed between two keyed listings, or None when they are the same."""
    added = tuple(sorted(after.keys() - before.keys()))
    removed = tuple(sorted(before.keys() - after.keys()))
    changed = tuple(
        sorted(name for name in before.keys() & after.keys() if not _same(before[name], after[name]))
    )
    if not (added or removed or changed):
        return None
    return CatalogueChange(server, kind, added, removed, changed)


def _same(one: BaseModel, other: BaseModel) -> bool:
    """Model equality (field values, nested models included, nothing serialised); equal field
    dicts first, which settles a re-listed item at a third of ``==``'s cost."""
    return one is other or (
        type(one) is type(other) and one.__dict__ == other.__dict__
        and one.__pydantic_extra__ == other.__pydantic_extra__
        and getattr(one, "__pydantic_private__", None) == getattr(other, "__pydantic_private__", None)
    ) or one == other


async def _all_pages(
    server: str,
    fetch: Callable[[str | None], Awaitable[Any]],
    items: Callable[[Any], list[_Item]],
) -> list[_Item]:
    collected: list[_Item] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        collected.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            return collected
        if cursor in seen:
            logger.warning("server %s repeated pagination cursor %r; listing cut short", server, cursor)
            return collected
        seen.add(cursor)
    logger.warning("server %s listed more than %d pages; listing cut short", server, MAX_PAGES)
    return collected


async def _tolerant(
    server: str, what: str, listing: Awaitable[list[_Item]], *, essential: bool = False
) -> list[_Item]:
    """A listing the server may not support: 'method not found' and invalid answers (servers that
    answer unknown methods with an empty result) are empty. Other error answers are empty too,
    except for an ``essential`` listing (tools), where an error such as an authorization failure
    must not pass for a server without tools."""
    try:
        return await listing
    except (MCPError, ValidationError) as exc:
        error = translate(Boundary(server, what), exc)
        if isinstance(error, ServerRequestError) and error.code == types.METHOD_NOT_FOUND:
            return []
        if essential and isinstance(exc, MCPError):
            raise  # the session's boundary (start-up or request) translates it
        logger.warning("server %s", error)
        return []


async def fetch_catalogue(server: str, client: Client, kinds: Iterable[CatalogueKind] = KINDS) -> Catalogue:
    """List ``kinds`` completely (all pages, concurrently); the other kinds stay empty.

    Connection failures and timeouts propagate; a server answering a list with an error
    (typically 'method not found') contributes nothing of that kind.
    """
    kinds = set(kinds)
    listed: dict[str, Any] = {}  # Catalogue field -> its items, filled by the concurrent listings

    async def tools() -> None:
        listed["tools"] = await _tolerant(server, "tools/list", _all_pages(
            server, ToolPages.of(client.session).fetch, lambda page: page.tools),
            essential=True)

    async def prompts() -> None:
        listed["prompts"] = await _tolerant(server, "prompts/list", _all_pages(
            server, lambda cursor: client.list_prompts(cursor=cursor), lambda page: page.prompts))

    async def resources() -> None:
        listed["resources"] = await _tolerant(server, "resources/list", _all_pages(
            server, lambda cursor: client.list_resources(cursor=cursor), lambda page: page.resources))

    async def templates() -> None:
        listed["resource_templates"] = await _tolerant(server, "resources/templates/list", _all_pages(
            server,
            lambda cursor: client.list_resource_templates(cursor=cursor),
            lambda page: page.resource_templates,
        ))

    async with anyio.create_task_group() as tg:
        if "tools" in kinds:
            tg.start_soon(tools)
        if "prompts" in kinds:
            tg.start_soon(prompts)
        if "resources" in kinds:
            tg.start_soon(resources)
            tg.start_soon(templates)
    return Catalogue(**listed)


class ChangeSignal:
    """list_changed notifications in, batches of kinds out: the first at once, a burst coalesced.

    ``mark`` never blocks (it is called from notification callbacks). ``next_batch`` hands out the
    first notification after a calm spell at once, so a single change is re-listed without delay;
    notifications that arrive while that re-list runs, or within ``quiet`` seconds of its end, are
    a burst: they are handed out together once the burst has been quiet for ``quiet`` seconds, or
    ``max_delay`` after it started, whichever comes first (one re-list for the rest of the burst).
    """

    def __init__(self, quiet: float = DEBOUNCE_QUIET, max_delay: float = DEBOUNCE_MAX_DELAY) -> None:
        self.quiet = quiet
        self.max_delay = max_delay
        self._pending: set[CatalogueKind] = set()
        self._marked = anyio.Event()
        self._idle = anyio.Event()  # set while no change waits to be re-listed
        self._idle.set()
        self._calm_at = float("-inf")  # marks before this belong to the last re-list's burst

    def mark(self, *kinds: CatalogueKind) -> None:
        self._pending.update(kinds)
        self._marked.set()
        if self._idle.is_set():
            self._idle = anyio.Event()

    def done(self) -> None:
        """The batch from ``next_batch`` is re-listed (or given up): idle unless more arrived."""
        self._calm_at = anyio.current_time() + self.quiet
        if not self._pending:
            self._idle.set()

    async def settled(self) -> None:
        """Wait until every announced change has been re-listed (bound it with a timeout)."""
        await self._idle.wait()

    @property
    def is_settled(self) -> bool:
        """Whether every announced change has been re-listed (``settled`` would not wait)."""
        return self._idle.is_set()

    async def next_batch(self) -> set[CatalogueKind]:
        await self._marked.wait()
        if anyio.current_time() < self._calm_at:  # the tail of a burst: wait until it is quiet
            give_up_at = anyio.current_time() + self.max_delay
            while True:
                self._marked = anyio.Event()
                wait = min(self.quiet, give_up_at - anyio.current_time())
                if wait <= 0:
                    break
                with anyio.move_on_after(wait):
                    await self._marked.wait()
                if not self._marked.is_set():
                    break
        batch, self._pending = self._pending, set()
        self._marked = anyio.Event()
        self._calm_at = float("inf")  # until ``done``: what arrives meanwhile is this burst's
        return batch
