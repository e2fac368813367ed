"""Model requests that survive providers: each attempt bounded by ``model.timeout``, failed
attempts retried by ``model.retries`` (exponential backoff with jitter, or the wait the provider
asks for with Retry-After), each retry told as a ``model_retry`` event and recorded as a span.

What is retried: a rate limit (429), a provider's own failure (5xx, 408, 409), no answer in time,
a connection that failed, and an answer cut off mid-stream. Anything else (a bad request, a
refused key, an answer that is not JSON) would fail again: the next model of the chain is tried
at once. Providers are told apart by what their errors carry (``status_code``, a ``response``
with headers, the class names of their connection and timeout errors), not by importing them.

The provider clients' own retries are turned off where the model is created
(:func:`runner.models.providers.build_chat_model`): these are the only ones, and they are seen.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.errors import GraphBubbleUp

from runner import telemetry
from runner.events import EventSink, ModelFallback, ModelRetry
from runner.manifest import RetrySpec
from runner.redaction import redact_credentials

logger = logging.getLogger(__name__)

Reason = Literal["rate_limited", "server_error", "timeout", "connection", "cut_off"]
REASON_TEXT: dict[str, str] = {
    "rate_limited": "rate limited",
    "server_error": "the provider failed",
    "timeout": "no answer in time",
    "connection": "could not reach the provider",
    "cut_off": "the answer was cut off",
}
RETRIED_STATUSES = frozenset({408, 409, 429})  # and every 5xx
_CONNECTION_NAMES = ("APIConnectionError", "ConnectError", "ConnectionError", "RemoteProtocolError",
                     "ReadError", "WriteError", "ServiceUnavailable", "ProtocolError")
_TIMEOUT_NAMES = ("APITimeoutError", "Timeout", "TimeoutError", "DeadlineExceeded")
_Result = TypeVar("_Result")


@dataclass(frozen=True)
class Trouble:
    """Why an attempt failed, when it is worth another: ``retry_after`` is the provider's own
    wait in seconds (Retry-After), ``status`` its HTTP status."""

    reason: Reason
    status: int | None = None
    retry_after: float | None = None

    def describe(self, timeout: float) -> str:
        if self.reason == "timeout":
            return f"no answer in {format_seconds(timeout)} s"
        text = REASON_TEXT[self.reason]
        return f"{text} (HTTP {self.status})" if self.reason == "server_error" and self.status else text


class StreamCutOff(ConnectionError):
    """A streamed answer ended (its connection closed) without saying it was finished."""


# Where providers say why an answer ended (OpenAI, Gemini: finish_reason; Anthropic: stop_reason;
# Ollama: done_reason; Bedrock: stopReason). A streamed answer with none of them was cut off.
_END_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")


def _cut_short(result: Any) -> bool:
    metadata = getattr(result, "response_metadata", None)
    return isinstance(metadata, Mapping) and not any(metadata.get(key) for key in _END_KEYS)


class AttemptTimedOut(TimeoutError):
    """An attempt got no answer (or no next piece of a streamed one) within ``model.timeout``."""


def format_seconds(seconds: float) -> str:
    """``4``, ``1.5``, ``0.25``: a delay as people read it."""
    return f"{seconds:.0f}" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.2g}"


def model_call_line(event: ModelRetry | ModelFallback) -> str:
    """``rate limited, retrying in 4 s (attempt 2 of 3)``, or the model a request falls back to:
    what the chat, ``-p`` and a served turn's progress say of the event."""
    if event["type"] == "model_fallback":
        return f"{event['model']} failed ({event['reason']}): trying {event['fallback']}"
    return (f"{event['message']}, retrying in {format_seconds(event['delay'])} s "
            f"(attempt {event['attempt']} of {event['max_attempts']})")


def _causes(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _status(error: BaseException) -> int | None:
    for name in ("status_code", "status", "code"):
        value = getattr(error, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) and 100 <= value < 600 else None


def classify(error: BaseException, *, answered: bool = False) -> Trouble | None:
    """The trouble ``error`` (or an error it was raised from) shows, or None when retrying would
    not help. ``answered``: pieces of a streamed answer had come, so a lost connection cut it."""
    for cause in _causes(error):
        status = _status(cause)
        if status is not None and (status in RETRIED_STATUSES or status >= 500):
            reason: Reason = "rate_limited" if status == 429 else "server_error"
            return Trouble(reason, status, retry_after_seconds(_headers(cause)))
        if status is not None:
            return None  # the provider refused the request itself (400, 401, 404...)
        names = [kind.__name__ for kind in type(cause).__mro__]
        if isinstance(cause, AttemptTimedOut) or any(n in _TIMEOUT_NAMES for n in names):
            return Trouble("timeout")
        if any(n in _CONNECTION_NAMES for n in names):
            return Trouble("cut_off" if answered else "connection")
    return None


def unreadable_text(error: BaseException) -> str | None:
    """What a reply that could not be read says (a body that is not JSON, a stream of no
    events), or None for other errors. Such a reply is not retried: it comes from something
    that is not answering as the provider's API does (a proxy's page, a wrong ``base_url``)."""
    for cause in _causes(error):
        if isinstance(cause, json.JSONDecodeError):
            return f"its answer is not valid JSON ({cause.msg} at character {cause.pos})"
        if isinstance(cause, ValueError) and "No generations found in stream" in str(cause):
            return "its streamed answer held no event it could read (not server-sent events)"
    return None


REFUSAL_CHARS = 300  # of a provider's message, shown when it refuses a request


def refusal_text(error: BaseException) -> str | None:
    """What a provider that refused the request itself (400, 401, 404…) says, for people:
    ``the provider refused the request (HTTP 400): <its message>``, secrets hidden; None for
    other errors. Not the client's class name (``BadRequestError``) nor its raw body."""
    for cause in _causes(error):
        status = _status(cause)
        if status is None or status in RETRIED_STATUSES or status >= 500:
            continue
        text = f"the provider refused the request (HTTP {status})"
        said = _provider_message(cause)
        if said:
            said = redact_credentials(" ".join(said.split()))
            said = said if len(said) <= REFUSAL_CHARS else said[:REFUSAL_CHARS - 1] + "…"
            text += f": {said}"
        return text
    return None


def _provider_message(error: BaseException) -> str | None:
    """The ``message`` of a provider's error body (OpenAI's ``{message, type}``, Anthropic's
    ``{type, error: {message}}``), else the error's own ``message``."""
    body = getattr(error, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    message = getattr(error, "message", None)
    return message if isinstance(message, str) else None


def _headers(error: BaseException) -> Mapping[str, str]:
    headers = getattr(getattr(error, "response", None), "headers", None)
    return headers if isinstance(headers, Mapping) else {}


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date (``now``: the current time.time(), for tests); None when it asks for none."""
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    if (millis := lowered.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(retry: int, spec: RetrySpec, *, draw: Callable[[float, float], float] = random.uniform
                  ) -> float:
    """The delay before retry number ``retry`` (1 for the first): ``initial_delay`` doubled at
    each retry, at most ``max_delay``, then jittered down to no less than half of it."""
    ceiling = min(spec.max_delay, spec.initial_delay * 2 ** (retry - 1))
    return draw(ceiling / 2, ceiling)


class _Deadline(AsyncCallbackHandler):
    """Moves an attempt's deadline on at each piece of a streamed answer, and counts them."""

    # Awaited in turn with the other handlers: LangChain otherwise hands each event of the model
    # call (its start, every piece, its end) to a task of its own, for two assignments.
    run_inline = True

    def __init__(self, scope: anyio.CancelScope, timeout: float) -> None:
        self.scope = scope
        self.timeout = timeout
        self.pieces = 0

    async def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        self.pieces += 1
        self.scope.deadline = anyio.current_time() + self.timeout


@dataclass(frozen=True)
class Attempts:
    """How requests to the models of one chain are tried: ``spec`` and ``timeout`` from the
    manifest, ``names`` the model ids (for events and messages), ``events`` the sink of the turn
    running now (None: no one listens)."""

    spec: RetrySpec
    timeout: float
    names: tuple[str, ...]
    events: Callable[[], EventSink | None] | None = None

    async def call(self, index: int, invoke: Callable[[RunnableConfig | None], Awaitable[_Result]],
                   config: RunnableConfig | None) -> _Result:
        """``invoke`` on model ``index`` until it answers, retrying what is worth it;
        :class:`Spent` with the last error when its attempts are spent (or when another would not
        help)."""
        attempt = 1
        while True:
            try:
                return await self._attempt(invoke, config)
            except _Failed as failed:
                trouble, error = failed.trouble, failed.error
            if trouble is None or attempt >= self.spec.max_attempts:
                raise Spent(self.names[index], error, trouble, attempt, self.timeout) from error
            delay = trouble.retry_after
            if delay is None:
                delay = backoff_delay(attempt, self.spec)
            elif delay > self.spec.max_delay:
                raise Spent(self.names[index], error, trouble, attempt, self.timeout, asked=delay) from error
            attempt += 1
            event = ModelRetry(type="model_retry", model=self.names[index], attempt=attempt,
                               max_attempts=self.spec.max_attempts, delay=round(delay, 3),
                               reason=trouble.reason, status=trouble.status,
                               message=trouble.describe(self.timeout))
            logger.info("%s: %s; attempt %d of %d in %.2f s", self.names[index], event["message"],
                        attempt, self.spec.max_attempts, delay)
            self._tell(event)
            with telemetry.model_retry(event):
                await anyio.sleep(delay)

    async def _attempt(self, invoke: Callable[[RunnableConfig | None], Awaitable[_Result]],
                       config: RunnableConfig | None) -> _Result:
        with anyio.CancelScope(deadline=anyio.current_time() + self.timeout) as scope:
            deadline = _Deadline(scope, self.timeout)
            try:
                result = await invoke(merge_configs(config, {"callbacks": [deadline]}))
            except GraphBubbleUp:  # LangGraph's control flow (an interrupt), not a failure
                raise
            except Exception as exc:  # the provider's own errors, told apart by classify()
                raise _Failed(classify(exc, answered=deadline.pieces > 0), exc) from exc
            if deadline.pieces and _cut_short(result):  # the connection closed cleanly mid-answer
                raise _Failed(Trouble("cut_off"), StreamCutOff("the streamed answer ended without a "
                                                               "finish reason (no end of stream)"))
            return result
        timed_out = AttemptTimedOut(f"no answer within {format_seconds(self.timeout)} s (model.timeout)")
        raise _Failed(Trouble("timeout"), timed_out)

    def fell_back(self, index: int, spent: Spent) -> None:
        """Model ``index`` failed for good (``spent``): the next one is tried."""
        event = ModelFallback(type="model_fallback", model=self.names[index],
                              fallback=self.names[index + 1], reason=spent.reason)
        logger.info("%s failed (%s): trying %s", event["model"], spent.reason, event["fallback"])
        self._tell(event)

    def _tell(self, event: ModelRetry | ModelFallback) -> None:
        sink = self.events() if self.events is not None else None
        if sink is not None:
            sink(event)


class _Failed(Exception):
    def __init__(self, trouble: Trouble | None, error: BaseException) -> None:
        self.trouble = trouble
        self.error = error
        super().__init__(str(error))


class Spent(Exception):
    """Model ``name`` failed for good with ``error`` after ``attempts`` attempts (``asked``: the
    provider asked for a wait longer than ``max_delay``); ``reason`` says it for people."""

    def __init__(self, name: str, error: BaseException, trouble: Trouble | None, attempts: int,
                 timeout: float, *, asked: float | None = None) -> None:
        self.name = name
        self.error = error
        if trouble is None:
            self.reason = unreadable_text(error) or refusal_text(error) or f"{type(error).__name__}: {error}"
        else:
            self.reason = trouble.describe(timeout)
            if asked is not None:
                self.reason += (f", and asked to wait {format_seconds(asked)} s, longer than "
                                f"model.retries.max_delay")
            elif attempts > 1:
                self.reason += f" after {attempts} attempts"
        super().__init__(f"{name}: {self.reason}")
