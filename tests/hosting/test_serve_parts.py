"""The parts of `mcp-run serve` on their own: the turn scheduler's admission and order, the mapping
of the agent's questions to elicitations and back, addresses, and the listening socket."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import mcp_types as types
import pytest

from runner.errors import BusyError
from runner.hosting.mcp.ask import answered_late
from runner.hosting.mcp.conversations import TurnScheduler
from runner.hosting.mcp.http_wire import (
    GRACEFUL_SHUTDOWN,
    Address,
    bind,
    check_binding,
    parse_address,
    serve_http,
)
from runner.hosting.mcp.relayed_questions import (
    can_elicit,
    elicitation_for,
    question_key,
    refusal,
    resume_value,
)

APPROVAL = {"type": "approval", "tool": "files__delete", "args": {"path": "a"}, "id": "call_1"}
FORM = {"type": "elicitation", "server": "cal", "message": "Which day?", "mode": "form",
        "schema": {"type": "object", "properties": {"day": {"type": "string"}}}}
URL = {"type": "elicitation", "server": "cal", "message": "Sign in", "mode": "url",
       "url": "https://cal.example/in", "elicitation_id": "e1"}


async def test_turns_of_one_thread_run_in_arrival_order_and_others_pass_them() -> None:
    scheduler = TurnScheduler(max_turns=4, max_queued=4)
    order: list[str] = []
    release = anyio.Event()
    told: list[str] = []

    async def turn(thread: str, name: str, hold: bool = False) -> None:
        async def waiting(reason: str) -> None:
            told.append(f"{name}: {reason}")

        async with scheduler.turn(thread, waiting=waiting):
            order.append(f"start {name}")
            if hold:
                await release.wait()
            order.append(f"end {name}")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(turn, "t", "first", True)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(turn, "t", "second")
            group.start_soon(turn, "u", "other")
            await anyio.wait_all_tasks_blocked()
            assert order == ["start first", "start other", "end other"]
            assert scheduler.waiting == 1 and scheduler.running == 1
            release.set()
    assert order[3:] == ["end first", "start second", "end second"]
    assert told == ["second: queued: an earlier turn of this thread is running"]


async def hold(scheduler: TurnScheduler, thread: str, release: anyio.Event) -> None:
    """A turn of ``thread`` that lasts until ``release``."""
    async with scheduler.turn(thread):
        await release.wait()


async def test_past_max_turns_and_max_queued_a_turn_is_refused_at_once() -> None:
    scheduler = TurnScheduler(max_turns=1, max_queued=1)
    release = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(hold, scheduler, "a", release)
            group.start_soon(hold, scheduler, "b", release)
            await anyio.wait_all_tasks_blocked()
            assert scheduler.running == 1 and scheduler.waiting == 1
            with pytest.raises(BusyError) as refused:
                async with scheduler.turn("c"):
                    pass
            assert str(refused.value) == (
                "the agent is busy: it holds 2 requests, as many as it takes (--max-turns 1 may run at once "
                "and --max-queued 1 more may wait): 1 running, 1 waiting for a free turn slot and 0 waiting "
                "behind an earlier turn of their own thread; try again later")
            release.set()
    async with scheduler.turn("c"):  # free again once they are done
        assert scheduler.running == 1


async def test_the_busy_refusal_counts_requests_behind_their_thread_apart_from_those_waiting_for_a_slot(
) -> None:
    # Fewer turns run than slots while more wait than --max-queued: the bound is on the requests
    # held, and those behind an earlier turn of their thread hold no slot.
    scheduler = TurnScheduler(max_turns=2, max_queued=1)
    release = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(hold, scheduler, "t", release)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(BusyError) as refused:
                async with scheduler.turn("u"):
                    pass
            release.set()
    assert str(refused.value) == (
        "the agent is busy: it holds 3 requests, as many as it takes (--max-turns 2 may run at once and "
        "--max-queued 1 more may wait): 1 running, 0 waiting for a free turn slot and 2 waiting behind an "
        "earlier turn of their own thread; try again later")


def test_an_answer_is_late_by_when_this_process_asked_or_else_by_the_checkpoint_its_turn_paused_in() -> None:
    saved = "2026-11-27T10:00:00+00:00"  # the checkpoint's time, as LangGraph writes it
    at_save = 1795773600.0  # the same moment as a timestamp
    assert answered_late(at_save + 50, saved, within=60, now=at_save + 100) is False  # asked here: 50 s ago
    assert answered_late(None, saved, within=60, now=at_save + 100) is True  # another instance asked
    assert answered_late(None, saved, within=60, now=at_save + 30) is False
    assert answered_late(None, None, within=60, now=at_save + 100) is False  # nothing dates it


def test_an_approval_becomes_a_yes_no_form_and_its_answer_a_decision() -> None:
    question = elicitation_for(APPROVAL)
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.message == 'The agent wants to call the tool files__delete with {"path": "a"}. Allow it?'
    yes = types.ElicitResult(action="accept", content={"approve": True})
    no = types.ElicitResult(action="accept", content={"approve": False, "reason": "keep it"})
    assert resume_value(APPROVAL, yes) == {"action": "approve"}
    assert resume_value(APPROVAL, no) == {"action": "deny", "reason": "keep it"}
    assert resume_value(APPROVAL, types.ElicitResult(action="cancel")) == {
        "action": "deny", "reason": "the caller's user chose cancel"}
    assert refusal(APPROVAL)["action"] == "deny"


def test_an_accepted_approval_without_a_yes_or_no_is_denied_as_an_invalid_answer() -> None:
    for content, given in (({}, "nothing"), ({"approve": "yes"}, '"yes"')):
        answer = types.ElicitResult(action="accept", content=content)
        assert resume_value(APPROVAL, answer) == {
            "action": "deny",
            "reason": f"the caller's answer was invalid: 'approve' must be true or false, got {given}",
        }


def test_a_servers_question_keeps_its_form_or_url_and_its_answer() -> None:
    form = elicitation_for(FORM)
    assert isinstance(form, types.ElicitRequestFormParams) and form.requested_schema == FORM["schema"]
    url = elicitation_for(URL)
    assert isinstance(url, types.ElicitRequestURLParams) and url.elicitation_id == "e1"
    answer = types.ElicitResult(action="accept", content={"day": "monday"})
    assert resume_value(FORM, answer) == {"action": "accept", "content": {"day": "monday"}}
    assert resume_value(URL, types.ElicitResult(action="accept")) == {"action": "accept"}
    assert refusal(FORM) == refusal(URL) == {"action": "decline"}
    assert question_key(FORM) != question_key(URL) and question_key(FORM) == question_key(dict(FORM))


def test_a_question_an_agent_of_agents_asks_names_that_agent_beside_the_server() -> None:
    assert elicitation_for(FORM).message == "[cal] Which day?"
    assert elicitation_for({**FORM, "agent": "helper"}).message == "[helper · cal] Which day?"
    assert elicitation_for({**URL, "agent": "helper"}).message == "[helper · cal] Sign in"
    sampling = {"type": "sampling", "server": "cal", "max_tokens": 50, "messages": [], "agent": "helper"}
    assert elicitation_for(sampling).message == (
        "The server cal asks the helper agent's model for a completion (at most 50 tokens). Allow it?")
    assert "asks the agent's model" in elicitation_for({**sampling, "agent": None}).message


def test_only_a_client_that_declared_the_needed_elicitation_mode_is_asked() -> None:
    form_only = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    both = types.ClientCapabilities(elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()))
    assert not can_elicit(None, FORM) and not can_elicit(types.ClientCapabilities(), APPROVAL)
    assert can_elicit(form_only, APPROVAL) and can_elicit(form_only, FORM) and not can_elicit(form_only, URL)
    assert can_elicit(both, URL)


def test_addresses_parse_and_only_loopback_is_served_without_permission() -> None:
    assert parse_address("127.0.0.1:8000") == Address("127.0.0.1", 8000)
    assert parse_address("[::1]:0") == Address("::1", 0)
    assert parse_address(":9000") == Address("127.0.0.1", 9000)
    for loopback in ("127.0.0.1:1", "localhost:1", "[::1]:1", "127.9.9.9:1"):
        check_binding(parse_address(loopback), allow_remote=False, token=None)
    with pytest.raises(ValueError, match="needs --allow-remote"):
        check_binding(parse_address("10.1.2.3:80"), allow_remote=False, token="t")
    with pytest.raises(ValueError, match="needs a bearer token"):
        check_binding(parse_address("example.org:80"), allow_remote=True, token=None)
    check_binding(parse_address("0.0.0.0:80"), allow_remote=True, token="t")
    for bad in ("127.0.0.1", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ValueError, match="is not HOST:PORT"):
            parse_address(bad)


def test_the_listening_socket_sends_small_writes_at_once() -> None:
    sock = bind(Address("127.0.0.1", 0))
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        sock.close()


async def test_a_hurried_http_stop_waits_for_no_running_turn_yet_ends_the_apps_lifespan() -> None:
    from contextlib import asynccontextmanager

    from mcp.server.lowlevel import Server

    ready, stopping, hurry, ended = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()
    lifespan_ended = anyio.Event()

    @asynccontextmanager
    async def lifespan(_: Any) -> Any:  # left pending, it is torn down as an error when the loop closes
        try:
            yield {}
        finally:
            lifespan_ended.set()

    async def stop_turns() -> None:  # a turn that never answers its caller
        stopping.set()
        await anyio.sleep_forever()

    async def serve(scope: anyio.CancelScope) -> None:
        with scope:
            await serve_http(Server("hurried", lifespan=lifespan), bind(parse_address("127.0.0.1:0")),
                             on_ready=lambda url: ready.set(), on_stop=stop_turns, hurry=hurry)
        ended.set()

    serving = anyio.CancelScope()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(serve, serving)
            await ready.wait()
            serving.cancel()  # the first Ctrl-C: the graceful stop waits for the turn
            await stopping.wait()
            hurry.set()  # the second one
            with anyio.fail_after(GRACEFUL_SHUTDOWN / 2):  # not the graceful wait
                await ended.wait()
    assert lifespan_ended.is_set()
