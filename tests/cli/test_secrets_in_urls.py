"""Credentials written into server URLs never reach the terminal: not in ``--debug`` log lines
(httpx and the MCP SDK log every request's URL), not in a server's start error, not in ``--json``."""

from __future__ import annotations

from pathlib import Path

from builders import mcp_run, write_manifest
from mcp_servers import demo

PASSWORD, TOKEN = "CANARYpassword1", "CANARYtoken1"


def secret_url(url: str) -> str:
    """``url`` with a user, a password and a token in its query, and a harmless query value."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://ann:{PASSWORD}@{rest}?token={TOKEN}&page=2"


def test_debug_log_lines_of_httpx_and_the_sdk_show_server_urls_without_their_credentials(
    serve_http, tmp_path: Path
) -> None:
    write_manifest(tmp_path, {"demo": {"url": secret_url(serve_http(demo.build()))}}, model="offline")
    result = mcp_run("--debug", "tools", "agent.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "demo__add" in result.stdout
    requests = [line for line in result.stderr.splitlines() if "HTTP Request: POST" in line]
    assert requests and all("ann:***@" in line and "token=***&page=2" in line for line in requests)
    assert PASSWORD not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr


def test_a_server_that_cannot_be_reached_is_named_without_its_credentials_in_every_output(
    serve_http, tmp_path: Path
) -> None:
    working = serve_http(demo.build())
    url = working.replace("/mcp", "/nowhere")  # answers 404
    # A working server too: with none started, the run would stop ("no server could start").
    write_manifest(tmp_path, {"gone": {"url": secret_url(url)}, "demo": {"url": working}}, model="offline")
    for args in (("tools", "agent.yaml"), ("--debug", "tools", "agent.yaml"),
                 ("agent.yaml", "-p", "hi", "--json")):
        result = mcp_run(*args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "gone: http://ann:***@127.0.0.1:" in result.stderr, result.stderr
        assert PASSWORD not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr


def test_an_oauth_code_in_the_query_and_a_token_in_the_fragment_are_hidden_in_every_output(
    serve_http, tmp_path: Path
) -> None:
    code, fragment = "CANARYcodeV", "CANARYfragTOK"
    working = serve_http(demo.build())
    url = working.replace("/mcp", "/nowhere")  # answers 404
    write_manifest(tmp_path, {"gone": {"url": f"{url}?code={code}&page=2#token={fragment}"},
                              "demo": {"url": working}}, model="offline")
    for args in (("tools", "agent.yaml"), ("--debug", "tools", "agent.yaml"),
                 ("agent.yaml", "-p", "hi", "--json"), ("config", "agent.yaml")):
        result = mcp_run(*args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        shown = result.stdout + result.stderr
        assert "/nowhere?code=" in shown and "page=2" in shown, args
        assert code not in shown and fragment not in shown, args
