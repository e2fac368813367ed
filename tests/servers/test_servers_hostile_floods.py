"""Hostile servers that flood: junk on stdout, bodies beyond the message limit, bodies that do not
parse. Each costs a bounded amount of memory and a few warning lines naming the server."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import anyio
import pytest
from mcp_servers import specs

from runner.servers import open_fleet

pytestmark = pytest.mark.anyio

JUNK_LINES = 5_000


async def test_a_server_flooding_stdout_with_junk_gets_a_few_warnings_and_a_count(
    tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with open_fleet({"junk": specs.stdio("junk")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        junk = fleet.connections["junk"]
        await junk.call_tool("junk", {"text": "\n".join(f"junk {n}" for n in range(JUNK_LINES))})
        with anyio.fail_after(20):  # every junk line is read before the answer behind it
            answer = await junk.call_tool("echo", {"text": "still talking"})
        assert "still talking" in answer.content[0].text
    about_junk = [message for message in caplog.messages if message.startswith("server junk")]
    shown = [message for message in about_junk if "(ignored)" in message]
    counted = [int(found.group(1).replace(",", "")) for message in about_junk
               if (found := re.search(r"([\d,]+) more warnings about non-JSON-RPC output", message))]
    assert len(about_junk) < 50 and counted, about_junk[:10]
    assert len(shown) + sum(counted) == JUNK_LINES + 1  # and the server's banner
    log = (state_dir / "logs" / "junk.log").read_text()
    assert "junk 4999" in log  # the server's log keeps every line
