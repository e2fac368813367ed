"""OAuth for remote servers, end to end on loopback: ``mcp-run auth login|status|logout`` and runs
that use the stored tokens, against a protected MCP server with its own authorization server (the
SDK's server-side auth, tests/mcp_servers/oauth.py). Logins are driven through the CLI with
``--no-browser``: the test reads the printed URL and approves it with an HTTP client."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager as AsyncContextManager
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pexpect
import pytest
import yaml
from builders import invoke, mcp_run
from mcp.shared.auth import AuthorizationCodeResult
from mcp_servers.approver import Approver, follow_login
from mcp_servers.loopback import serve_app
from mcp_servers.oauth import TOKEN_PREFIX, Protected, free_port, serve_protected
from reliability.support import write_manifest
from starlette.types import Receive, Scope, Send
from test_readme_commands import commands_in, filled_in, readme_sections

from runner.agent.reload import reload_runtime, watch_and_reload
from runner.agent.runtime import load_agent
from runner.auth.context import interacting
from runner.auth.flow import token_record
from runner.errors import AuthError, LoginRequiredError, ManifestError, ServerRequestError
from runner.manifest import HttpServerSpec
from runner.manifest.loading import load_manifest, parse_manifest
from runner.servers import ServerFleet, open_fleet

LOGIN_WAIT = 90.0  # a busy machine: the CLI starts, discovers, registers, listens
URL = re.compile(r"http://127\.0\.0\.1:\d+/authorize\?\S+")


@pytest.fixture
def token_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-state" / "tokens"
    monkeypatch.setenv("MCP_RUN_TOKEN_DIR", str(folder))
    return folder


@pytest.fixture
def project(tmp_path: Path, token_folder: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def protected() -> Iterator[Protected]:
    with serve_protected() as running:
        yield running


def remote(url: str, **auth: Any) -> dict[str, Any]:
    return {"url": url, "auth": {"callback_port": free_port(), **auth}}


def write_scripted_manifest(project: Path, url: str) -> None:
    """Server ``remote`` at ``url`` and a scripted model that calls its ``whoami`` tool."""
    script = [{"tool_calls": [{"name": "remote__whoami"}]}, "done"]
    (project / "script.yaml").write_text(yaml.safe_dump(script))
    write_manifest(project, {"remote": remote(url)}, model={"id": "scripted", "script": "script.yaml"})


def open_remote(project: Path, url: str, **settings: Any) -> AsyncContextManager[ServerFleet]:
    """The fleet of a manifest with one server ``remote`` at ``url``, in this process."""
    write_manifest(project, {"remote": {**remote(url), **settings}})
    spec = load_manifest(project / "agent.yaml").manifest.servers["remote"]
    assert isinstance(spec, HttpServerSpec)
    return open_fleet({"remote": spec}, base_dir=project, state_dir=project / ".mcp-run")


def spawn_login(project: Path, *extra: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable, ["-m", "runner", "auth", "login", "agent.yaml", "remote", "--no-browser", *extra],
        cwd=str(project), env=dict(os.environ), encoding="utf-8", timeout=LOGIN_WAIT,
    )


@contextmanager
def chat_offering_a_login(project: Path) -> Iterator[pexpect.spawn]:
    """The chat of ``agent.yaml`` (no display: the URL is printed), once it was told yes to log in
    to ``remote`` and printed the URL. The block ends at the prompt; the chat must then /exit with 0."""
    chat = pexpect.spawn(sys.executable, ["-m", "runner", "agent.yaml"], cwd=str(project),
                         env={**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}, encoding="utf-8",
                         timeout=LOGIN_WAIT, dimensions=(50, 400))
    try:
        chat.expect(r"remote needs a login\. Log in now\? \[Y/n\] ")
        chat.sendline("y")
        chat.expect(URL)
        yield chat
        chat.expect("> ")
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert chat.exitstatus == 0


def finish(child: pexpect.spawn) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, child.before


def login(project: Path, tamper: Callable[[str], str] | None = None) -> tuple[int, str, str]:
    """Run ``mcp-run auth login`` and approve the URL it prints: (status, output, the URL)."""
    child = spawn_login(project)
    child.expect(URL)
    url = child.after
    if tamper is None:
        follow_login(url)
    else:
        follow_login(url, tamper)
    status, output = finish(child)
    return status, output, url


def logged_in(project: Path) -> None:
    """The stored login of ``remote`` in ``project/agent.yaml``, made in this process by a run that
    logs in (an ``Approver`` at the browser): for tests about what follows a login, not about
    ``auth login`` itself (those run it, as a process)."""
    spec = load_manifest(project / "agent.yaml").manifest.servers["remote"]
    assert isinstance(spec, HttpServerSpec)

    async def run() -> None:
        with interacting(Approver()), anyio.fail_after(LOGIN_WAIT):
            async with open_fleet({"remote": spec}, base_dir=project, state_dir=project / ".mcp-run"):
                pass

    anyio.run(run)
    record = token_record(spec)
    assert record is not None and record.login() is not None


def test_first_login_uses_pkce_and_later_runs_use_the_stored_token(
    project: Path, protected: Protected
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    status, output, url = login(project)
    assert status == 0, output
    assert "remote: logged in, 4 tools" in output
    assert "code_challenge_method=S256" in url and "state=" in url and "resource=" in url
    called = invoke("call", "agent.yaml", "remote__whoami", "{}", cwd=project)
    assert called.exit_code == 0, called.stderr
    assert "authorized" in called.stdout
    write_scripted_manifest(project, protected.url)
    turn = invoke("agent.yaml", "-p", "who am I?", "--json", cwd=project)
    assert turn.exit_code == 0, turn.stderr
    results = [json.loads(line) for line in turn.stdout.splitlines()]
    assert any(event["type"] == "tool_result" and event["status"] == "success" for event in results)
    assert protected.authority.authorizations == 1


def test_the_chat_offers_to_log_in_to_a_server_it_had_to_skip(
    project: Path, protected: Protected
) -> None:
    write_scripted_manifest(project, protected.url)
    with chat_offering_a_login(project) as chat:
        follow_login(chat.after)
        chat.expect("remote: logged in, 4 tools")
        chat.expect("> ")
        chat.sendline("/tools")
        chat.expect("remote__whoami")
    assert protected.authority.authorizations == 1


def test_ctrl_c_during_the_chats_login_cancels_that_login_and_goes_on_to_the_prompt(
    project: Path, protected: Protected
) -> None:
    write_scripted_manifest(project, protected.url)
    with chat_offering_a_login(project) as chat:
        chat.sendintr()
        chat.expect("remote: login cancelled")
    assert protected.authority.authorizations == 0


def test_the_readmes_login_commands_run_as_written(project: Path, protected: Protected) -> None:
    """Those of "Logging in to remote servers" and the auth rows of "Commands" (SERVER: github),
    logins first and the logout last, in a terminal without a display (the URL is printed)."""
    sections = readme_sections()
    shown = commands_in(sections["Logging in to remote servers"])
    shown += [command for command in commands_in(sections["Commands"]) if command.startswith("auth ")]
    order = {"login": 0, "logout": 2}
    commands = sorted({tuple(filled_in(command)) for command in shown},
                      key=lambda args: (order.get(args[1], 1) if args[0] == "auth" else 1, args))
    assert [args[:2] for args in commands if args[0] == "auth"] == [
        ("auth", "login"), ("auth", "status"), ("auth", "logout")]
    script = [{"tool_calls": [{"name": "github__whoami"}]}, "done"]
    (project / "script.yaml").write_text(yaml.safe_dump(script))
    write_manifest(project, {"github": remote(protected.url)},
                   model={"id": "scripted", "script": "script.yaml"})
    for args in commands:
        child = pexpect.spawn(sys.executable, ["-m", "runner", *args], cwd=str(project),
                              env={**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}, encoding="utf-8",
                              timeout=LOGIN_WAIT)
        output = ""
        if child.expect([URL, pexpect.EOF]) == 0:
            output = child.before + child.after
            follow_login(child.after)
            child.expect(pexpect.EOF)
        output += child.before
        child.close()
        assert child.exitstatus == 0, (args, output)
        if args[:2] == ("auth", "status"):
            assert "github: logged in" in output
        elif args[1] == "-p":
            assert "authorized" in output and "done" in output  # the tool's answer, the model's
    assert protected.authority.authorizations == 1
    assert "github: logged out" in output


def test_the_token_file_is_private_and_outside_the_project(
    project: Path, protected: Protected, token_folder: Path
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    status, output, _ = login(project)
    assert status == 0, output
    files = list(token_folder.glob("*.json"))
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(token_folder.stat().st_mode) == 0o700
    assert {path.name for path in token_folder.iterdir()} <= {files[0].name, "locks"}
    for lock in token_folder.glob("locks/*"):  # what processes sharing the login take turns with
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert not any(TOKEN_PREFIX in path.read_text(errors="replace")
                   for path in project.rglob("*") if path.is_file())


def test_an_expired_token_is_refreshed_before_use_and_a_rejected_one_once_on_401(
    project: Path, token_folder: Path
) -> None:
    with serve_protected(access_lifetime=1) as protected:
        write_manifest(project, {"remote": remote(protected.url)})
        status, output, _ = login(project)
        assert status == 0, output
        # A lifetime of 1 s counts as expired at once (refreshed half a lifetime early): these runs
        # are processes, whose start takes longer than that half second.
        first = mcp_run("call", "agent.yaml", "remote__whoami", "{}", cwd=project)
        assert first.returncode == 0, first.stderr
        refreshes = protected.authority.refreshes
        assert refreshes >= 1
        protected.authority.access_lifetime = 3600
        second = mcp_run("call", "agent.yaml", "remote__whoami", "{}", cwd=project)
        assert second.returncode == 0, second.stderr
        protected.authority.expire_access_tokens()  # the server forgets them; the client cannot know
        third = mcp_run("call", "agent.yaml", "remote__whoami", "{}", cwd=project)
        assert third.returncode == 0, third.stderr
        assert "authorized" in third.stdout
        assert protected.authority.refreshes == refreshes + 2
        assert protected.authority.authorizations == 1


def test_a_revoked_login_means_a_run_skips_the_server_with_one_warning_naming_the_login_command(
    project: Path, protected: Protected
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    logged_in(project)
    protected.authority.revoke_everything()
    listed = mcp_run("tools", "agent.yaml", "--json", cwd=project)
    assert listed.returncode == 1, listed.stderr  # its only server could not start
    assert json.loads(listed.stdout) == []
    assert "error: no server could start (1 declared)" in listed.stderr
    hint = "mcp-run auth login agent.yaml remote"
    assert listed.stderr.count(hint) == 1, listed.stderr
    assert "Traceback" not in listed.stderr
    write_manifest(project, {"remote": {**remote(protected.url), "required": True}})
    failed = invoke("tools", "agent.yaml", cwd=project)
    assert failed.exit_code == 1
    assert hint in failed.stderr
    status = invoke("auth", "status", "agent.yaml", cwd=project)
    assert status.exit_code == 0, status.stderr
    assert f"remote: needs login (run `{hint}`)" in status.stdout


def test_status_and_login_tell_logged_in_from_needs_login_from_no_login_needed(
    project: Path, protected: Protected, serve_http: Callable[..., str]
) -> None:
    from mcp_servers import demo as demo_server

    write_manifest(project, {"remote": remote(protected.url, scopes=["mcp"]),
                             "open": {"url": serve_http(demo_server.build())}})
    open_login = invoke("auth", "login", "agent.yaml", "open", "--no-browser", cwd=project)
    assert open_login.exit_code == 0, open_login.stderr
    assert "open: no login needed" in open_login.stdout
    before = invoke("auth", "status", "agent.yaml", cwd=project)
    assert "remote: needs login" in before.stdout and "open: no login needed" in before.stdout
    logged_in(project)
    after = invoke("auth", "status", "agent.yaml", cwd=project)
    assert after.exit_code == 0, after.stderr
    assert "remote: logged in (scopes: mcp, token expires" in after.stdout


def test_status_exits_1_when_a_server_cannot_be_reached(project: Path, protected: Protected) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    write_manifest(project, {"remote": remote(protected.url), "gone": {"url": nobody}})
    status = invoke("auth", "status", "agent.yaml", cwd=project)
    assert status.exit_code == 1, status.stdout
    assert "remote: needs login" in status.stdout and "gone: cannot connect: " in status.stdout
    write_manifest(project, {"remote": remote(protected.url)})
    assert invoke("auth", "status", "agent.yaml", cwd=project).exit_code == 0


def test_logout_revokes_the_tokens_and_deletes_the_stored_login(
    project: Path, protected: Protected, token_folder: Path
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    logged_in(project)
    out = invoke("auth", "logout", "agent.yaml", "remote", cwd=project)
    assert out.exit_code == 0, out.stderr
    assert "remote: logged out (revoked at the server)" in out.stdout
    assert list(token_folder.glob("*.json")) == []  # locks/ may stay: a lock holds no secret
    assert protected.authority.revocations == 2 and protected.authority.issued_tokens() == []
    again = invoke("auth", "logout", "agent.yaml", "remote", cwd=project)
    assert "remote: no stored login" in again.stdout


def test_client_credentials_need_no_login_and_the_secret_is_never_shown(
    project: Path, protected: Protected
) -> None:
    secret = TOKEN_PREFIX + "client-secret"
    protected.authority.add_machine_client("robot", secret)
    write_manifest(project, {"remote": {"url": protected.url, "auth": {
        "grant": "client_credentials", "client_id": "robot", "client_secret": "${ROBOT_SECRET}"}}})
    called = mcp_run("--debug", "call", "agent.yaml", "remote__whoami", "{}", cwd=project,
                     env={"ROBOT_SECRET": secret})
    assert called.returncode == 0, called.stderr
    assert "authorized" in called.stdout
    assert protected.authority.authorizations == 0
    assert TOKEN_PREFIX not in called.stdout + called.stderr


def test_a_redirect_with_the_wrong_issuer_fails_the_login(project: Path) -> None:
    with serve_protected(wrong_iss=True) as protected:
        write_manifest(project, {"remote": remote(protected.url)})
        status, output, _ = login(project)
        assert status == 1
        assert "iss mismatch" in output
        spec = load_manifest(project / "agent.yaml").manifest.servers["remote"]
        assert isinstance(spec, HttpServerSpec)
        record = token_record(spec)
        assert record is not None and record.login() is None


def test_a_refused_login_fails_the_login_and_says_why(project: Path, protected: Protected) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    refuse = "error=access_denied&error_description=denied+by+the+user"
    status, output, _ = login(project, tamper=lambda location: re.sub(r"code=[^&]+", refuse, location))
    assert status == 1
    assert "the authorization server refused the login: denied by the user" in output
    assert protected.authority.issued_tokens() == []


def test_a_redirect_with_a_forged_state_is_ignored_and_the_login_waits_for_its_own(
    project: Path, protected: Protected
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    child = spawn_login(project)
    child.expect(URL)
    url = child.after
    state = re.search(r"state=([^&]+)", url)
    assert state is not None
    forged = follow_login(url, lambda location: re.sub(r"state=[^&]+", "state=forged", location))
    assert forged.status_code == 400
    assert "not completed" in forged.text and "Logged in" not in forged.text
    stateless = follow_login(url, lambda location: re.sub(r"state=[^&]+&?", "", location) + "&error=denied")
    assert stateless.status_code == 400 and "Logged in" not in stateless.text
    assert child.isalive()
    assert "Logged in" in follow_login(url).text
    status, output = finish(child)
    assert status == 0, output
    assert "remote: logged in" in output
    assert state.group(1) not in output.replace(url, "")


async def _refuse_everything(scope: Scope, receive: Receive, send: Send) -> None:
    """A server that wants a token and publishes no OAuth metadata at all (every path: 401)."""
    if scope["type"] != "http":
        return
    headers = [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def test_a_login_to_a_server_without_oauth_metadata_warns_before_it_waits(project: Path) -> None:
    with serve_app(_refuse_everything) as server:
        write_manifest(project, {"remote": remote(server.url("/mcp"), client_id="pre-registered")})
        child = spawn_login(project, "--timeout", "2")
        child.expect("publishes no OAuth metadata")
        child.expect(URL)
        status, _ = finish(child)
    assert status == 1


def test_a_redirect_that_never_comes_times_out_with_a_clear_message(
    project: Path, protected: Protected
) -> None:
    write_manifest(project, {"remote": remote(protected.url)})
    child = spawn_login(project, "--timeout", "2")
    child.expect(URL)
    status, output = finish(child)
    assert status == 1
    assert "no login redirect reached http://127.0.0.1:" in output and "within 2s" in output


async def test_a_step_up_asks_once_for_the_wider_scope_and_never_loops(
    project: Path, token_folder: Path
) -> None:
    with serve_protected() as protected:
        approver = Approver()
        with interacting(approver), anyio.fail_after(60):
            async with open_remote(project, protected.url) as fleet:
                result = await fleet.connections["remote"].call_tool("admin_report", {})
                assert not result.is_error
                assert result.content[0].text == "admin report"  # type: ignore[union-attr]
        assert protected.authority.step_up_refusals == 1
        assert len(approver.urls) == 2 and "scope=mcp+admin" in approver.urls[1]


async def test_a_step_up_that_is_refused_again_ends_the_call_instead_of_looping(
    project: Path, token_folder: Path
) -> None:
    with serve_protected(grantable_scopes=["mcp"]) as protected:
        approver = Approver()
        with interacting(approver), anyio.fail_after(60):
            async with open_remote(project, protected.url) as fleet:
                with pytest.raises(ServerRequestError):  # the 403 answer, not another login
                    await fleet.connections["remote"].call_tool("admin_report", {})
        assert protected.authority.step_up_refusals == 2
        assert len(approver.urls) == 2


async def test_an_sse_server_logs_in_the_same_way(project: Path, token_folder: Path) -> None:
    with serve_protected(transport="sse") as protected:
        approver = Approver()
        with interacting(approver), anyio.fail_after(60):
            async with open_remote(project, protected.url, transport="sse") as fleet:
                result = await fleet.connections["remote"].call_tool("whoami", {})
        assert result.content[0].text == "authorized"  # type: ignore[union-attr]
        assert len(approver.urls) == 1 and protected.authority.authorizations == 1


async def test_calls_on_an_authorized_server_overlap(project: Path, token_folder: Path) -> None:
    with serve_protected(json_response=True) as protected:
        with interacting(Approver()), anyio.fail_after(60):
            async with open_remote(project, protected.url) as fleet:
                connection = fleet.connections["remote"]
                answers: list[str] = []

                async def call(name: str) -> None:
                    result = await connection.call_tool(name, {})
                    answers.append(result.content[0].text)  # type: ignore[union-attr]

                async with anyio.create_task_group() as group:
                    group.start_soon(call, "wait_for_release")
                    await anyio.wait_all_tasks_blocked()
                    group.start_soon(call, "release")
        assert sorted(answers) == ["done", "released"]


async def test_a_server_without_an_auth_block_is_authorized_after_a_bearer_challenge(
    project: Path, token_folder: Path
) -> None:
    with serve_protected() as protected:
        write_manifest(project, {"remote": {"url": protected.url}})
        spec = load_manifest(project / "agent.yaml").manifest.servers["remote"]
        assert isinstance(spec, HttpServerSpec) and spec.auth is None
        approver = Approver()
        with interacting(approver), anyio.fail_after(60):
            async with open_fleet({"remote": spec}, base_dir=project, state_dir=project / "state") as fleet:
                assert {tool.name for tool in fleet.connections["remote"].tools} >= {"whoami"}
        assert len(approver.urls) == 1 and "redirect_uri=http%3A%2F%2F127.0.0.1%3A33418" in approver.urls[0]


async def test_requests_rejected_together_share_one_refresh(project: Path, token_folder: Path) -> None:
    with serve_protected() as protected:
        with interacting(Approver()), anyio.fail_after(60):
            async with open_remote(project, protected.url) as fleet:
                connection = fleet.connections["remote"]
                protected.authority.expire_access_tokens()
                answers: list[str] = []

                async def call() -> None:
                    result = await connection.call_tool("whoami", {})
                    answers.append(result.content[0].text)  # type: ignore[union-attr]

                async with anyio.create_task_group() as group:
                    for _ in range(4):
                        group.start_soon(call)
        assert answers == ["authorized"] * 4
        assert protected.authority.refreshes == 1 and protected.authority.authorizations == 1


async def test_watch_mode_picks_up_a_login_made_in_another_terminal(
    project: Path, protected: Protected
) -> None:
    write_scripted_manifest(project, protected.url)
    async with load_agent(project / "agent.yaml") as runtime, anyio.create_task_group() as group:
        stop, ready, logged_in = anyio.Event(), anyio.Event(), anyio.Event()

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "reload" and "remote__whoami" in runtime.catalog.entries:
                logged_in.set()

        group.start_soon(lambda: watch_and_reload(runtime, on_event, stop=stop, ready=ready))
        with anyio.fail_after(30):
            await ready.wait()
        assert "remote__whoami" not in runtime.catalog.entries
        status, output, _ = await anyio.to_thread.run_sync(login, project)
        assert status == 0, output
        with anyio.fail_after(60):
            await logged_in.wait()
        result = await runtime.caller.call("remote__whoami", {})
        assert "authorized" in str(result.content)
        stop.set()


async def test_token_refreshes_of_a_running_server_are_followed_but_reload_nothing(
    project: Path, protected: Protected
) -> None:
    write_scripted_manifest(project, protected.url)
    status, output, _ = await anyio.to_thread.run_sync(login, project)
    assert status == 0, output
    manifest = (project / "agent.yaml").resolve()
    async with load_agent(manifest) as runtime:
        spec = runtime.manifest.servers["remote"]
        assert isinstance(spec, HttpServerSpec)
        record = token_record(spec)
        assert record is not None
        token_file = record.path.resolve()
        assert token_file in runtime.files and not runtime.waits_for_login("remote")
        assert runtime.only_token_refreshes({token_file})
        assert not runtime.only_token_refreshes({token_file, manifest})


async def test_an_edited_auth_block_restarts_its_server(project: Path, protected: Protected) -> None:
    write_manifest(project, {"remote": remote(protected.url, scopes=["read"])})
    async with load_agent(project / "agent.yaml", model=False) as runtime:
        assert runtime.waits_for_login("remote")
        write_manifest(project, {"remote": remote(protected.url, scopes=["read", "admin"])})
        report = await reload_runtime(runtime, changed_files={project / "agent.yaml"})
        # Started again with the new scopes; still without a login, it is reported failed.
        assert report.restarted == [] and "needs a login" in report.failed["remote"]


async def test_a_run_never_waits_for_a_browser(project: Path, protected: Protected) -> None:
    with anyio.fail_after(60), pytest.raises(LoginRequiredError) as caught:
        async with open_remote(project, protected.url, required=True):
            pass
    assert caught.value.server == "remote"


async def test_a_state_mismatch_never_names_the_expected_state(project: Path, protected: Protected) -> None:
    approver = Approver()

    class Forger:
        async def authorize(self, server: str, url: str, port: int) -> AuthorizationCodeResult:
            approved = await approver.authorize(server, url, port)
            return approved.model_copy(update={"state": "forged"})

    with anyio.fail_after(60), interacting(Forger()), pytest.raises(AuthError) as caught:
        async with open_remote(project, protected.url, required=True):
            pass
    expected = parse_qs(urlsplit(approver.urls[0]).query)["state"][0]
    assert expected not in str(caught.value)
    assert "state is not the one of this login" in str(caught.value)


async def test_a_run_without_a_stored_login_never_registers_a_client(
    project: Path, protected: Protected
) -> None:
    with anyio.fail_after(60), pytest.raises(LoginRequiredError):
        async with open_remote(project, protected.url, required=True):
            pass
    assert protected.authority.clients == {}


def test_status_and_runs_without_a_login_never_register_and_name_the_login_command(
    project: Path, protected: Protected
) -> None:
    write_manifest(project, {"remote": {**remote(protected.url), "required": True}})
    status = invoke("auth", "status", "agent.yaml", cwd=project)
    assert "remote: needs login (run `mcp-run auth login agent.yaml remote`)" in status.stdout
    listed = invoke("tools", "agent.yaml", cwd=project)
    assert listed.exit_code == 1
    assert "mcp-run auth login agent.yaml remote" in listed.stderr
    assert protected.authority.clients == {}
    logged_in(project)
    registered = dict(protected.authority.clients)
    assert len(registered) == 1
    spawn = spawn_login(project, "--force")
    spawn.expect(URL)
    follow_login(spawn.after)
    assert finish(spawn)[0] == 0
    assert protected.authority.clients == registered


def test_no_token_appears_in_any_output_log_or_event(project: Path, protected: Protected) -> None:
    write_scripted_manifest(project, protected.url)
    status, output, _ = login(project)
    assert status == 0
    outputs = [output]
    protected.authority.expire_access_tokens()  # a refresh happens on the way, too
    runs = (("--debug", "agent.yaml", "-p", "hi", "--json"), ("--debug", "tools", "agent.yaml", "--json"),
            ("--debug", "call", "agent.yaml", "remote__whoami", "{}"), ("auth", "status", "agent.yaml"))
    for args in runs:
        result = mcp_run(*args, cwd=project)
        assert result.returncode == 0, result.stderr
        outputs += [result.stdout, result.stderr]
    assert len(protected.authority.issued_tokens()) >= 2
    leaked = [text for text in outputs if TOKEN_PREFIX in text]
    assert leaked == []
    logs = [path for path in project.rglob("*") if path.is_file()]
    assert [path for path in logs if TOKEN_PREFIX in path.read_text(errors="replace")] == []


def test_an_auth_block_is_validated_and_every_problem_located() -> None:
    text = (
        "version: 1\nname: x\nservers:\n"
        "  remote:\n    url: http://127.0.0.1:1/mcp\n    auth:\n"
        "      grant: client_credentials\n      callback_port: 70000\n      scope: [mcp]\n"
    )
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text, file="agent.yaml")
    problems = {(problem.line, problem.path) for problem in caught.value.problems}
    assert (8, "servers.remote.auth.callback_port") in problems
    assert (9, "servers.remote.auth.scope") in problems
    fixed = text.replace("      callback_port: 70000\n      scope: [mcp]\n", "")
    with pytest.raises(ManifestError) as caught:
        parse_manifest(fixed, file="agent.yaml")
    assert "client_credentials needs client_id and client_secret" in str(caught.value)
    with_secret = fixed.replace("grant: client_credentials", "client_id: me\n      client_secret: ${S}")
    secret = parse_manifest(with_secret, file="agent.yaml", environ={"S": "canary-secret"})
    spec = secret.manifest.servers["remote"]
    assert "canary-secret" not in repr(spec) and "canary-secret" not in repr(secret.manifest)


@pytest.mark.parametrize(
    ("server", "line", "message"),
    [
        ("  remote:\n    url: http://127.0.0.1:1/mcp\n    auth:\n      grant: client-credentials\n", 7,
         "(did you mean 'client_credentials'?)"),
        ("  local:\n    command: echo\n    auth: {}\n", 6,
         "unknown key 'auth' ('auth' is for http/sse servers)"),
        ("  remote:\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: Bearer x}\n"
         "    auth: {}\n", 5,
         "'auth' and an 'Authorization' header both authorize the requests: keep one"),
    ],
    ids=["a-misspelled-grant", "auth-on-a-stdio-server", "auth-beside-a-static-authorization-header"],
)
def test_a_misplaced_or_misspelled_auth_setting_is_a_located_error_that_says_what_to_do(
    server: str, line: int, message: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(f"version: 1\nname: x\nservers:\n{server}", file="agent.yaml")
    problems = caught.value.problems
    assert [(problem.line, message in problem.message) for problem in problems] == [(line, True)]


async def test_two_processes_sharing_a_login_never_log_each_other_out_when_refresh_tokens_rotate(
    project: Path, token_folder: Path
) -> None:
    """Two runs on one stored login (two serve instances, or serve and -p): the one whose token
    was refreshed by the other takes the newer tokens from the store instead of spending its own
    used refresh token, and the store is never emptied of a good login."""
    with serve_protected() as protected:
        with anyio.fail_after(90):
            async with AsyncExitStack() as runs:
                with interacting(Approver()):  # the first run logs in
                    first = await runs.enter_async_context(open_remote(project, protected.url))
                spec = load_manifest(project / "agent.yaml").manifest.servers["remote"]
                assert isinstance(spec, HttpServerSpec)
                # The second may ask nobody to log in: it has to manage with what is stored.
                second = await runs.enter_async_context(
                    open_fleet({"remote": spec}, base_dir=project, state_dir=project / ".mcp-run"))
                protected.authority.expire_access_tokens()
                by_first = await first.connections["remote"].call_tool("whoami", {})
                by_second = await second.connections["remote"].call_tool("whoami", {})
                protected.authority.expire_access_tokens()
                again_by_first = await first.connections["remote"].call_tool("whoami", {})
    answers = [result.content[0].text for result in (by_first, by_second, again_by_first)]  # type: ignore[union-attr]
    assert answers == ["authorized"] * 3
    assert protected.authority.authorizations == 1 and protected.authority.refreshes == 2
    record = token_record(spec)
    assert record is not None and record.login() is not None


def test_a_login_after_the_authorization_server_forgot_the_client_registers_a_new_one(
    project: Path, token_folder: Path
) -> None:
    with serve_protected() as protected:
        write_manifest(project, {"remote": remote(protected.url)})
        logged_in(project)
        protected.authority.revoke_everything()  # restarted, with clients and tokens in memory
        protected.authority.clients.clear()
        child = spawn_login(project)
        child.expect(URL)
        before_url = child.before
        follow_login(child.after)
        status, output = finish(child)
        assert status == 0, before_url + output
        assert "refused the client mcp-run registered with it (HTTP 400" in before_url
        assert "registering again" in before_url
        assert len(protected.authority.clients) == 1
        after = invoke("call", "agent.yaml", "remote__whoami", "{}", cwd=project)
        assert after.exit_code == 0 and "authorized" in after.stdout, after.stderr


def test_a_login_whose_callback_port_is_busy_says_so_before_registering_a_client(
    project: Path, protected: Protected
) -> None:
    import socket

    write_manifest(project, {"remote": remote(protected.url)})
    port = yaml.safe_load((project / "agent.yaml").read_text())["servers"]["remote"]["auth"]["callback_port"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        child = spawn_login(project)
        status, output = finish(child)
    assert status != 0 and f"cannot listen for the login redirect on 127.0.0.1:{port}" in output
    assert protected.authority.clients == {}
