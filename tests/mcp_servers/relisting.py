"""A hand-written 2025-11-25 stdio server whose tools/list answer the test writes, byte for byte.

    relisting.py [--page-size N]

Built on :mod:`servers.wire` (no SDK: it may answer what no SDK server would). The listing starts as
``wire``'s tools; ``set_tools(tools, extra)`` replaces it with any JSON (invalid definitions
included) and merges ``extra`` into every page of the answer (``{"nextCursor": 5}`` breaks a page as
a whole). With ``--page-size`` the listing comes in pages of that many tools.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_servers.wire import TOOLS, WireServer, _schema, serve

SET_TOOLS = {"name": "set_tools", "description": "Replace the tools/list answer.",
             "inputSchema": _schema(tools="array")}


class RelistingServer(WireServer):
    def __init__(self, page_size: int) -> None:
        super().__init__("relisting", [*TOOLS, SET_TOOLS], 0)
        self.page_size = page_size
        self.extra: dict[str, Any] = {}

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + self.page_size if self.page_size else len(self.tools)
            page: dict[str, Any] = {"tools": self.tools[start:end]}
            if end < len(self.tools):
                page["nextCursor"] = str(end)
            self.answer(request_id, {**page, **self.extra})
        elif method == "tools/call" and params.get("name") == "set_tools":
            arguments = params.get("arguments") or {}
            self.tools = [*arguments["tools"], SET_TOOLS]
            self.extra = arguments.get("extra") or {}
            self.text(request_id, f"{len(self.tools)} tools")
        else:
            super().handle(message)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-size", type=int, default=0)
    options = parser.parse_args()
    asyncio.run(serve(RelistingServer(options.page_size)))


if __name__ == "__main__":
    main()
