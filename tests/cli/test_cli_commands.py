"""The inspection commands as a person runs them: exit codes, approval for `call`, the output
limit, tables that never cut a name, `prompts --json`, and server text never read as markup."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pexpect
import pytest
from builders import MCP_RUN, ROOT, TESTS, chat_in_a_terminal, invoke, mcp_run, server, write_manifest

MARKUP_SERVER = f'''
import sys
sys.path.insert(0, {str(TESTS)!r})
from mcp.server.mcpserver import MCPServer
from mcp_servers._serve import main

def build(name: str = "markup") -> MCPServer:
    server = MCPServer(name)

    @server.tool(description="[bold]Loud[/bold] [link=https://evil.example]click[/link] [red]hidden")
    def shout(text: str) -> str:
        return "[bold]" + text + "[/]"

    @server.tool(description="A tool whose name is long.")
    def a_tool_with_a_rather_long_name_that_cannot_fit_in_a_narrow_column() -> str:
        return "ok"

    @server.prompt(description="[italic]Review[/] some code")
    def review(code: str, focus: str = "all") -> str:
        return f"[bold]Review[/] {{code}} [link=https://evil.example]now[/link] focus={{focus}}"

    return server

main(build)
'''


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """An agent with the demo server (max_output_chars 60, `fail` needs approval) and a server
    whose descriptions and prompt text are full of rich markup."""
    (tmp_path / "markup_server.py").write_text(MARKUP_SERVER)
    write_manifest(tmp_path, {
        "demo": server("demo", max_output_chars=60, tools={"approve": ["echo"]}),
        "a-rather-long-server-key": {"command": "python", "args": ["markup_server.py"]},
    }, name="cli", model="offline", checkpointer="memory")
    return tmp_path


def test_a_malformed_or_missing_prompt_argument_and_an_unknown_prompt_exit_2(agent: Path) -> None:
    for args in (("demo__greet", "=x"), ("demo__greet",), ("demo__nothing", "name=x")):
        result = invoke("prompt", "agent.yaml", *args, cwd=agent)
        assert result.exit_code == 2, (args, result.stderr)
        assert result.stderr.startswith("error: ")


def test_call_exits_2_for_an_unknown_tool_or_arguments_that_are_not_a_json_object(agent: Path) -> None:
    unknown = invoke("call", "agent.yaml", "demo__ad", "{}", cwd=agent)
    assert unknown.exit_code == 2 and "unknown tool 'demo__ad' (did you mean 'demo__add'" in unknown.stderr
    assert invoke("call", "agent.yaml", "demo__add", "{a: 1}", cwd=agent).exit_code == 2
    assert invoke("call", "agent.yaml", "demo__add", "[1, 2]", cwd=agent).exit_code == 2


def test_call_exits_1_when_the_tool_itself_fails(agent: Path) -> None:
    result = invoke("call", "agent.yaml", "demo__fail", '{"message": "broken"}', cwd=agent)
    assert result.exit_code == 1 and "broken" in result.stderr


def test_call_of_a_tool_needing_approval_is_denied_without_a_terminal_unless_yes(agent: Path) -> None:
    denied = invoke("call", "agent.yaml", "demo__echo", '{"text": "hi"}', cwd=agent)
    assert denied.exit_code == 1 and denied.stdout == ""
    assert ("denied demo__echo: needs approval (servers.demo.tools.approve[0]) and no one can answer "
            "here (pass --yes to allow)") in denied.stderr
    allowed = invoke("call", "agent.yaml", "demo__echo", '{"text": "hi"}', "--yes", cwd=agent)
    assert allowed.exit_code == 0 and allowed.stdout.strip() == "hi"


@pytest.mark.parametrize(("answer", "code"), [("y", 0), ("n", 1)])
def test_call_of_a_tool_needing_approval_asks_on_a_terminal(agent: Path, answer: str, code: int) -> None:
    call = pexpect.spawn(str(MCP_RUN), ["call", "agent.yaml", "demo__echo", '{"text": "hi"}'],
                         cwd=str(agent), encoding="utf-8", timeout=60)
    try:
        call.expect("demo__echo wants to run with")
        call.expect(re.escape("approve? [y]es / [n]o: "))  # worded as the chat asks
        call.sendline("maybe")
        call.expect("answer y or n")
        call.sendline(answer)
        call.expect(pexpect.EOF)
    finally:
        call.close(force=True)
    assert call.exitstatus == code
    assert ("hi" in call.before) == (code == 0)
    if answer == "n":
        assert "denied demo__echo: by you" in call.before and "--yes" not in call.before


def test_call_with_arguments_that_do_not_fit_the_tool_exits_2_before_asking_for_approval(agent: Path) -> None:
    call = pexpect.spawn(str(MCP_RUN), ["call", "agent.yaml", "demo__echo", '{"txt": "hi"}'],
                         cwd=str(agent), encoding="utf-8", timeout=60)
    try:
        asked = call.expect([r"approve\? \[y\]es / \[n\]o: ", pexpect.EOF]) == 0
    finally:
        call.close(force=True)
    assert not asked and call.exitstatus == 2
    assert "approve?" not in call.before and "wants to run" not in call.before
    assert "invalid arguments for demo__echo" in call.before
    assert "- (arguments): 'text' is a required property" in call.before
    assert "call the tool again" not in call.before  # said to the model, not to a person
    unapproved = invoke("call", "agent.yaml", "demo__add", '{"a": "one"}', cwd=agent)
    assert unapproved.exit_code == 2 and unapproved.stdout == ""
    assert "- a: 'one' is not of type 'integer'" in unapproved.stderr
    assert "- (arguments): 'b' is a required property" in unapproved.stderr
    assert "see its input_schema in `mcp-run tools agent.yaml --json`" in unapproved.stderr
    assert "call the tool again" not in unapproved.stderr


def test_call_cuts_structured_content_to_max_output_chars_too(agent: Path) -> None:
    result = invoke("call", "agent.yaml", "demo__env", '{"name": "PATH"}', cwd=agent)
    assert result.exit_code == 0, result.stderr
    structured = result.stderr.split("structured content:", 1)[1].strip()
    assert 0 < len(structured) <= 60 + 80  # the head and the tail, and the marker between them
    big = invoke("call", "agent.yaml", "demo__big_output", '{"chars": 5000}', cwd=agent)
    assert big.exit_code == 0 and len(big.stdout) < 200


def test_call_saves_an_image_under_the_state_folder_and_prints_its_path(agent: Path) -> None:
    first = invoke("call", "agent.yaml", "demo__image", cwd=agent)
    again = invoke("call", "agent.yaml", "demo__image", cwd=agent)
    assert first.exit_code == again.exit_code == 0, first.stderr
    assert first.stdout.strip() == "[image image/png]"
    paths = [Path(line.split(": ", 1)[1]) for result in (first, again)
             for line in result.stderr.splitlines() if line.startswith("saved image/png from demo__image: ")]
    assert len(paths) == 2 and paths[0] != paths[1]  # numbered: a second call keeps the first image
    for path in paths:
        assert path.parent == (agent / ".mcp-run" / "media" / "call").resolve()
        assert path.read_bytes().startswith(b"\x89PNG")


def test_call_reaches_a_tool_its_server_answers_but_does_not_list_with_a_warning(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"answers": server("answers"),
                              "narrow": server("answers", tools={"except": ["unl*"]}),
                              "gated": server("answers", tools={"approve": ["unl*"]})},
                   name="unlisted", model="offline", checkpointer="memory")
    called = invoke("call", "agent.yaml", "answers__unlisted", '{"score": 7}', cwd=tmp_path)
    assert called.exit_code == 0 and called.stdout.strip() == "score 7", called.stderr
    assert "does not list a tool 'answers__unlisted'; calling it anyway" in called.stderr
    excluded = invoke("call", "agent.yaml", "narrow__unlisted", '{"score": 7}', cwd=tmp_path)
    assert excluded.exit_code == 2 and "unknown tool 'narrow__unlisted'" in excluded.stderr
    gated = invoke("call", "agent.yaml", "gated__unlisted", '{"score": 7}', cwd=tmp_path)
    assert gated.exit_code == 1 and "denied gated__unlisted: needs approval" in gated.stderr
    asked = invoke("agent.yaml", "-p", 'answers__unlisted {"score": 7}', cwd=tmp_path)  # not for the model
    assert "score 7" not in asked.stdout and "answers__unlisted" not in invoke(
        "tools", "agent.yaml", cwd=tmp_path).stdout


def test_tool_and_prompt_tables_never_cut_a_name_at_80_columns_when_piped(agent: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    listed = json.loads(mcp_run("tools", "agent.yaml", "--json", cwd=agent, env=env).stdout)
    table = mcp_run("tools", "agent.yaml", cwd=agent, env=env)
    assert table.returncode == 0, table.stderr
    for row in listed:
        assert any(line.split()[:3] == [row["name"], row["server"], row["original"]]
                   for line in table.stdout.splitlines()), row["name"]
    prompts = mcp_run("prompts", "agent.yaml", cwd=agent, env=env)
    line = next(line for line in prompts.stdout.splitlines() if "/demo__review" in line)
    assert line.split() == ["/demo__review", "demo", "review", "code=<code>", "[language=<language>]"]


def test_prompts_json_lists_every_prompt_command_with_its_arguments(agent: Path) -> None:
    result = invoke("prompts", "agent.yaml", "--json", cwd=agent)
    assert result.exit_code == 0, result.stderr
    rows = {row["command"]: row for row in json.loads(result.stdout)}
    assert rows["/demo__greet"] == {"command": "/demo__greet", "server": "demo", "original": "greet",
                                    "arguments": "name=<name>", "description": "Greet someone."}
    assert rows["/a-rather-long-server-key__review"]["arguments"] == "code=<code> [focus=<focus>]"


def test_text_from_a_server_is_printed_as_it_is_never_read_as_markup(agent: Path) -> None:
    tools = mcp_run("tools", "agent.yaml", cwd=agent, env={**__import__("os").environ, "COLUMNS": "200"})
    words = " ".join(tools.stdout.split())
    assert "[bold]Loud[/bold] [link=https://evil.example]click[/link] [red]hidden" in words
    prompts = invoke("prompts", "agent.yaml", cwd=agent)
    assert "[focus=<focus>]" in prompts.stdout
    rendered = invoke("prompt", "agent.yaml", "a-rather-long-server-key__review", "code=x", cwd=agent)
    assert rendered.exit_code == 0, rendered.stderr
    assert rendered.stdout.splitlines() == [
        "[user]", "[bold]Review[/] x [link=https://evil.example]now[/link] focus=all"]
    called = invoke("call", "agent.yaml", "a-rather-long-server-key__shout", '{"text": "[/]"}', cwd=agent)
    assert called.stdout.strip() == "[bold][/][/]"


def test_watch_exits_130_on_ctrl_c(agent: Path) -> None:
    watch = pexpect.spawn(str(MCP_RUN), ["watch", "agent.yaml"], cwd=str(agent), encoding="utf-8",
                          timeout=60)
    try:
        watch.expect("watching")
        watch.kill(signal.SIGINT)
        watch.expect(pexpect.EOF)
    finally:
        watch.close(force=True)
    assert watch.exitstatus == 130


def test_watch_started_in_the_background_by_a_script_still_stops_on_sigint(agent: Path) -> None:
    """A script's ``mcp-run watch agent.yaml &`` inherits SIGINT ignored; ``kill -INT`` stops it
    as Ctrl-C would, as it does the chat and serve (README: Commands)."""
    script = f"trap '' INT; exec {MCP_RUN} watch agent.yaml"  # what `&` does in a script
    watch = subprocess.Popen(["sh", "-c", script], cwd=agent, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline()  # watching: its first line
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=60) == 130
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def test_the_chat_prints_server_text_as_it_is_never_as_markup(agent: Path) -> None:
    with chat_in_a_terminal(agent) as chat:
        chat.sendline("/tools")
        chat.expect(re.escape("[bold]Loud[/bold] [link=https://evil.example]click[/link] [red]hidden"))
        chat.expect("> ")
        chat.sendline("/help")
        chat.expect(re.escape("code=<code> [focus=<focus>]") + r"\s+"
                    + re.escape("[italic]Review[/] some code"))
        chat.expect("> ")
        chat.sendline('/call a-rather-long-server-key__shout {"text": "[red]x"}')
        chat.expect(re.escape("[bold][red]x[/]"))
        chat.expect("> ")


def test_a_failing_or_denied_tool_in_a_one_shot_run_is_answered_and_exits_0_as_the_readme_says(
    agent: Path,
) -> None:
    failing = invoke("agent.yaml", "-p", 'demo__fail {"message": "broken"}', cwd=agent)
    assert failing.exit_code == 0, failing.stderr
    denied = invoke("agent.yaml", "-p", 'demo__echo {"text": "hi"}', cwd=agent)
    assert denied.exit_code == 0 and "denied demo__echo" in denied.stderr
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "for the `call` command, a tool that fails" in readme
    assert ("with `-p` the model hears a tool's error or denial and answers, so the turn still exits 0"
            in readme)


def test_prompt_with_an_unknown_name_says_unknown_prompt_with_a_suggestion(agent: Path) -> None:
    result = invoke("prompt", "agent.yaml", "demo__gret", cwd=agent)
    assert result.exit_code == 2
    assert "unknown prompt 'demo__gret' (did you mean 'demo__greet'?)" in result.stderr
    assert "command" not in result.stderr


def test_a_reload_error_in_the_terminal_speaks_of_the_agents_files() -> None:
    import io

    from rich.console import Console

    from runner.cli.terminal import LineReader, TerminalView

    console = Console(file=io.StringIO(), width=200)
    view = TerminalView(console, LineReader(console, fd=0))
    view.show({"type": "reload_error", "problems": ["prompts/system.md.j2:1:4: unexpected '}'"]})
    assert "the agent's files have problems; still running the last good version" in console.file.getvalue()


def test_a_primary_that_fails_to_start_is_reported_as_served_by_its_fallback(tmp_path: Path) -> None:
    write_manifest(tmp_path, {
        "primary": {"command": "python", "args": ["-c", "import sys; sys.exit(3)"], "fallback": "backup",
                    "restart": {"max_attempts": 1}},
        "backup": server("demo", expose=False),
    }, model="offline")
    result = mcp_run("call", "agent.yaml", "primary__add", '{"a": 1, "b": 2}', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning: primary failed to start; its tools are served by backup (" in result.stderr
    assert "optional server skipped" not in result.stderr
    assert ("warning: primary: add failed, falling back to backup: tools/call 'add': the server has failed "
            "(the server exited with code 3") in result.stderr


def test_a_log_line_during_start_up_clears_the_spinner_first_and_the_spinner_stays_off() -> None:
    import io
    import logging

    from rich.console import Console

    from runner.cli.terminal import StartupSpinner

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    handler = logging.StreamHandler(screen)
    logging.getLogger().addHandler(handler)
    try:
        spinner = StartupSpinner(console, "starting servers…")
        spinner.start()
        console.file.write("")  # the spinner's line is on the screen now
        logging.getLogger("runner.test").warning("everything: tool 'x' skipped")
        spinner.stop()
    finally:
        logging.getLogger().removeHandler(handler)
    drawn, after_warning = screen.getvalue().split("everything: tool 'x' skipped", 1)
    assert "starting servers" in drawn
    last_line = drawn.rsplit("\n", 1)[-1]
    assert "\x1b[2K" in last_line or "starting servers" not in last_line, repr(last_line)
    assert "starting servers" not in after_warning


def test_validate_warns_when_the_state_folder_cannot_be_created_and_names_the_per_user_one(
    tmp_path: Path,
) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, model="offline")
    (tmp_path / ".mcp-run").write_text("in the way")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    result = mcp_run("validate", "agent.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert f"warning: cannot use the state folder {tmp_path / '.mcp-run'} (" in result.stderr
    assert f"runs will use {tmp_path / 'state' / 'mcp-run'}" in result.stderr
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "runs use a per-user folder, `$XDG_STATE_HOME/mcp-run/<folder>-<hash>`" in readme


def test_call_of_a_tool_whose_optional_server_is_down_says_so_and_exits_1(tmp_path: Path) -> None:
    write_manifest(tmp_path, {
        "demo": server("demo"),
        "time-sse": {"url": "http://127.0.0.1:9/sse", "transport": "sse", "required": False},
    }, name="cli", model="offline")
    result = invoke("call", "agent.yaml", "time-sse__get_current_time", "{}", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    assert "server time-sse is not available (" in result.stderr
    assert "unknown tool" not in result.stderr


def test_call_runs_a_tool_that_tools_lists_for_a_client_capability_and_says_what_it_declined(
    tmp_path: Path,
) -> None:
    # `summarize` is listed only to clients declaring sampling; nobody can approve a completion here.
    write_manifest(tmp_path, {"capable": server("capable", "--legacy")}, name="capable", model="offline")
    listed = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert listed.exit_code == 0, listed.stderr
    assert {row["name"] for row in json.loads(listed.stdout)} == {"capable__echo", "capable__summarize"}
    called = invoke("call", "agent.yaml", "capable__summarize", '{"text": "a long text"}', cwd=tmp_path)
    assert called.exit_code == 0, called.stderr
    assert called.stdout.startswith("no summary: sampling was refused")
    assert "it was declined: this run cannot ask the user" in called.stdout


def test_tools_exits_1_and_says_so_when_no_server_could_start_and_0_when_one_did(tmp_path: Path) -> None:
    dead = {"exits": {"command": "python", "args": ["-c", "raise SystemExit(3)"]},
            "missing": {"command": "mcp-run-test-no-such-command"}}
    write_manifest(tmp_path, dead, model="offline")
    for options in ((), ("--json",)):
        none = invoke("tools", "agent.yaml", *options, cwd=tmp_path)
        assert none.exit_code == 1, none.stderr
        assert "error: no server could start (2 declared)" in none.stderr
    write_manifest(tmp_path, {**dead, "demo": server("demo")}, model="offline")
    some = invoke("tools", "agent.yaml", cwd=tmp_path)
    assert some.exit_code == 0, some.stderr
    assert "demo__echo" in some.stdout and "no server could start" not in some.stderr


def test_validate_names_a_valid_manifest_by_the_path_it_was_given_folder_included(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "sub", {}, model="offline")
    result = invoke("validate", str(manifest))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{manifest}: 'test' is valid — 0 servers, model offline")
