"""``mcp-run web`` in a real browser (Debian's Chromium through Playwright): the conversation with
streamed answers and tool calls as cards, threads, questions answered in the page, and the page's
defences (the token, the Origin and Host checks, escaping, the Content-Security-Policy).

One ``mcp-run web`` process serves the module's tests; each test uses its own thread.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import BROWSER_TIMEOUT_MS
from builders import ROOT, invoke, server, write_manifest
from child_processes import SESSION_PROCESSES
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from playwright.sync_api import Page, expect
from web_pages import ServedPage, card, request, send, start_page, stop_page, web_page
from web_pages import open_page as open_agent_page

from runner.store.checkpointers import SqliteCheckpointer
from runner.tools.form_answers import content_problem

pytestmark = pytest.mark.timeout(300)
expect.set_options(timeout=BROWSER_TIMEOUT_MS)  # a loaded machine: generous bounds, never a sleep


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("web")
    notes = {"command": "python", "args": [str(ROOT / "examples" / "notes_server.py")],
             "env": {"NOTES_FILE": str(folder / "notes.json")}}
    return write_manifest(folder, {
        "notes": notes,
        "demo": server("demo", tools={"approve": ["echo"]}),
        "asking": server("asking"),
        "hostile": server("web_hostile"),
        "media": server("media"),
        "broken": server("exits", restart={"max_attempts": 1, "backoff": "10ms"}),
        # Never starts: its calls are made again on its fallback (started: demo).
        "mirrored": {"command": "mcp-run-no-such-command", "fallback": "demo", "tools": {"only": ["add"]}},
    }, name="web-test", model="offline", checkpointer="sqlite:///state.sqlite", agent={"handoffs": ["calc"]},
        agents={"calc": {"description": "Does arithmetic.", "model": "offline",
                         "tools": ["notes__calculate"]}})


@pytest.fixture(scope="module")
def served(agent: Path) -> Iterator[ServedPage]:
    with web_page(agent) as running:
        # Kept for every test of the module: the servers it restarts are its own, not a test's
        # orphans (its Ctrl-C stop, servers included, is test_ctrl_c_stops_... below).
        SESSION_PROCESSES.add(running.process.pid)
        try:
            yield running
        finally:
            SESSION_PROCESSES.discard(running.process.pid)


def open_page(page: Page, served: ServedPage) -> None:
    open_agent_page(page, served, "web-test")


# --------------------------------------------------------------------------- who may drive the agent


def test_a_request_without_the_token_or_from_another_site_is_refused_403(served: ServedPage) -> None:
    assert request(served, "/")[0] == 403  # the page itself needs the printed address's token
    assert request(served, "/?token=wrong")[0] == 403
    assert request(served, "/api/agent")[0] == 403
    assert request(served, "/api/agent", token="wrong")[0] == 403
    turn = {"thread": "refused", "text": 'notes__calculate {"expression": "1+1"}'}
    assert request(served, "/api/turn", body=turn)[0] == 403
    foreign = {"Origin": "https://attacker.example"}
    assert request(served, "/api/turn", token=served.token, body=turn, headers=foreign)[0] == 403
    rebound = {"Host": "attacker.example"}  # DNS rebinding: another name resolving to loopback
    assert request(served, "/api/agent", token=served.token, headers=rebound)[0] == 403
    assert request(served, f"/?token={served.token}", headers=rebound)[0] == 403
    # The refused turn never ran: the thread does not exist.
    status, _, body = request(served, "/api/threads", token=served.token)
    assert status == 200 and "refused" not in {row["id"] for row in json.loads(body)["threads"]}
    status, _, body = request(served, "/api/agent", token=served.token,
                              headers={"Origin": served.base})
    assert status == 200 and json.loads(body)["name"] == "web-test"
    bearer = {"Authorization": f"Bearer {served.token}"}  # as serve takes it
    assert request(served, "/api/agent", headers=bearer)[0] == 200
    assert request(served, "/api/agent", headers={"Authorization": "Bearer wrong"})[0] == 403


def test_the_page_forbids_inline_script_and_embedding_and_sends_no_referrer(served: ServedPage) -> None:
    status, headers, body = request(served, f"/?token={served.token}")
    assert status == 200
    policy = headers["content-security-policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert headers["referrer-policy"] == "no-referrer"
    assert b"<script>" not in body and b" on" not in body.split(b"<body>")[1].replace(b" only", b"")


# --------------------------------------------------------------------------- the conversation


def test_enter_sends_and_the_answer_streams_with_the_tool_call_as_a_card(page: Page,
                                                                          served: ServedPage) -> None:
    open_page(page, served)
    box = page.get_by_label("Message")
    expect(box).to_be_focused()
    box.type("first line")
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "first line\nsecond line"  # Shift-Enter: a new line, nothing sent
    expect(page.locator(".message.user")).to_have_count(0)
    box.fill('notes__calculate {"expression": "6*7"}')
    box.press("Enter")
    calculated = card(page, "notes__calculate")
    expect(calculated.locator(".status")).to_have_text("success")
    expect(calculated.locator(".server")).to_contain_text("on notes")
    expect(calculated.locator(".args dt")).to_have_text("expression")
    expect(calculated.locator(".args dd")).to_have_text("6*7")
    # The structured content is rendered as labelled values, not dumped.
    expect(calculated.locator(".result dl.structured dt")).to_have_text("result")
    expect(calculated.locator(".result dl.structured dd")).to_have_text("42")
    expect(calculated.locator(".duration")).to_have_text(re.compile(r"^\d+ ms$"))
    calculated.locator("summary", has_text="Raw JSON").click()
    raw = json.loads(calculated.locator(".raw").inner_text())
    assert raw["call"]["args"] == {"expression": "6*7"} and raw["result"]["text"] == "42"
    expect(page.locator(".message.assistant.final .text")).to_have_text("notes__calculate returned: 42")
    expect(box).to_have_value("")


UNLABELLED_CONTROLS = """() => [...document.querySelectorAll("input, select, textarea, button")]
    .filter((control) => control.getClientRects().length > 0)
    .filter((control) => !(control.labels && control.labels.length) && !control.getAttribute("aria-label")
                         && !control.textContent.trim())
    .map((control) => control.outerHTML)"""


def test_every_control_has_a_label_and_tab_goes_from_the_message_to_send(page: Page,
                                                                         served: ServedPage) -> None:
    open_page(page, served)
    box = page.get_by_label("Message")
    expect(box).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Send")).to_be_focused()
    send(page, 'demo__echo {"text": "labelled"}')  # a question, and a "try it" form, open too
    question = page.locator(".question")
    question.get_by_role("button", name="Edit arguments").click()
    page.get_by_label("Search tools").fill("add")
    page.get_by_role("button", name="Try demo__add").click()
    expect(page.locator("#try-area form")).to_be_visible()
    assert page.evaluate(UNLABELLED_CONTROLS) == []
    question.get_by_role("button", name="Approve").click()  # the thread is left answered
    expect(question).to_have_count(0)


def test_a_turns_timeline_shows_its_model_steps_and_tool_calls_with_their_tokens(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'notes__calculate {"expression": "8*8"}')
    timeline = page.locator(".timeline").last
    timeline.locator("summary", has_text="Timeline of this turn").click()
    rows = timeline.locator(".timeline-row")
    expect(rows.locator(".timeline-label")).to_have_text(["model step 1", "notes__calculate", "model step 2"])
    steps = [rows.nth(index).locator(".timeline-facts").inner_text() for index in (0, 2)]
    spent = [int(re.search(r"(\d+) tokens", facts).group(1)) for facts in steps]  # type: ignore[union-attr]
    assert all(re.match(r"\d+ ms · \d+ tokens \(\d+ in, \d+ out\) · cost unknown", facts) for facts in steps)
    expect(rows.nth(1).locator(".timeline-facts")).to_have_text(re.compile(r"^\d+ ms · success$"))
    expect(timeline.locator(".timeline-total")).to_have_text(re.compile(
        rf"^turn: {sum(spent)} tokens .* · cost unknown · 2 model steps, 1 tool call$"))
    bars = rows.locator(".bar").evaluate_all("bars => bars.map(bar => bar.getBoundingClientRect().width)")
    assert all(width > 0 for width in bars)
    # What each model step was given: the system prompt the agent renders, the tools offered.
    given = timeline.locator(".timeline-given")
    expect(given).to_have_count(2)
    given.first.locator("summary").click()
    expect(given.first.locator(".given-prompt")).to_contain_text("web-test")
    expect(given.first.locator(".given-tools code")).to_contain_text(["notes__calculate", "demo__echo"])
    expect(given.first.locator("summary")).to_have_text(
        re.compile(r"what this step was given: \d+ tools, 2 messages"))
    given.nth(1).locator("summary").click()
    expect(given.nth(1).locator("summary")).to_have_text(re.compile(r", 4 messages$"))


def test_an_edited_approval_shows_the_arguments_that_ran_and_its_turn_has_one_timeline_kept_on_reload(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'demo__echo {"text": "asked"}')
    question = page.locator(".question")
    question.get_by_role("button", name="Edit arguments").click()
    question.get_by_label("Arguments (JSON)").fill('{"text": "edited"}')
    question.get_by_role("button", name="Run with these arguments").click()
    echoed = card(page, "demo__echo")
    expect(echoed.locator(".result-text").first).to_have_text("edited")
    expect(echoed.locator(".args h4")).to_have_text("Arguments (edited before it ran)")
    expect(echoed.locator(".args dd")).to_have_text("edited")
    echoed.locator("summary", has_text="Raw JSON").click()
    raw = json.loads(echoed.locator(".raw").inner_text())
    assert raw["call"]["args"] == {"text": "edited"} and raw["call"]["asked_args"] == {"text": "asked"}
    expect(page.locator("#log")).not_to_have_attribute("aria-busy", "true")
    labels = ["model step 1", "demo__echo", "model step 2"]
    timeline = page.locator(".timeline")
    expect(timeline).to_have_count(1)  # one per turn, the approval's wait included
    timeline.locator("summary", has_text="Timeline of this turn").click()
    expect(timeline.locator(".timeline-label")).to_have_text(labels)
    expect(timeline.locator(".timeline-total")).to_have_text(re.compile(r"· 2 model steps, 1 tool call$"))
    facts = timeline.locator(".timeline-facts").all_inner_texts()
    duration = echoed.locator(".duration").inner_text()

    page.reload()  # reopened: the timeline and the card's duration come back as they were
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    page.locator("#thread-list li", has_text='demo__echo {"text": "asked"}').locator(".thread-open").click()
    reopened = card(page, "demo__echo")
    expect(reopened.locator(".duration")).to_have_text(duration)
    timeline = page.locator(".timeline")
    expect(timeline).to_have_count(1)
    timeline.locator("summary", has_text="Timeline of this turn").click()
    expect(timeline.locator(".timeline-label")).to_have_text(labels)
    expect(timeline.locator(".timeline-facts")).to_have_text(facts)
    expect(timeline.locator(".timeline-given")).to_have_count(2)


def test_addresses_in_results_and_answers_are_links_and_control_characters_are_shown(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, r'demo__echo {"text": "see https://example.com/a?b=1. not javascript:alert(1) \u001b[31mred"}')
    page.locator(".question").get_by_role("button", name="Approve").click()
    result = card(page, "demo__echo").locator(".result-text").first
    link = result.get_by_role("link", name="https://example.com/a?b=1")
    expect(link).to_have_attribute("href", "https://example.com/a?b=1")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(link).to_have_attribute("target", "_blank")
    expect(result.locator("a")).to_have_count(1)  # javascript: stays text
    expect(result.locator(".control")).to_have_text("\\x1b")
    expect(result).to_contain_text("\\x1b[31mred")
    answer = page.locator(".message.assistant.final .text")
    expect(answer.get_by_role("link", name="https://example.com/a?b=1")).to_have_count(1)
    expect(answer.locator(".control")).to_have_text("\\x1b")
    shown = page.evaluate("""async () => {
        const { renderValue } = await import("/static/dom.js");
        return renderValue({ none: [] }).querySelector("dd").textContent;
    }""")
    assert shown == "empty"


def test_a_message_refused_or_not_delivered_is_marked_not_sent_and_a_lost_server_is_said(
        page: Page, served: ServedPage) -> None:
    page.route("**/api/notices", lambda route: route.abort())  # as if the server were gone
    open_page(page, served)
    expect(page.locator("#connection")).to_have_text(re.compile("^not connected: the agent is not reachable"))
    send(page, 'demo__echo {"text": "waiting"}')
    question = page.locator(".question")
    expect(question.get_by_role("button", name="Approve")).to_be_visible()
    send(page, "meanwhile")  # the thread waits for its answer: refused
    refused = page.locator(".message.user", has_text="meanwhile")
    expect(refused).to_have_class(re.compile("not-sent"))
    expect(refused.locator(".not-sent-reason")).to_have_text(
        "Not sent: this thread waits for an answer to its question first")
    page.route("**/api/turn", lambda route: route.abort())
    question.get_by_role("button", name="Approve").click()
    expect(question.locator(".error").last).to_contain_text("the agent is not reachable")
    page.unroute("**/api/turn")
    question.get_by_role("button", name="Approve").click()
    expect(card(page, "demo__echo").locator(".result-text").first).to_have_text("waiting")


def test_an_image_a_tool_returns_is_shown_in_its_card(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, "demo__image {}")
    image = card(page, "demo__image").locator("img.result-image")
    expect(image).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    assert image.evaluate("img => img.complete && img.naturalWidth") == 1


def test_a_call_made_again_on_its_servers_fallback_says_so_in_its_card(page: Page,
                                                                       served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'mirrored__add {"a": 2, "b": 3}')
    added = card(page, "mirrored__add")
    expect(added.locator(".status")).to_have_text("success")
    expect(added.locator(".result-text").first).to_have_text("5")
    expect(added.locator(".retry-count")).to_have_text("1 retry")
    expect(added.locator(".fallback-used")).to_have_text("fallback used: demo")
    expect(added.locator(".retries li")).to_have_text([re.compile(
        r"^made again on demo \(the fallback of mirrored\): tools/call 'add': the server has failed")])
    added.locator("summary", has_text="Raw JSON").click()
    [retry] = json.loads(added.locator(".raw").inner_text())["retries"]
    assert (retry["type"], retry["server"], retry["fallback"]) == ("tool_retry", "mirrored", "demo")
    page.get_by_role("button", name="New thread").click()  # reopened, its card says it still
    page.locator("#thread-list li", has_text="mirrored__add").locator(".thread-open").click()
    expect(added.locator(".fallback-used")).to_have_text("fallback used: demo")
    expect(added.locator(".retry-count")).to_have_text("1 retry")
    calculated = card(page, "notes__calculate")  # a call answered at once says nothing of retries
    send(page, 'notes__calculate {"expression": "1+1"}')
    expect(calculated.locator(".status")).to_have_text("success")
    expect(calculated.locator(".retry-count")).to_be_hidden()
    expect(calculated.locator(".fallback-used")).to_be_hidden()


def test_a_sound_a_tool_returns_is_playable_in_its_card(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, "media__chime {}")
    chimed = card(page, "media__chime")
    sound = chimed.locator("audio")
    expect(sound).to_have_attribute("src", re.compile(r"^data:audio/wav;base64,"))
    expect(sound).to_have_attribute("controls", "")
    page.wait_for_function("node => node.readyState >= 1 && node.duration > 0", arg=sound.element_handle())
    expect(chimed.locator(".result-text")).to_have_text(["a chime"])


def test_threads_are_listed_resumed_renamed_and_deleted(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'notes__calculate {"expression": "1+2"}')
    expect(page.locator(".message.assistant.final")).to_contain_text("returned: 3")
    thread = page.locator("#thread-list li", has_text='notes__calculate {"expression": "1+2"}')
    expect(thread).to_have_count(1)
    page.get_by_role("button", name="New thread").click()
    expect(page.locator("#log > *")).to_have_count(0)
    thread.locator(".thread-open").click()  # resumed: its messages and cards come back
    expect(page.locator(".message.user .text")).to_have_text(['notes__calculate {"expression": "1+2"}'])
    expect(card(page, "notes__calculate").locator(".status")).to_have_text("success")
    thread.get_by_role("button", name=re.compile("^Rename")).click()
    name = page.get_by_label("New name")
    expect(name).to_be_focused()
    name.fill("sums")
    name.press("Enter")
    renamed = page.locator("#thread-list li", has_text="sums")
    expect(renamed).to_have_count(1)
    page.reload()  # the name is kept by the server
    expect(page.locator("#thread-list li", has_text="sums")).to_have_count(1)
    kept = page.locator("#thread-list li", has_text="sums")
    expect(kept.locator(".thread-open")).to_have_attribute("title", "sums")  # its whole name on hover
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.locator("#thread-list li", has_text="sums").get_by_role("button", name="Delete sums").click()
    expect(page.locator("#thread-list li", has_text="sums")).to_have_count(0)
    assert asked == ["Delete the thread “sums”? Its conversation cannot be brought back."]


def test_a_name_being_typed_stays_when_the_thread_list_is_reloaded_meanwhile(page: Page,
                                                                             served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'notes__calculate {"expression": "2+5"}')
    expect(page.locator(".message.assistant.final")).to_contain_text("returned: 7")
    expect(page.locator("#thread-list li", has_text="2+5")).to_have_count(1)  # listed after the turn
    held: list[Any] = []
    page.route("**/api/threads*", lambda route: held.append(route))  # reloads wait for the test
    with page.expect_request("**/api/threads*"):
        page.locator("#thread-list li", has_text="2+5").locator(".thread-open").click()
    page.locator("#thread-list li", has_text="2+5").get_by_role("button", name=re.compile("^Rename")).click()
    name = page.get_by_label("New name")
    name.fill("typing")
    # Each reload of the list sets its data-agent: unset, it tells when the held reload has come.
    page.evaluate("() => { document.getElementById('thread-list').dataset.agent = 'unset'; }")
    for route in held:
        route.continue_()
    page.unroute_all()
    page.wait_for_function("() => document.getElementById('thread-list').dataset.agent === 'main'")
    expect(name).to_be_focused()
    expect(name).to_have_value("typing")
    name.press("Escape")
    expect(page.locator("#thread-list li", has_text="2+5").locator(".thread-open")).to_be_visible()


def test_each_agent_of_the_manifest_is_chosen_in_the_page_with_threads_of_its_own(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    chooser = page.get_by_label("Agent")
    expect(chooser.locator("option")).to_have_text(["main", "calc — Does arithmetic."])
    chooser.select_option("calc")
    expect(page.get_by_label("Message")).to_be_focused()
    send(page, 'notes__calculate {"expression": "2*3"}')
    expect(page.locator(".message.assistant.final .text")).to_have_text("notes__calculate returned: 6")
    mine = page.locator("#thread-list li", has_text='notes__calculate {"expression": "2*3"}')
    expect(mine).to_have_count(1)
    chooser.select_option("main")  # the main agent's threads do not include it
    expect(page.locator("#thread-list[data-agent=main]")).to_be_attached()
    expect(mine).to_have_count(0)


LONG_THREAD = 500  # turns
RENDERED_AT_MOST = 80  # turns in the page at once, however long the thread
IN_PAGE_TURNS = "() => document.querySelectorAll('#log .message.user').length"  # one a turn
SCROLL_TO_FIRST_TURN = """(first) => {
    const log = document.getElementById("log");
    log.scrollTop = 0;  // again at each poll: each scroll renders the turns above, moving the view
    return [...log.querySelectorAll(".message.user .text")].some((text) => text.textContent === first);
}"""


def write_long_thread(agent: Path, thread: str, turns: int) -> None:
    """A thread of ``turns`` questions and answers, written into the agent's checkpointer as its
    turns would have left it (not run: 500 turns through the page would be slow)."""
    messages: list[HumanMessage | AIMessage] = []
    for number in range(1, turns + 1):
        messages += [HumanMessage(f"question {number} of the long thread", id=f"q{number}"),
                     AIMessage(f"answer {number}", id=f"a{number}")]
    checkpoint = empty_checkpoint()
    checkpoint["channel_versions"] = {"messages": f"{1:032}.0"}
    checkpoint["channel_values"] = {"messages": messages}
    with SqliteCheckpointer.open(agent.parent / "state.sqlite") as saver:
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint, {"step": 1},
                  checkpoint["channel_versions"])


def test_a_500_turn_thread_renders_only_the_turns_near_view_and_streams_its_next_turn_at_the_end(
        page: Page, served: ServedPage, agent: Path) -> None:
    write_long_thread(agent, "long-thread", LONG_THREAD)
    open_page(page, served)
    page.locator("#thread-list li", has_text="question 1 of the long thread").locator(".thread-open").click()
    log = page.locator("#log")
    answers = log.locator(".message.assistant.final .text")
    expect(log.locator(".message.user .text").last).to_have_text(f"question {LONG_THREAD} of the long thread")
    expect(answers.last).to_be_in_viewport()  # it opens at its end
    assert 0 < page.evaluate(IN_PAGE_TURNS) <= RENDERED_AT_MOST

    page.wait_for_function(SCROLL_TO_FIRST_TURN, arg="question 1 of the long thread")
    first = log.locator(".message.user .text", has_text=re.compile("^question 1 of the long thread$"))
    expect(first).to_be_in_viewport()
    expect(answers.first).to_have_text("answer 1")
    assert page.evaluate(IN_PAGE_TURNS) <= RENDERED_AT_MOST  # the end's turns left the page

    send(page, 'notes__calculate {"expression": "5*5"}')  # the view goes to the end, where it streams
    expect(answers.last).to_have_text("notes__calculate returned: 25")
    expect(answers.last).to_be_in_viewport()
    expect(answers.nth(-2)).to_have_text(f"answer {LONG_THREAD}")  # right after the thread's last turn
    assert page.evaluate(IN_PAGE_TURNS) <= RENDERED_AT_MOST


SCROLL_TO_LAST_TURN = """(last) => {
    const log = document.getElementById("log");
    log.scrollTop = log.scrollHeight;  // again at each poll: each scroll renders the turns below
    return [...log.querySelectorAll(".message.user .text")].some((text) => text.textContent === last);
}"""


def test_a_turn_dropped_and_rendered_again_keeps_its_not_sent_mark_edited_args_links_timeline_and_handoff(
        page: Page, served: ServedPage, agent: Path) -> None:
    write_long_thread(agent, "long-marks", 100)
    open_page(page, served)
    page.locator('#thread-list li[data-thread="long-marks"] .thread-open').click()
    log = page.locator("#log")
    expect(log.locator(".message.user .text").last).to_have_text("question 100 of the long thread")
    send(page, 'demo__echo {"text": "asked"}')
    question = page.locator(".question")
    expect(question.get_by_role("button", name="Approve")).to_be_visible()
    send(page, "meanwhile")  # the thread waits for its answer: refused, marked not sent
    expect(log.locator(".message.user.not-sent")).to_have_count(1)
    question.get_by_role("button", name="Edit arguments").click()
    question.get_by_label("Arguments (JSON)").fill('{"text": "see https://example.com/marks"}')
    question.get_by_role("button", name="Run with these arguments").click()
    expect(card(page, "demo__echo").locator(".result-text").first).to_have_text("see https://example.com/marks")
    send(page, 'handoff_to_calc {"reason": "sums"}')
    expect(log.locator(".message.assistant.final .who").last).to_have_text("calc")
    expect(page.locator("#log")).not_to_have_attribute("aria-busy", "true")

    def marks() -> dict[str, Any]:
        return page.evaluate("""() => {
            const log = document.getElementById("log");
            const echo = [...log.querySelectorAll(".tool-card")]
                .find((c) => c.querySelector(".tool-name").textContent === "demo__echo");
            const asked = [...log.querySelectorAll(".turn")].find((t) => t.querySelector(".tool-card"));
            const final = [...log.querySelectorAll(".message.assistant.final")];
            return {
                notSent: [...log.querySelectorAll(".message.user.not-sent")].map((m) => m.textContent),
                edited: echo && echo.querySelector(".args h4").textContent,
                resultLinks: echo ? echo.querySelectorAll(".result-text a").length : -1,
                answerLinks: asked ? asked.querySelectorAll(".message.assistant.final .text a").length : -1,
                timelines: asked ? asked.querySelectorAll(".timeline").length : -1,
                handoff: [...log.querySelectorAll(".message.handoff")].map((m) => m.textContent),
                lastWho: final.length ? final[final.length - 1].querySelector(".who").textContent : null,
            };
        }""")

    before = marks()
    assert before == {"notSent": [before["notSent"][0]], "edited": "Arguments (edited before it ran)",
                      "resultLinks": 1, "answerLinks": 1, "timelines": 1,
                      "handoff": ["main handed the conversation to calc: sums"], "lastWho": "calc"}
    assert "you (not sent)" in before["notSent"][0] and "Not sent: this thread waits" in before["notSent"][0]

    page.wait_for_function(SCROLL_TO_FIRST_TURN, arg="question 1 of the long thread")
    expect(log.locator(".message.handoff")).to_have_count(0)  # the end's turns left the page
    expect(log.locator(".tool-card")).to_have_count(0)
    page.wait_for_function(SCROLL_TO_LAST_TURN, arg='handoff_to_calc {"reason": "sums"}')
    expect(log.locator(".message.handoff")).to_have_count(1)
    assert marks() == before  # rendered again from its items: as it was


def test_after_a_handoff_the_page_shows_the_agent_answering_the_thread(page: Page,
                                                                       served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'handoff_to_calc {"reason": "sums"}')
    expect(page.locator(".message.handoff")).to_have_text("main handed the conversation to calc: sums")
    answer = page.locator(".message.assistant.final")
    expect(answer.locator(".who")).to_have_text("calc")
    expect(answer.locator(".text")).to_contain_text("handed the conversation to calc")
    expect(page.locator("#answering")).to_have_text("calc answers in this thread (handed over by main)")
    page.reload()  # reopened: the thread's current agent is kept by its checkpoint
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    expect(page.locator("#answering")).to_be_hidden()
    page.locator("#thread-list li", has_text="handoff_to_calc").locator(".thread-open").click()
    expect(page.locator("#answering")).to_have_text("calc answers in this thread")


# --------------------------------------------------------------------------- questions


def test_an_approval_is_answered_in_the_page_approved_denied_with_a_reason_or_edited(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'demo__echo {"text": "first"}')
    question = page.locator(".question")
    expect(question.locator("h3")).to_have_text("demo__echo wants to run")
    expect(question.get_by_role("button", name="Approve")).to_be_focused()
    question.get_by_role("button", name="Approve").click()
    expect(card(page, "demo__echo").locator(".result-text").first).to_have_text("first")
    expect(question).to_have_count(0)

    send(page, 'demo__echo {"text": "second"}')
    question.get_by_label("Reason to deny (optional)").fill("not today")
    question.get_by_role("button", name="Deny").click()
    denied = card(page, "demo__echo")
    expect(denied.locator(".status")).to_have_text("error")
    expect(denied.locator(".result")).to_contain_text("not today")

    send(page, 'demo__echo {"text": "third"}')
    question.get_by_role("button", name="Edit arguments").click()
    arguments = question.get_by_label("Arguments (JSON)")
    arguments.fill('{"text": 3}')  # the tool takes text: the server refuses, the question stays
    question.get_by_role("button", name="Run with these arguments").click()
    expect(question.locator(".error").last).to_contain_text("arguments of demo__echo")
    arguments.fill('{"text": "edited"}')
    question.get_by_role("button", name="Run with these arguments").click()
    expect(card(page, "demo__echo").locator(".result-text").first).to_have_text("edited")


def test_stop_ends_a_turn_on_a_slow_tool_on_the_server_and_dismisses_a_question_and_the_thread_goes_on(
        page: Page, served: ServedPage) -> None:
    open_page(page, served)
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_hidden()
    send(page, "demo__hang {}")
    hanging = card(page, "demo__hang")
    expect(hanging.locator(".progress")).to_have_text("hanging")  # the server runs the call
    stop.click()
    stopped = page.locator(".message.stopped")
    expect(stopped).to_have_text("Stopped: the turn was stopped, its running tool calls cancelled.")
    expect(page.locator(".message.failed")).to_have_count(0)
    expect(hanging.locator(".status")).to_have_text("stopped")
    expect(page.locator("#log")).not_to_have_attribute("aria-busy", "true")  # usable at once
    expect(page.get_by_label("Message")).to_be_focused()
    expect(stop).to_be_hidden()
    # Resume continues it from its step, as the chat's /resume: the call runs again, until Stop.
    page.get_by_role("button", name="Resume").click()
    expect(hanging.locator(".status")).to_have_text("running")
    expect(hanging.locator(".progress")).to_have_text("hanging")
    stop.click()
    expect(stopped).to_have_count(2)
    expect(hanging.locator(".status")).to_have_text("stopped")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    # The next message waits for the stopped turn to end on the server, which told the server.
    send(page, 'demo__cancellations_seen {"at_least": 2}')
    expect(page.locator(".message.assistant.final .text").last).to_have_text(
        re.compile(r"^demo__cancellations_seen returned: [2-9]"))
    expect(page.get_by_role("button", name="Resume")).to_be_hidden()

    # Stop (Escape) at a question dismisses it: the call does not run, the next message is taken.
    send(page, 'demo__echo {"text": "never"}')
    question = page.locator(".question")
    expect(question.get_by_role("button", name="Approve")).to_be_focused()
    expect(stop).to_be_visible()
    page.keyboard.press("Escape")
    expect(question).to_have_count(0)
    expect(stopped.last).to_have_text("Stopped at its question (approval).")
    expect(page.get_by_role("button", name="Resume")).to_be_hidden()  # nothing ran: nothing to resume
    expect(card(page, "demo__echo").locator(".status")).to_have_text("stopped")
    send(page, 'demo__add {"a": 2, "b": 3}')
    expect(page.locator(".message.assistant.final .text").last).to_have_text("demo__add returned: 5")
    expect(page.locator(".not-sent")).to_have_count(0)

    # Reopened, the thread shows both calls answered as the model was told, the timeline kept.
    thread = page.locator("#thread-list li", has=page.locator('[aria-current="true"]')).get_attribute(
        "data-thread")
    status, _, body = request(served, f"/api/history?thread={thread}", token=served.token)
    history = json.loads(body)
    results = {item["name"]: item for item in history["items"] if item["type"] == "tool_result"}
    assert status == 200 and results["demo__hang"]["stopped"] and results["demo__echo"]["stopped"]
    assert "may or may not have taken effect" in results["demo__hang"]["text"]
    assert "did not run" in results["demo__echo"]["text"]
    kept = [entry["event"] for entry in history["timelines"]["0"]]
    assert {"type": "tool_result", "name": "demo__hang", "status": "stopped"}.items() <= kept[-1].items()
    open_page(page, served)
    page.locator(f'#thread-list li[data-thread="{thread}"] .thread-open').click()
    expect(card(page, "demo__hang").locator(".status")).to_have_text("stopped")
    expect(card(page, "demo__hang").locator(".duration")).to_have_text(re.compile(r"^\d+ ms$"))
    # A message that says nothing understandable about a question is refused, located.
    refused = {"thread": thread, "text": "hi", "stop_question": "yes"}
    status, _, body = request(served, "/api/turn", token=served.token, body=refused)
    assert status == 400 and json.loads(body)["error"].startswith("stop_question:")
    resumed = {"thread": thread, "resume": True}
    status, _, body = request(served, "/api/turn", token=served.token, body=resumed)
    assert status == 409 and json.loads(body)["error"].startswith("nothing to resume")


def turn_stream(served: ServedPage, body: dict[str, Any]
                ) -> tuple[http.client.HTTPConnection, Iterator[dict[str, Any]]]:
    """A turn's request, as a page sends it, and its events as they come (its connection: closing
    it is the page's Stop)."""
    connection = http.client.HTTPConnection(served.base.split("//", 1)[1], timeout=120)
    connection.request("POST", "/api/turn", body=json.dumps(body),
                       headers={"X-MCP-Run-Token": served.token, "Content-Type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 200

    def events() -> Iterator[dict[str, Any]]:
        for line in answer:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])

    return connection, events()


def test_two_pages_on_one_thread_a_stop_in_one_stops_only_its_turn_and_the_others_message_then_runs(
        served: ServedPage) -> None:
    first, first_events = turn_stream(served, {"thread": "two-pages", "text": "demo__hang {}"})
    second = None
    try:
        assert any(event.get("type") == "progress" for event in first_events)  # the call runs
        # The other page's message waits for the running turn (one turn at a time on a thread).
        added = {"thread": "two-pages", "text": 'demo__add {"a": 1, "b": 1}'}
        second, second_events = turn_stream(served, added)
        first.close()  # Stop in the first page
        finals = [event for event in second_events if event.get("type") == "final"]
        assert [final["text"] for final in finals] == ["demo__add returned: 2"]
    finally:
        first.close()
        if second is not None:
            second.close()
    status, _, body = request(served, "/api/history?thread=two-pages", token=served.token)
    results = [item for item in json.loads(body)["items"] if item["type"] == "tool_result"]
    assert status == 200 and [(item["name"], item.get("stopped", False)) for item in results] == [
        ("demo__hang", True), ("demo__add", False)]


def test_a_servers_form_is_checked_in_the_page_before_it_is_sent(page: Page, served: ServedPage) -> None:
    page.set_viewport_size({"width": 1400, "height": 420})
    open_page(page, served)
    send(page, "asking__book {}")
    question = page.locator(".question")
    expect(question.locator("p").first).to_have_text("Which day, for how many?")
    send_button = page.get_by_role("button", name="Send")
    expect(send_button).to_be_in_viewport(ratio=1)  # the form scrolls, not the page
    seats = question.get_by_label("seats")
    expect(seats).to_have_value("2")  # the schema's default
    seats.fill("0")
    question.get_by_role("button", name="Submit").click()
    expect(question.locator(".field-error").first).to_have_text("date: a value is required")
    expect(question.locator(".field-error").nth(1)).to_have_text("seats: must be at least 1")
    question.get_by_label("date (required)").fill("2026-12-01")
    seats.fill("4")
    question.get_by_role("button", name="Submit").click()
    expect(card(page, "asking__book").locator(".result-text").first).to_have_text("booked 2026-12-01 for 4")


# A field and a value each: the page's check and the runner's say the same (the last fit).
FORM_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "integer", "minimum": 1}, 0),
    ({"type": "integer"}, 1.5),
    ({"type": "number", "maximum": 10}, 11),
    ({"type": "number", "exclusiveMinimum": 0}, 0),
    ({"type": "number", "exclusiveMaximum": 5}, 5),
    ({"type": "string", "minLength": 3}, "ab"),
    ({"type": "string", "maxLength": 2}, "abc"),
    ({"type": "string", "pattern": "^[a-z]+$"}, "A1"),
    ({"type": "string", "format": "email"}, "nobody"),
    ({"type": "string", "format": "uri"}, "not a url"),
    ({"type": "string", "format": "date"}, "12/01/2026"),
    ({"type": "string", "format": "date-time"}, "2026-12-01"),
    ({"type": "string", "enum": ["a", "b"], "enumNames": ["Apple", "Banana"]}, "c"),
    ({"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}, "m"),
    ({"type": "array", "items": {"enum": ["x", "y", "z"]}, "minItems": 2}, ["x"]),
    ({"type": "array", "items": {"enum": ["x", "y", "z"]}, "maxItems": 1}, ["x", "y"]),
    ({"type": "string", "format": "email"}, "someone@example.com"),
    ({"type": "string", "format": "date-time"}, "2026-12-01T10:00:00Z"),
    ({"type": "integer", "minimum": 1, "maximum": 9}, 5),
]


def test_the_pages_form_checks_say_what_the_runners_say(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    in_page = page.evaluate("""async (cases) => {
        const questions = await import("/static/questions.js");
        return cases.map(([field, value]) => questions.fieldProblem(field, value));
    }""", [[field, value] for field, value in FORM_CASES])
    for (field, value), said in zip(FORM_CASES, in_page, strict=True):
        form = {"type": "elicitation", "mode": "form", "server": "s", "message": "m",
                "schema": {"type": "object", "properties": {"f": field}}}
        runner_said = content_problem(form, {"action": "accept", "content": {"f": value}})  # type: ignore[arg-type]
        assert (None if said is None else f"f: {said}") == runner_said, (field, value)


def test_the_server_checks_a_forms_answer_again(served: ServedPage) -> None:
    thread = "form-checked"
    status, _, body = request(served, "/api/turn", token=served.token,
                              body={"thread": thread, "text": "asking__book {}"})
    assert status == 200 and b'"type": "elicitation"' in body
    wrong = {"action": "accept", "content": {"date": "2026-12-01", "seats": 0}}
    status, _, body = request(served, "/api/turn", token=served.token,
                              body={"thread": thread, "answer": wrong})
    assert status == 422 and json.loads(body)["error"] == "seats: must be at least 1"
    status, _, body = request(served, "/api/history?thread=form-checked", token=served.token)
    assert json.loads(body)["question"]["type"] == "elicitation"  # still asked
    status, _, body = request(served, "/api/turn", token=served.token,
                              body={"thread": thread, "answer": {"action": "decline"}})
    assert status == 200 and b"not booked: the user chose decline" in body


def test_a_url_to_visit_is_a_link_with_a_waiting_state(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, "asking__visit {}")
    question = page.locator(".question")
    link = question.get_by_role("link", name="https://calendar.example/sign-in")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    with page.context.expect_page() as opened:
        link.click()
    opened.value.close()
    expect(question.locator(".waiting")).to_contain_text("Waiting for you")
    question.get_by_role("button", name="I have done it").click()
    expect(card(page, "asking__visit").locator(".result-text").first).to_have_text("visit: accept")


def test_a_sampling_request_is_shown_before_it_runs(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'asking__summarize {"text": "a long story"}')
    question = page.locator(".question")
    expect(question.locator("h3")).to_have_text("asking asks the model for a completion (at most 50 tokens)")
    expect(question).to_contain_text("system: Summarize in five words.")
    expect(question.locator(".sampled li")).to_have_text(["user: a long story"])
    question.get_by_role("button", name="Send it to the model").click()
    expect(card(page, "asking__summarize").locator(".status")).to_have_text("success")
    expect(question).to_have_count(0)


# --------------------------------------------------------------------------- a hostile server


# Records, from the page's start, every element the server's markup would make if it were ever
# parsed (even for a moment) and every inline script or handler the page's policy had to block.
WATCH_FOR_MARKUP = """
window.__made = [];
document.addEventListener("securitypolicyviolation",
                          (event) => __made.push(`blocked ${event.violatedDirective}`));
new MutationObserver((records) => {
  for (const record of records) for (const node of record.addedNodes) {
    if (node.nodeType !== 1) continue;
    for (const made of [node, ...node.querySelectorAll("*")]) {
      const tag = made.tagName.toLowerCase();
      const href = made.getAttribute("href") || "";
      if (["script", "img", "iframe", "b"].includes(tag) && made.closest("body")) __made.push(tag);
      if (tag === "a" && !/^https?:/.test(href)) __made.push(`a ${href}`);
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


def test_nothing_a_hostile_server_sends_runs_in_the_page(page: Page, served: ServedPage) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.add_init_script(WATCH_FOR_MARKUP)
    open_page(page, served)
    send(page, "hostile__inject {}")
    injected = card(page, "hostile__inject")
    expect(injected.locator(".status")).to_have_text("success")
    expect(injected.locator(".result dl.structured dt").first).to_contain_text("<script>")  # shown as text
    send(page, "hostile__explode {}")
    expect(card(page, "hostile__explode").locator(".result")).to_contain_text('<img src="x:" onerror=')
    send(page, "hostile__ask {}")
    question = page.locator(".question")
    expect(question.locator("p").first).to_contain_text("[click me](javascript:")
    question.get_by_role("button", name="Decline").click()
    expect(card(page, "hostile__ask").locator(".status")).to_have_text("success")
    send(page, "hostile__visit {}")
    expect(question.locator(".unsafe-link")).to_have_text("javascript:window.pwned='visit'")
    question.locator(".unsafe-link").click()
    question.get_by_role("button", name="Decline").click()
    expect(card(page, "hostile__visit").locator(".status")).to_have_text("success")
    page.locator(".tool-card summary").first.click()
    assert page.evaluate("window.pwned") is None
    assert dialogs == []
    assert page.evaluate("window.__made") == []
    # No element the server's markup would have made exists: it is all text.
    page.get_by_label("Search tools").fill("inject")  # the panel shows the tool's description
    expect(page.locator("#server-list .tool-item:not([hidden])")).to_contain_text(["<script>"])
    for selector in ("#log script", "#log img[src='x:']", "#log iframe", "#log a[href^='javascript']",
                     "#question a[href^='javascript']", "#log b", "#log a[href^='data']", "#server-list b",
                     "#server-list img", "#server-list iframe", "#server-list a"):
        assert page.locator(selector).count() == 0, selector


# --------------------------------------------------------------------------- the servers panel


def test_the_servers_panel_shows_each_servers_state_and_a_crash_recovered(page: Page,
                                                                          served: ServedPage) -> None:
    open_page(page, served)
    panel = page.locator("#server-list")
    broken = panel.locator("[data-server=broken]")
    expect(broken.locator(".server-status")).to_have_text("failed")
    broken.locator("summary").first.click()
    expect(broken.locator(".server-error")).to_contain_text("exited")
    broken.locator(".stderr summary").click()
    expect(broken.locator(".stderr pre")).to_contain_text("fatal: cannot start")
    notes = panel.locator("[data-server=notes]")
    expect(notes.locator(".server-status")).to_have_text("ready")
    expect(notes.locator("dd").first).to_have_text("stdio")

    page.get_by_label("Search tools").fill("arithmetic")  # names and descriptions are searched
    expect(panel.locator(".tool-item:not([hidden]) code")).to_have_text(["notes__calculate"])
    page.get_by_role("button", name="Try notes__calculate").click()
    tried = page.locator("#try-area")
    expression = tried.get_by_label("expression (required)")
    expect(expression).to_be_focused()
    tried.get_by_role("button", name="Call").click()  # checked as a form: the value is required
    expect(tried.locator(".field-error").first).to_have_text("Expression (expression): a value is required")
    expression.fill("2+2")
    tried.get_by_role("button", name="Call").click()
    expect(tried.locator(".tool-card .result-text").first).to_have_text("4")
    expect(page.locator("#log .tool-card")).to_have_count(0)  # outside the conversation

    page.get_by_label("Search tools").fill("echo")  # a tool that needs approval is asked about first
    page.get_by_role("button", name="Try demo__echo").click()
    tried.get_by_label("text (required)").fill("tried")
    tried.get_by_role("button", name="Call").click()
    tried.get_by_role("button", name="Approve").click()
    expect(tried.locator(".tool-card .result-text").first).to_have_text("tried")

    page.get_by_label("Search tools").fill("pid")  # the demo server crashes, and is restarted
    page.get_by_role("button", name="Try demo__pid").click()
    tried.get_by_role("button", name="Call").click()
    pid = int(tried.locator(".tool-card .result-text").first.inner_text())
    demo = panel.locator("[data-server=demo]")
    restarts = int(demo.locator(".server-restarts").inner_text())
    os.kill(pid, signal.SIGKILL)
    expect(demo.locator(".server-restarts")).to_have_text(str(restarts + 1))
    expect(demo.locator(".server-status")).to_have_text("ready")
    tried.get_by_role("button", name="Call").click()
    expect(tried.locator(".tool-card .result-text").first).not_to_have_text(str(pid))


# --------------------------------------------------------------------------- the process


def test_open_opens_the_printed_address_and_ctrl_c_stops_everything_with_exit_130(tmp_path: Path) -> None:
    # The "browser" says on mcp-run's stderr (which it inherits) which address it was given.
    browser = f"{sys.executable} -c \"import sys; print('browser opened', sys.argv[1], file=sys.stderr)\" %s"
    served = start_page(write_manifest(tmp_path, {"demo": server("demo")}, model="offline"), "--open",
                        env={"BROWSER": browser})
    line = ""
    while not line.startswith("browser opened"):
        line = served.lines.get(timeout=60)
    assert line == f"browser opened {served.url}"
    status, _, _ = request(served, "/api/agent", token=served.token)
    assert status == 200
    assert stop_page(served.process) == 130  # the no-orphan guard checks the agent's servers


def test_a_host_other_than_loopback_needs_allow_remote_and_a_token(agent: Path) -> None:
    refused = invoke("web", str(agent), "--host", "0.0.0.0")
    assert refused.exit_code == 2
    assert "--allow-remote" in refused.output
    no_token = invoke("web", str(agent), "--host", "0.0.0.0", "--allow-remote")
    assert no_token.exit_code == 2
    assert "needs a bearer token" in no_token.output
