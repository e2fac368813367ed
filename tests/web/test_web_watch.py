"""``mcp-run web --watch`` in a real browser: an edit's reload, or the located problem of an
invalid edit, is told in the page, and the conversation stays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from browser import BROWSER_TIMEOUT_MS
from builders import ROOT, server, write_manifest
from playwright.sync_api import Page, expect
from web_pages import web_page

pytestmark = pytest.mark.timeout(300)
expect.set_options(timeout=BROWSER_TIMEOUT_MS)


def test_an_edit_is_told_in_the_page_and_the_conversation_stays(page: Page, tmp_path: Path) -> None:
    notes = {"command": "python", "args": [str(ROOT / "examples" / "notes_server.py")],
             "env": {"NOTES_FILE": str(tmp_path / "notes.json")}}
    manifest = write_manifest(tmp_path, {"notes": notes}, name="watched", model="offline")
    with web_page(manifest, "--watch") as served:
        page.goto(served.url)
        box = page.get_by_label("Message")
        box.fill('notes__calculate {"expression": "5+5"}')
        box.press("Enter")
        expect(page.locator(".message.assistant.final .text")).to_have_text("notes__calculate returned: 10")

        document = yaml.safe_load(manifest.read_text())
        document["servers"]["demo"] = server("demo")
        manifest.write_text(yaml.safe_dump(document, sort_keys=False))
        notice = page.locator("#notices .notice")
        expect(notice).to_have_text(re.compile(r"^Reloaded in \d+ ms: "))  # the word once
        expect(notice).to_contain_text("started demo")
        expect(page.locator(".message.assistant.final .text")).to_have_text("notes__calculate returned: 10")

        manifest.write_text(manifest.read_text().replace("model: offline", "model: 42\nnot_a_key: 1"))
        expect(notice).to_contain_text("The edit was not loaded")
        expect(notice).to_contain_text(f"{manifest}:")  # located: the file, its line and column
        assert notice.evaluate("node => node.classList.contains('error')")
        box.fill('demo__echo {"text": "still here"}')  # the last good agent, with the demo server
        box.press("Enter")
        answers = page.locator(".message.assistant.final .text")
        expect(answers.last).to_have_text("demo__echo returned: still here")
