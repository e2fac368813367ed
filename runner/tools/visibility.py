"""Who may call a server's tool, by the MCP Apps extension (``io.modelcontextprotocol/ui``): its
``_meta.ui.visibility`` lists ``model`` (the agent is offered it and may call it) and ``app`` (an
app's page of the same server may call it); both when omitted. A tool only for apps is never
offered to the model, and a call the model makes of it anyway is refused."""

from __future__ import annotations

from collections.abc import Mapping

from mcp import types

VISIBILITIES = frozenset({"model", "app"})


def tool_visibility(definition: types.Tool) -> frozenset[str]:
    """Who may call ``definition``: ``model``, ``app`` or both (the default; unknown entries and a
    malformed value count as nothing given)."""
    ui = (definition.meta or {}).get("ui")
    declared = ui.get("visibility") if isinstance(ui, Mapping) else None
    if not isinstance(declared, list):
        return VISIBILITIES
    return frozenset(entry for entry in declared if entry in VISIBILITIES)


def offered_to_model(definition: types.Tool) -> bool:
    """Whether the model may be offered (and may call) the server tool ``definition``."""
    return definition.meta is None or "model" in tool_visibility(definition)
