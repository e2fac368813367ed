"""The page's gate and answer checks, without a server: which Host, Origin and token pass, and how
an answer to a turn's question is checked before it resumes the turn."""

from __future__ import annotations

from typing import Any

import pytest

from runner.events import ElicitationAsked, SamplingAsked
from runner.hosting.mcp.http_wire import Address
from runner.web.answers import AnswerError, checked_answer
from runner.web.security import Gate, new_token
from runner.web.serving import WebOptions, page_gate

TOKEN = "t" * 43


def test_on_loopback_only_the_loopback_names_at_the_served_port_pass_the_host_check() -> None:
    gate = Gate.for_address(TOKEN, "127.0.0.1", 8765, loopback=True)
    for host in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765"):
        assert gate.host_refusal(host) is None, host
    for host in ("attacker.example:8765", "127.0.0.1:8766", "localhost", None):
        assert gate.host_refusal(host) is not None, host


def test_with_remote_callers_allowed_any_host_passes_and_the_token_decides() -> None:
    gate = Gate.for_address(TOKEN, "0.0.0.0", 8765, loopback=False)
    assert gate.host_refusal("agents.example.org:8765") is None
    assert gate.token_refusal(None) is not None
    assert gate.token_refusal(TOKEN) is None


def test_the_host_names_it_was_asked_to_listen_on_pass_the_host_check_too() -> None:
    gate = Gate.for_address(TOKEN, "127.0.1.1", 8765, loopback=True, names=("buildbox",))
    for host in ("buildbox:8765", "BuildBox:8765", "127.0.1.1:8765", "localhost:8765"):
        assert gate.host_refusal(host) is None, host
    refused = gate.host_refusal("attacker.example:8765")
    assert refused is not None and "--allow-remote" in refused
    assert Gate.for_address(TOKEN, "::1", 8765, loopback=True).host_refusal("[::1]:8765") is None


def test_with_allow_remote_the_page_answers_at_any_host_name_even_bound_to_loopback() -> None:
    bound = WebOptions(address=Address("127.0.0.1", 8765), token=TOKEN)
    assert page_gate(bound, "127.0.0.1", 8765).host_refusal("buildbox.lan:8765") is not None
    remote = WebOptions(address=Address("127.0.0.1", 8765), token=TOKEN, allow_remote=True)
    assert page_gate(remote, "127.0.0.1", 8765).host_refusal("buildbox.lan:8765") is None
    named = WebOptions(address=Address("localhost", 8765), token=TOKEN)
    assert page_gate(named, "127.0.0.1", 8765).host_refusal("localhost:8765") is None


def test_the_token_is_taken_from_its_header_or_an_authorization_bearer_header() -> None:
    assert Gate.given_token({"x-mcp-run-token": TOKEN}) == TOKEN
    assert Gate.given_token({"authorization": f"Bearer {TOKEN}"}) == TOKEN
    assert Gate.given_token({"authorization": f"bearer  {TOKEN} "}) == TOKEN
    assert Gate.given_token({"authorization": f"Basic {TOKEN}"}) is None
    assert Gate.given_token({}) is None


def test_only_the_pages_own_origin_or_none_passes() -> None:
    gate = Gate.for_address(TOKEN, "127.0.0.1", 8765, loopback=True)
    assert gate.origin_refusal(None, "127.0.0.1:8765") is None  # a same-origin GET sends none
    assert gate.origin_refusal("http://127.0.0.1:8765", "127.0.0.1:8765") is None
    for origin in ("http://localhost:8765", "https://attacker.example", "null", "http://127.0.0.1:8766"):
        assert gate.origin_refusal(origin, "127.0.0.1:8765") is not None, origin


def test_a_token_is_refused_unless_it_is_the_processs_own() -> None:
    gate = Gate.for_address(TOKEN, "127.0.0.1", 8765, loopback=True)
    for given in (None, "", TOKEN[:-1], TOKEN + "x", "T" * 43):
        assert gate.token_refusal(given) is not None, given
    assert len(new_token()) >= 43 and new_token() != new_token()


FORM = ElicitationAsked(type="elicitation", server="s", message="m", mode="form", schema={
    "type": "object", "properties": {"seats": {"type": "integer", "minimum": 1}}, "required": ["seats"]})
VISIT = ElicitationAsked(type="elicitation", server="s", message="m", mode="url", url="https://a.example",
                         elicitation_id="v-1")
SAMPLING = SamplingAsked(type="sampling", server="s", system_prompt=None, messages=[], max_tokens=5, tools=[])


@pytest.mark.parametrize(("asked", "answer", "reason"), [
    (FORM, {"action": "accept", "content": {"seats": 0}}, "seats: must be at least 1"),
    (FORM, {"action": "accept", "content": {}}, "seats: a value is required"),
    (FORM, {"action": "maybe"}, "answer: accept, decline or cancel"),
    (FORM, ["accept"], "answer: expected an object with an 'action'"),
    (SAMPLING, {"action": "accept"}, "answer: approve or deny the sampling request"),
])
def test_an_answer_that_does_not_fit_its_question_is_refused_with_the_reason(
        asked: Any, answer: Any, reason: str) -> None:
    with pytest.raises(AnswerError) as refused:
        checked_answer(None, asked, answer)  # type: ignore[arg-type]  # no approval: no runtime needed
    assert str(refused.value) == reason


def test_a_fitting_answer_is_the_resume_value_and_a_visit_names_its_request() -> None:
    assert checked_answer(None, FORM, {"action": "accept", "content": {"seats": 2}, "extra": 1}) == {  # type: ignore[arg-type]
        "action": "accept", "content": {"seats": 2}}
    assert checked_answer(None, VISIT, {"action": "accept", "content": {"x": 1}}) == {  # type: ignore[arg-type]
        "action": "accept", "elicitation_id": "v-1"}
    assert checked_answer(None, SAMPLING, {"action": "deny"}) == {"action": "deny"}  # type: ignore[arg-type]
