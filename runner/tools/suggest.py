"""What an unknown tool name is answered with: a few close names and a count, never the whole
catalog (a large one would be tens of kilobytes, more than a model request may carry)."""

from __future__ import annotations

import difflib
from collections.abc import Collection

CLOSE_NAMES = 5
LIST_ALL_UP_TO = 10  # a catalog this small is named in full


def close_names(name: str, names: Collection[str], limit: int = CLOSE_NAMES) -> list[str]:
    """Up to ``limit`` of ``names`` that look like ``name``, closest first."""
    close = difflib.get_close_matches(name, list(names), n=limit, cutoff=0.6)
    if len(close) < limit:  # a bare name matches its namespaced form: 'echo' -> 'files__echo'
        tails = sorted(other for other in names if other.endswith(f"__{name}") and other not in close)
        close += tails[: limit - len(close)]
    return close


def unknown_tool_text(name: str, names: Collection[str], *, searching: bool = False) -> str:
    """The sentence saying there is no tool ``name``, with close names, the count and, when tool
    search is on, the way to find the others."""
    text = f"There is no tool named '{name}'."
    if len(names) <= LIST_ALL_UP_TO and not searching:
        return text + " Available tools: " + (", ".join(sorted(names)) or "none") + "."
    close = close_names(name, names)
    if close:
        text += " Did you mean " + ", ".join(f"'{other}'" for other in close) + "?"
    count = len(names)
    text += f" {count} tool{'' if count == 1 else 's'} available"
    text += "; use search_tools to find one by what it does." if searching else "."
    return text


def unknown_tool_line(name: str, names: Collection[str]) -> str:
    """The one-line error of a command given an unknown tool name (``mcp-run call``, ``/call``)."""
    if name == "search_tools":  # answered by the agent's graph for the model, not by a server
        return ("unknown tool 'search_tools': tool search is offered to the model only "
                "(agent.tool_search); `mcp-run tools FILE` lists the tools that can be called")
    close = close_names(name, names)
    hint = f" (did you mean {' or '.join(repr(other) for other in close)}?)" if close else ""
    if len(names) <= LIST_ALL_UP_TO:
        return f"unknown tool '{name}'{hint}; tools: {', '.join(sorted(names)) or 'none'}"
    return f"unknown tool '{name}'{hint}; {len(names)} tools, `mcp-run tools FILE` lists them"
