"""``mcp-run web`` in a subprocess for the web interface's tests, and plain HTTP requests to it.

    with web_page(manifest) as served:        # python -m runner web MANIFEST --port 0
        page.goto(served.url)                  # the printed address, token included
        status, body = request(served, "/api/agent", token=served.token)

The process is stopped (SIGINT, as Ctrl-C) when the block ends, whatever happened in it.
:func:`open_page`, :func:`send` and :func:`card` drive the page in a browser test.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders import ROOT, await_announcement

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

WEB = [sys.executable, "-m", "runner", "web"]
START_LIMIT = 60.0  # seconds for the agent's servers to start and the page to be served
STOP_LIMIT = 30.0
READY = re.compile(r"the page of '.*' is at (http://\S+)")


@dataclass
class ServedPage:
    process: subprocess.Popen[str]
    url: str  # the printed address: the page, with its token
    lines: queue.Queue[str]  # the stderr lines after the address

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]


def start_page(manifest: Path, *args: str, env: Mapping[str, str] | None = None) -> ServedPage:
    """``mcp-run web MANIFEST --port 0 ARGS`` once it has printed its address; the caller stops it
    (:func:`stop_page`)."""
    process = subprocess.Popen([*WEB, str(manifest), "--port", "0", *args], cwd=manifest.parent,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    try:
        match, lines = await_announcement(
            process, READY, limit=START_LIMIT,
            silent="mcp-run web printed no address", exited="mcp-run web exited")
    except BaseException:
        stop_page(process)
        raise
    return ServedPage(process, match.group(1), lines)


def stop_page(process: subprocess.Popen[str]) -> int:
    """Ctrl-C (SIGINT) to the process, and its exit code once it has exited."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=STOP_LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


@contextmanager
def web_page(manifest: Path, *args: str, env: Mapping[str, str] | None = None) -> Iterator[ServedPage]:
    served = start_page(manifest, *args, env=env)
    try:
        yield served
    finally:
        stop_page(served.process)


def request(served: ServedPage, path: str, *, token: str | None = None, body: Any = None,
            headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request to the page's server: status, headers, body (a JSON ``body`` is POSTed)."""
    sent = dict(headers or {})
    if token is not None:
        sent["X-MCP-Run-Token"] = token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    call = urllib.request.Request(served.base + path, data=data, headers=sent)
    try:
        with urllib.request.urlopen(call, timeout=60) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, {k.lower(): v for k, v in refused.headers.items()}, refused.read()


def open_page(page: Page, served: ServedPage, name: str) -> None:
    """The page of agent ``name``, ready (its scripts started, the agent loaded)."""
    from playwright.sync_api import expect

    page.goto(served.url)
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    expect(page.locator("#agent-name")).to_have_text(name)


def send(page: Page, text: str) -> None:
    """Send ``text`` once the last turn has ended (its stream closed)."""
    from playwright.sync_api import expect

    expect(page.locator("#log")).not_to_have_attribute("aria-busy", "true")
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")


def card(page: Page, tool: str) -> Locator:
    """The last card of a call of ``tool``."""
    return page.locator(".tool-card", has=page.locator(".tool-name", has_text=re.compile(f"^{tool}$"))).last
