"""What is worth another try, and how long to wait before it: the rules of runner.models.retries,
on errors shaped like the providers' (an HTTP status, a response with headers, the class names of
their connection and timeout errors)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import openai
import pytest

from runner.manifest import RetrySpec
from runner.models.retries import backoff_delay, classify, retry_after_seconds

NOW = datetime(2026, 11, 27, 8, 0, 0, tzinfo=UTC).timestamp()
REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    response = httpx.Response(status, headers=headers or {}, request=REQUEST)
    return openai.APIStatusError("failed", response=response, body=None)


def test_retry_after_is_read_in_seconds_in_milliseconds_or_as_an_http_date() -> None:
    assert retry_after_seconds({"Retry-After": "4"}) == 4.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    in_a_minute = format_datetime(datetime.fromtimestamp(NOW + 60, UTC), usegmt=True)
    assert retry_after_seconds({"Retry-After": in_a_minute}, now=NOW) == 60.0
    past = format_datetime(datetime.fromtimestamp(NOW - 60, UTC), usegmt=True)
    assert retry_after_seconds({"Retry-After": past}, now=NOW) == 0.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_the_backoff_doubles_up_to_max_delay_and_jitter_keeps_at_least_half_of_it() -> None:
    spec = RetrySpec(initial_delay=1, max_delay=5)
    highest = [backoff_delay(retry, spec, draw=lambda low, high: high) for retry in range(1, 6)]
    lowest = [backoff_delay(retry, spec, draw=lambda low, high: low) for retry in range(1, 6)]
    assert highest == [1, 2, 4, 5, 5]
    assert lowest == [0.5, 1, 2, 2.5, 2.5]
    assert all(0.5 <= backoff_delay(1, spec) <= 1 for _ in range(50))


@pytest.mark.parametrize(("status", "reason"), [
    (429, "rate_limited"), (500, "server_error"), (502, "server_error"), (503, "server_error"),
    (408, "server_error"), (409, "server_error"),
])
def test_rate_limits_and_provider_failures_are_retried(status: int, reason: str) -> None:
    trouble = classify(status_error(status, {"retry-after": "3"}))
    assert trouble is not None
    assert (trouble.reason, trouble.status, trouble.retry_after) == (reason, status, 3.0)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_request_the_provider_refuses_is_not_retried(status: int) -> None:
    assert classify(status_error(status)) is None


def test_a_lost_connection_is_retried_and_called_a_cut_once_the_answer_had_begun() -> None:
    lost = openai.APIConnectionError(request=REQUEST)
    assert classify(lost) is not None and classify(lost).reason == "connection"  # type: ignore[union-attr]
    assert classify(lost, answered=True).reason == "cut_off"  # type: ignore[union-attr]
    timed_out = openai.APITimeoutError(request=REQUEST)
    assert classify(timed_out).reason == "timeout"  # type: ignore[union-attr]
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = httpx.RemoteProtocolError("peer closed connection")
    assert classify(wrapped, answered=True).reason == "cut_off"  # type: ignore[union-attr]


def test_an_answer_that_is_not_json_and_other_errors_are_not_retried() -> None:
    import json

    with pytest.raises(json.JSONDecodeError) as broken:
        json.loads('{"id": ')
    assert classify(broken.value) is None
    assert classify(ValueError("bad tool schema")) is None
