"""MCP Apps' pure parts: the frame's policy from declared origins, the result
an app gets for its call, and the frames the page keeps (no process, no network)."""

from __future__ import annotations

import pytest

from runner.tools.content import ToolOutput
from runner.web.apps import SOURCE, AppCsp, AppFrames, AppPage, AppTool, app_result


@pytest.mark.parametrize("origin", [
    "https://cdn.example.com", "https://*.example.com", "wss://live.example.com:8443",
    "http://localhost:3000", "https://cdn.example.com/libs/",
])
def test_declared_origins_that_are_origins_are_accepted(origin: str) -> None:
    assert SOURCE.fullmatch(origin)


@pytest.mark.parametrize("origin", [
    "*", "https://*", "https:", "'unsafe-eval'", "data:", "javascript:alert(1)", "https://a.com;script-src *",
    "https://a.com b.com", "ftp://a.com", "https://a.com,https://b.com", "https://a.com/'x'", "",
])
def test_anything_else_is_no_origin(origin: str) -> None:
    assert not SOURCE.fullmatch(origin)


def test_the_policy_opens_each_declared_kind_only_where_the_extension_maps_it() -> None:
    csp = AppCsp(connect=("https://api.example.com",), frames=("https://player.example.com",))
    policy = csp.policy()
    assert "connect-src https://api.example.com;" in policy
    assert "frame-src https://player.example.com;" in policy
    assert "script-src 'unsafe-inline';" in policy and "font-src 'none';" in policy
    assert "base-uri 'none';" in policy and policy.endswith("sandbox allow-scripts")
    assert csp.declared() == {"connectDomains": ["https://api.example.com"],
                              "frameDomains": ["https://player.example.com"]}


def test_an_apps_call_result_is_mcp_content_with_its_structured_content_and_error_flag() -> None:
    text = app_result(ToolOutput('{"count": 2}', {"count": 2}, False))
    assert text == {"content": [{"type": "text", "text": '{"count": 2}'}], "isError": False,
                    "structuredContent": {"count": 2}}
    blocks = [{"type": "text", "text": "a chart"},
              {"type": "image", "base64": "iVBO", "mime_type": "image/png"},
              {"type": "file", "base64": "JVBE", "mime_type": "application/pdf"}]
    media = app_result(ToolOutput(blocks, None, False))
    assert media == {"content": [{"type": "text", "text": "a chart"},
                                 {"type": "image", "data": "iVBO", "mimeType": "image/png"},
                                 {"type": "text", "text": "[file content: not passed to apps]"}],
                     "isError": False}
    assert app_result(ToolOutput("boom", None, True))["isError"] is True


def test_frames_keep_pages_under_unguessable_keys_and_forget_the_oldest() -> None:
    page = AppPage(AppTool("s__t", "s", "t", "ui://t", frozenset({"model", "app"})), "<p>hi</p>", AppCsp())
    frames = AppFrames(limit=2)
    keys = [frames.add(page) for _ in range(3)]
    assert len(set(keys)) == 3 and all(len(key) >= 32 for key in keys)
    assert keys[0] not in frames and frames[keys[2]] is page
    with pytest.raises(KeyError):
        frames[keys[0]]
