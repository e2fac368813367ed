"""What a server asks of the client: input (elicitation), the roots, and its log messages.

One ``ServerRequests`` per connection builds the SDK callbacks its sessions use, and declares a
capability only for what the server's spec enables (``elicitation: decline`` declares none, roots
are declared only when some are configured). The callbacks serve both protocol eras: on 2025-11-25
sessions the server sends ``elicitation/create`` / ``roots/list`` requests, on 2026-07-28 ones a
tool result asks for input and the SDK retries the call with the answers; both arrive here.

Who answers an elicitation: the caller waiting on a tool call registers an ``Ask`` for the call's
duration (:meth:`ServerRequests.asking`); a request arriving while no call asks (or while the
server is set to ``decline``) is declined at once, so nothing ever waits for an absent user. The
SDK does not say which call a 2025-11-25 request belongs to, so concurrent calls on one server are
answered by the one that started last. Accepted answers are completed with the schema's defaults
(SEP-1034): a field the user left out and the schema gives a default for is sent with it.

URL mode (2025-11-25): a server that needs the user at a URL either asks with an
``elicitation/create`` (the call goes on once the user agreed), or answers the call with error
-32042 listing the URLs; then each is asked like any elicitation, the call waits for the server's
``notifications/elicitation/complete`` for it (up to the call's timeout: the notification is not
guaranteed) and is made again (:meth:`ServerRequests.visit`). Each completion the server announces
is an ``elicitation_complete`` event of the calls in flight, and is remembered (the most recent
``MAX_COMPLETIONS``), so a call retried after the graph paused does not wait for it again.

Log messages (``notifications/message``) at or above ``logging.level`` (the level asked of the
server on connect, enforced here too for servers that ignore it) are appended to the server's log
file with their level
and logger, at any rate the server sends them (one line write each, nothing queued); those at or
above ``logging.terminal`` are also logged to ``runner.servers.log.<key>`` for the terminal.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import mcp_types as types
from mcp.client.extension import ClientExtension
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import UrlElicitationRequiredError
from pydantic import ValidationError

from runner.errors import ServerRequestError
from runner.events import CallNotice, EventSink, VisitCompleted, call_event
from runner.manifest import HttpServerSpec, StdioServerSpec

logger = logging.getLogger(__name__)

Question = types.ElicitRequestParams | types.CreateMessageRequestParams
Completion = types.CreateMessageResult | types.CreateMessageResultWithTools
Reply = types.ElicitResult | Completion | types.ErrorData
Ask = Callable[[str, Question], Awaitable[Reply]]
"""``ask(server_key, request)``: the user's answer to an elicitation, or to a sampling request
(its completion, or an error when the user refused it)."""
Sample = Callable[[str, types.CreateMessageRequestParams, str | None], Awaitable[Completion]]
"""``sample(server_key, request, agent)``: the completion of the model of ``agent``, the agent of
'agents:' whose tool call the server serves (None: the main agent); the runtime has the models."""
SAMPLING_REFUSED = -1  # the JSON-RPC code of a refused sampling request (the specification's example)
CallEvents = Callable[[CallNotice], None]
"""``events(notice)``: what happens during one tool call (a task's status, a URL visit completed,
the call made again)."""

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
PYTHON_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING,
    "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
MAX_LOG_DATA_CHARS = 4000  # one message's text in the log file; a flood must not fill the disk fast
MAX_COMPLETIONS = 100  # URL elicitations whose completion is remembered


@dataclass(eq=False)  # each call's own: told apart by identity
class SamplingBudget:
    """The completions servers may still get during one tool call of an agent: the model calls
    its turn has left (``agent.max_steps``; None: no limit); ``used`` is how many they got.
    ``agent`` names the agent of 'agents:' making the call (None: the main agent): its model
    completes them, as it is its turn they count against."""

    left: int | None
    used: int = 0
    agent: str | None = None

    def spend_one(self) -> None:
        """A server got one completion."""
        self.used += 1


# The budget of the tool call running in this context (None outside the agent's turns: no limit,
# and the main agent's model completes).
sampling_budget: contextvars.ContextVar[SamplingBudget | None] = contextvars.ContextVar(
    "sampling_budget", default=None
)


def call_events(sink: EventSink | None, tool: str, server: str,
                call_id: str | None = None) -> CallEvents | None:
    """``events`` of a call of ``tool`` that writes its events, naming the tool and server (and
    the model's call ``call_id``, where they carry it), to ``sink``, in the context of the caller
    (a graph's stream writer needs it; notifications arrive in the SDK's task)."""
    if sink is None:
        return None
    caller = contextvars.copy_context()
    return lambda notice: caller.run(sink, call_event(notice, tool, server, call_id))


def declined(reason: str = "") -> types.ElicitResult:
    return types.ElicitResult(action="decline", meta={"reason": reason} if reason else None)


def _why_not_visited(answer: object, *, asked: bool) -> str:
    if not asked:
        return "the server's elicitation is set to decline"
    if not isinstance(answer, types.ElicitResult) or (answer.meta or {}).get("reason"):
        return "this run cannot ask the user"  # refused by the runner: nobody was asked
    return f"the user chose {answer.action}"


def with_defaults(schema: dict[str, Any] | None, content: dict[str, Any] | None) -> dict[str, Any]:
    """``content`` completed with the defaults ``schema`` gives for the fields it leaves out."""
    completed = dict(content or {})
    for name, field in ((schema or {}).get("properties") or {}).items():
        if name not in completed and isinstance(field, dict) and "default" in field:
            completed[name] = field["default"]
    return completed


@dataclass(frozen=True)
class SamplingPolicy:
    """How the fleet's servers get completions: ``default``, for servers whose spec says nothing,
    and ``sample``, who completes (the runtime, which has the model; None: no model)."""

    default: Literal["ask", "deny"] = "deny"
    sample: Sample | None = None


class ServerRequests:
    """The client side of one server's requests; its callbacks go to every session of the server."""

    def __init__(
        self, key: str, spec: StdioServerSpec | HttpServerSpec, *, base_dir: Path, log_path: Path,
        sampling: SamplingPolicy | None = None, extensions: Sequence[ClientExtension] = (),
    ) -> None:
        self.key = key
        self.spec = spec
        self.base_dir = base_dir
        self.log_path = log_path
        self.extensions = tuple(extensions)  # announced in the client capabilities (MCP Apps in the page)
        self.fallback_ask: Ask | None = None  # answers requests no call is waiting for (tests, tools)
        self.sampling_policy = sampling if sampling is not None else SamplingPolicy()
        self._askers: list[Ask] = []
        self._budgets: list[SamplingBudget | None] = []  # of the calls in flight, newest last
        self._listeners: list[CallEvents] = []  # the events of the calls in flight
        self._completions: OrderedDict[str, anyio.Event] = OrderedDict()
        self._log: TextIO | None = None
        self._terminal = logging.getLogger(f"runner.servers.log.{key}")

    # -- what the sessions get ---------------------------------------------------------------

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for ``mcp.Client``: a callback per enabled capability, and the
        extensions the host announces."""
        options: dict[str, Any] = {
            "logging_callback": self.on_log,
            "log_level": self.spec.logging.level,
        }
        if self.extensions:
            options["extensions"] = list(self.extensions)
        if self.spec.elicitation == "ask":
            options["elicitation_callback"] = self.on_elicit
        if self.spec.roots:
            options["list_roots_callback"] = self.on_list_roots
        if self.sampling != "deny":
            options["sampling_callback"] = self.on_sample
            # The tools a request carries are bound to the model (runner.agent.sampling).
            options["sampling_capabilities"] = types.SamplingCapability(tools=types.SamplingToolsCapability())
        return options

    @property
    def sampling(self) -> Literal["ask", "allow", "deny"]:
        return self.spec.sampling or self.sampling_policy.default

    def update(self, spec: StdioServerSpec | HttpServerSpec) -> bool:
        """A reload changed settings that apply live; True when the roots changed."""
        changed = spec.roots != self.spec.roots
        self.spec = spec
        return changed

    # -- elicitation -------------------------------------------------------------------------

    def asking(self, ask: Ask | None, events: CallEvents | None = None) -> _Asking:
        """``ask`` answers this server's elicitations while the block runs (a call in flight), and
        ``events`` hears of the URL visits the server says are complete."""
        return _Asking(self, ask, events)

    # -- URL mode ----------------------------------------------------------------------------

    def on_elicitation_complete(self, elicitation_id: str) -> None:
        """The server's ``notifications/elicitation/complete``."""
        self._completion(elicitation_id).set()
        if not self._listeners:
            logger.info("server %s: the URL visit %s is complete", self.key, elicitation_id)
        notice = VisitCompleted(type="elicitation_complete", elicitation_id=elicitation_id)
        for listener in list(self._listeners):
            listener(notice)

    def _completion(self, elicitation_id: str) -> anyio.Event:
        completion = self._completions.pop(elicitation_id, None) or anyio.Event()
        self._completions[elicitation_id] = completion  # the newest last: the oldest go first
        while len(self._completions) > MAX_COMPLETIONS:
            self._completions.popitem(last=False)
        return completion

    async def visit(
        self, error: ServerRequestError, ask: Ask | None, events: CallEvents | None, timeout: float
    ) -> None:
        """A call answered -32042: the user is asked to visit each URL, and each completion is
        awaited (at most ``timeout``) before the call is made again; raises what the model is told
        when the user does not go."""
        try:
            required = UrlElicitationRequiredError.from_error(
                types.ErrorData(code=error.code, message=str(error), data=error.data)
            ).elicitations
        except (ValidationError, ValueError, TypeError):
            raise error from None  # not the shape the specification gives: the server's error stands
        for request in required:
            asker = ask if self.spec.elicitation == "ask" else None
            answer = await asker(self.key, request) if asker is not None else declined()
            if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
                raise ServerRequestError(
                    self.key, f"the server needs the user to visit {request.url} ({request.message}); "
                    f"{_why_not_visited(answer, asked=asker is not None)}", code=error.code,
                )
            # Without an id (2026-07-28) no completion can be told of: the wait runs out.
            completion = (
                self._completion(request.elicitation_id) if request.elicitation_id is not None
                else anyio.Event()
            )
            with self.asking(None, events), anyio.move_on_after(timeout):
                await completion.wait()

    async def on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        ask = self._askers[-1] if self._askers else self.fallback_ask
        if self.spec.elicitation != "ask" or ask is None:
            return declined("no one is there to answer")
        answer = await ask(self.key, params)
        if not isinstance(answer, types.ElicitResult):
            return declined()
        if answer.action == "accept" and isinstance(params, types.ElicitRequestFormParams):
            answer = answer.model_copy(
                update={"content": with_defaults(params.requested_schema, answer.content)}
            )
        return answer

    # -- sampling ----------------------------------------------------------------------------

    async def on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> Completion | types.ErrorData:
        """``allow``: the model answers; ``ask``: the user sees the request first (through the call's
        ``ask``); no call asking, no model, or ``deny``: refused. Each completion counts against the
        calling turn's model calls (:class:`SamplingBudget`); once they are used up, refused. The
        budget names the calling agent, whose model completes (read here: this may be the SDK's
        task, which knows nothing of the call)."""
        budget = self._budgets[-1] if self._budgets else None
        if budget is not None and budget.left is not None and budget.used >= budget.left:
            refused = "sampling was refused: the agent's turn has used its model calls (agent.max_steps)"
            return types.ErrorData(code=SAMPLING_REFUSED, message=refused)
        sample = self.sampling_policy.sample
        if self.sampling == "allow" and sample is not None:
            reply: Reply = await sample(self.key, params, budget.agent if budget is not None else None)
        else:
            ask = self._askers[-1] if self._askers else None
            if self.sampling != "ask" or ask is None:
                refused = "sampling was refused: no one can approve it"
                return types.ErrorData(code=SAMPLING_REFUSED, message=refused)
            reply = await ask(self.key, params)
        if isinstance(reply, types.ElicitResult):
            return types.ErrorData(code=SAMPLING_REFUSED, message="sampling was refused")
        if budget is not None and not isinstance(reply, types.ErrorData):
            budget.spend_one()
        return reply

    # -- roots -------------------------------------------------------------------------------

    def roots(self) -> list[types.Root]:
        return [
            types.Root(uri=(self.base_dir / path).resolve().as_uri(), name=path)
            for path in self.spec.roots or ()
        ]

    async def on_list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=self.roots())

    # -- logging -----------------------------------------------------------------------------

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        if _rank(params.level) < _rank(self.spec.logging.level):
            return  # below the level asked for: servers that ignore logging/setLevel still send them
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        if len(data) > MAX_LOG_DATA_CHARS:
            data = data[:MAX_LOG_DATA_CHARS] + f"… ({len(data) - MAX_LOG_DATA_CHARS} more characters)"
        source = f" [{params.logger}]" if params.logger else ""
        self._write(f"{datetime.now().isoformat(timespec='milliseconds')} {params.level}{source}: {data}")
        if _rank(params.level) >= _rank(self.spec.logging.terminal):
            self._terminal.log(
                PYTHON_LEVELS.get(params.level, logging.INFO), "[%s] %s: %s", self.key, params.level, data,
                extra={"server_log": self.key},
            )

    def _write(self, line: str) -> None:
        if self._log is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # Line-buffered appends beside the server's stderr lines: readable during the run.
            self._log = self.log_path.open("a", encoding="utf-8", buffering=1)
        self._log.write(line.replace("\n", "\n    ") + "\n")

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class _Asking:
    """:meth:`ServerRequests.asking`'s block (a class: it wraps every tool call)."""

    __slots__ = ("requests", "ask", "events", "budget")

    def __init__(self, requests: ServerRequests, ask: Ask | None, events: CallEvents | None) -> None:
        self.requests, self.ask, self.events = requests, ask, events

    def __enter__(self) -> None:
        requests = self.requests
        if self.events is not None:
            requests._listeners.append(self.events)
        if self.ask is not None:
            requests._askers.append(self.ask)
        self.budget = sampling_budget.get()  # the caller's: read here, in the calling task
        requests._budgets.append(self.budget)

    def __exit__(self, *exc_info: object) -> None:
        requests = self.requests
        requests._budgets.remove(self.budget)
        if self.ask is not None:
            requests._askers.remove(self.ask)
        if self.events is not None:
            requests._listeners.remove(self.events)


def _rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else 1
