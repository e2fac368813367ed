"""What a turn and a thread spend (tokens, cost, tool calls, time), and the budgets that stop them.

Usage is taken per model step from the provider's own report (``AIMessage.usage_metadata``),
priced by :class:`runner.models.pricing.Pricer`, and kept in two places:

- the graph state's ``usage`` (per agent, summed by :func:`add_usage`): the thread's totals, saved
  with every checkpoint, so they survive a restart;
- a :class:`TurnLedger` in the run's ``RunnableConfig`` (:data:`LEDGER_KEY`), made by
  :func:`runner.agent.turns.stream_turn`: the turn's totals, as they happen. Everything working on the turn
  (its tool calls running at once, later a sub-agent invoked with the same config) adds to it and
  is stopped by it.

The budgets (``limits.per_turn`` and ``limits.per_thread``) are checked before each model step
(:meth:`TurnLedger.before_model_step`; a structured answer's retry is one) and each tool call
(:meth:`TurnLedger.take_tool_call`), so a turn overshoots by at most the step in flight. A refused
tool call ends the turn at the next model step, which then answers with :func:`limit_message`
instead of calling the model.

Every total shown (the ``usage`` and ``limit`` events, ``/usage``, serve's results) is one the
thread's state has or is about to have: time is counted in whole milliseconds, written with each
model step and with the message that ends a turn at a limit, so the event after a step and the
state agree to the millisecond, and a thread's totals never go down from one turn to the next.
The budgets alone read the clock as it is (``max_duration``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from runner import sdk, telemetry
from runner.agent.turn_stream import AGENT_KEY
from runner.events import LimitReached, UsageReported, UsageTotals
from runner.manifest import MAIN_AGENT, BudgetSpec, LimitsSpec
from runner.models.pricing import Pricer, TokenCounts

LEDGER_KEY = "mcp_run_turn_ledger"
TURN_USAGE_KEY = "turn_usage"  # the state's copy of the turn's totals, for a turn resumed later
USAGE_KEY = "usage"  # the state's totals of the thread, per agent (reduced by add_usage)
LIMIT_REASON = "limit"  # the finish reason of the message that ends a turn at a limit

Spent = dict[str, float]  # input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, ...
Scope = Literal["turn", "thread"]
LimitName = Literal["max_tokens", "max_cost", "max_tool_calls", "max_duration"]
TOKEN_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")


def add_usage(known: Mapping[str, Spent] | None, more: Mapping[str, Spent] | None) -> dict[str, Spent]:
    """The state's reducer of ``usage`` (agent -> totals): each number is added to its total."""
    merged = {agent: dict(spent) for agent, spent in (known or {}).items()}
    for agent, spent in (more or {}).items():
        merged[agent] = _plus(merged.get(agent, {}), spent)
    return merged


def latest_totals(known: Spent | None, newer: Spent | None) -> Spent | None:
    """The state's reducer of ``turn_usage``: the newer totals. A turn asking again inside the
    same step (a server's second question in one tool call) saves its totals again on the same
    checkpoint, and the thread's next run applies both: the later one counts."""
    return newer if newer is not None else known


def _plus(a: Mapping[str, float], b: Mapping[str, float]) -> Spent:
    return {key: a.get(key, 0) + b.get(key, 0) for key in (*a, *(k for k in b if k not in a))}


def thread_totals(usage: Mapping[str, Spent] | None) -> Spent:
    """Every agent's totals summed."""
    total: Spent = {}
    for spent in (usage or {}).values():
        total = _plus(total, spent)
    return total


def step_spent(reply: AIMessage, pricer: Pricer) -> Spent:
    """One model step: its tokens (none when the provider reported none) and its cost, if known."""
    spent: Spent = {"model_steps": 1}
    tokens = TokenCounts.of(reply.usage_metadata)
    if tokens is None:
        spent["unpriced_steps"] = 1
        return spent
    spent.update(input_tokens=tokens.input, output_tokens=tokens.output, cached_tokens=tokens.cached,
                 reasoning_tokens=tokens.reasoning)
    cost = pricer.cost(tokens, reply.response_metadata)
    if cost is None:
        spent["unpriced_steps"] = 1
    else:
        spent["cost"] = cost
    return spent


def totals(spent: Mapping[str, float]) -> UsageTotals:
    """``spent`` as the events show it: cost null when no step of it has a known price."""
    steps = int(spent.get("model_steps", 0))
    unpriced = int(spent.get("unpriced_steps", 0))
    counts = {key: int(spent.get(key, 0)) for key in TOKEN_KEYS}
    return UsageTotals(
        **counts,  # type: ignore[typeddict-item]
        total_tokens=counts["input_tokens"] + counts["output_tokens"],
        cost=None if unpriced >= steps else round(spent.get("cost", 0), 8),
        unpriced_steps=unpriced, model_steps=steps, tool_calls=int(spent.get("tool_calls", 0)),
        seconds=max(0.0, round(spent.get("seconds", 0), 3)),  # never -0.0: the clock's rest rounds so
    )


# --------------------------------------------------------------------------- budgets


@dataclass(frozen=True)
class LimitHit:
    """A budget reached: which one, its value, and what was spent against it."""

    scope: Scope
    name: LimitName
    limit: float
    spent: float

    def event(self, turn: Spent, thread: Spent) -> LimitReached:
        return LimitReached(type="limit", scope=self.scope, limit=self.name, max=self.limit,
                            spent=self.spent, turn=totals(turn), thread=totals(thread))


def limit_message(hit: LimitHit, turn: Spent, thread: Spent) -> AIMessage:
    """The final message of a turn stopped by ``hit``: the limit and what was spent."""
    setting = f"limits.per_{hit.scope}.{hit.name}"
    what = "this turn" if hit.scope == "turn" else "this conversation (thread)"
    spent = turn if hit.scope == "turn" else thread
    advice = ("Say 'continue' to go on in a new turn, or raise it in the agent's manifest."
              if hit.scope == "turn" else
              "Start a new thread to go on, or raise it in the agent's manifest.")
    return AIMessage(
        content=(f"I stopped: {what} reached its limit of {describe(hit.name, hit.limit)} ({setting}). "
                 f"Spent: {summary(spent)}. {advice}"),
        response_metadata={"finish_reason": LIMIT_REASON,
                           "limit": {"scope": hit.scope, "name": hit.name, "max": hit.limit,
                                     "spent": hit.spent}},
    )


def describe(name: LimitName, value: float) -> str:
    if name == "max_tokens":
        return f"{int(value):,} tokens"
    if name == "max_cost":
        return "$" + f"{value:.6f}".rstrip("0").rstrip(".")
    if name == "max_tool_calls":
        return f"{int(value)} tool call{'s' if value != 1 else ''}"
    return f"{value:g} s"


def summary(spent: Mapping[str, float]) -> str:
    """``1,234 tokens (1,000 in, 234 out), $0.0012, 2 tool calls, 3.4 s``."""
    shown = totals(spent)
    tokens = shown["total_tokens"]
    parts = [f"{tokens:,} tokens ({shown['input_tokens']:,} in, {shown['output_tokens']:,} out)"]
    cost = shown["cost"]
    if cost is None:
        parts.append("cost unknown")
    else:
        unpriced = shown["unpriced_steps"]
        parts.append(f"${cost:.4f}" + (f" + {unpriced} step(s) of unknown cost" if unpriced else ""))
    parts.append(f"{shown['tool_calls']} tool call{'s' if shown['tool_calls'] != 1 else ''}")
    parts.append(f"{shown['seconds']:.1f} s")
    return ", ".join(parts)


def _over(budget: BudgetSpec, scope: Scope, spent: Mapping[str, float], *, calls: bool) -> LimitHit | None:
    """The first of ``budget``'s limits ``spent`` has reached (tool calls only when ``calls``)."""
    tokens = spent.get("input_tokens", 0) + spent.get("output_tokens", 0)
    checks: list[tuple[LimitName, float | None, float]] = [
        ("max_tokens", budget.max_tokens, tokens),
        ("max_cost", budget.max_cost, spent.get("cost", 0)),
        ("max_duration", budget.max_duration, spent.get("seconds", 0)),
    ]
    if calls:
        checks.append(("max_tool_calls", budget.max_tool_calls, spent.get("tool_calls", 0)))
    for name, limit, value in checks:
        if limit is not None and value >= limit:
            if name in _COUNTED:  # counts stay whole numbers in events and _meta (3, not 3.0)
                return LimitHit(scope, name, int(limit), int(value))
            return LimitHit(scope, name, float(limit), float(value))
    return None


_COUNTED: frozenset[LimitName] = frozenset({"max_tokens", "max_tool_calls"})


class TurnLedger:
    """The turn's totals, shared by everything that works on the turn, and its budgets.

    The thread's totals before the turn are read from the state at the turn's first model step
    (:meth:`seed`); the turn's own are added as they happen. The turn's time counts from the
    ledger's creation (for a resumed turn: from the resume), in the whole milliseconds written so
    far (:meth:`record`): what the totals show is what the state has."""

    def __init__(self, limits: LimitsSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._began = clock()
        self._recorded_until = self._began
        self._turn: Spent = {}
        self._before: Spent | None = None
        # What the thread's state has not had yet: the steps of agents of 'agents:' (they run as
        # subgraphs with states of their own) and every tool call (counted as it starts); the
        # main agent's next step writes it, or the turn when it stops (turns.stream_turn).
        self._unsaved: dict[str, Spent] = {}
        # Each model step's own spending, by its message's id, until its ``usage`` event is made:
        # the node's update may carry more (structured output's rejected answers, steps of their own).
        self._steps: dict[str, Spent] = {}
        self.hit: LimitHit | None = None  # the limit that stopped a tool call
        self._limit_told = False  # the turn's one ``limit`` event was emitted

    def seed(self, usage: Mapping[str, Spent] | None, turn_so_far: Mapping[str, float] | None = None) -> None:
        """The thread's totals before this turn (the state's, at the first step; later calls do
        nothing). ``turn_so_far``: a resumed turn's totals before its question (the state's
        ``turn_usage``), in the thread's totals already: the turn's go on from them."""
        if self._before is None:
            so_far = {key: value for key, value in (turn_so_far or {}).items() if key != "seconds"}
            self._turn = _plus(so_far, self._turn)
            self._before = _plus(thread_totals(usage), {key: -value for key, value in so_far.items()})

    def so_far(self) -> Spent:
        """The turn's totals without its time: what a resumed turn goes on from (``turn_usage``)."""
        return {key: value for key, value in self._turn.items() if key != "seconds"}

    def turn(self) -> Spent:
        """The turn's totals as written so far (its time up to the last write)."""
        return {"seconds": 0.0, **self._turn}

    def thread(self) -> Spent:
        before = self._before or {}
        return _plus(before, self.turn())

    def record(self, spent: Mapping[str, float], agent: str = MAIN_AGENT) -> Spent:
        """Add a model step's spending (none: only the time, for a message ending the turn); what
        to write to the state: that, and the time since the last write in whole milliseconds (the
        rest is counted by the next write), so that every sum of it agrees to the millisecond."""
        seconds = round(self._clock() - self._recorded_until, 3)
        self._recorded_until += seconds
        written = {**{key: value for key, value in spent.items() if key != "seconds"}, "seconds": seconds}
        self._turn = _plus(self._turn, written)
        if agent != MAIN_AGENT:
            self._unsaved[agent] = _plus(self._unsaved.get(agent, {}), written)
        return written

    def remember_step(self, message_id: str | None, spent: Spent) -> None:
        if message_id:
            self._steps[message_id] = spent

    def step_of(self, message: AIMessage | None, written: Spent) -> Spent:
        """The spending of the step that made ``message`` (``written``, its node's, when unknown)."""
        return self._steps.pop(message.id, written) if message is not None and message.id else written

    def keep_unsaved(self, usage: Mapping[str, Spent]) -> None:
        """Steps whose node failed (its update is lost): the turn writes them to the thread
        (:func:`runner.agent.turns.stream_turn`)."""
        self._unsaved = add_usage(self._unsaved, usage)

    def take_unsaved(self) -> dict[str, Spent]:
        """What the agents of 'agents:' spent and the tool calls made since the last call, for
        the thread's state."""
        unsaved, self._unsaved = self._unsaved, {}
        return unsaved

    def tell_limit(self) -> bool:
        """True the first time only: a limit an agent of 'agents:' reached ends its caller's run
        too, and the turn has one ``limit`` event."""
        first, self._limit_told = not self._limit_told, True
        return first

    def before_model_step(self) -> LimitHit | None:
        """The limit that ends the turn instead of this model step, if any."""
        if self.hit is not None:
            return self.hit
        return self._over(calls=False)

    def take_tool_call(self, agent: str = MAIN_AGENT) -> LimitHit | None:
        """Count a tool call of ``agent`` in, or the limit that refuses it (it then ends the turn).
        It is written to the state with the next step of the main agent (:meth:`take_unsaved`),
        or when the turn stops to ask a question: counted once, when it starts."""
        hit = self._over(calls=True)
        if hit is not None:
            self.hit = self.hit or hit
            return hit
        self._turn = _plus(self._turn, {"tool_calls": 1})
        self._unsaved[agent] = _plus(self._unsaved.get(agent, {}), {"tool_calls": 1})
        return None

    def _over(self, *, calls: bool) -> LimitHit | None:
        # The budgets read the clock itself: time not written yet counts against max_duration.
        now = {"seconds": self._clock() - self._recorded_until}
        turn = _plus(self.turn(), now)
        for scope, budget, spent in (("turn", self.limits.per_turn, turn),
                                     ("thread", self.limits.per_thread, _plus(self._before or {}, turn))):
            hit = _over(budget, scope, spent, calls=calls)  # type: ignore[arg-type]
            if hit is not None:
                return hit
        return None


def left_over(config: RunnableConfig, *, waiting: bool) -> list[tuple[str, Any]]:
    """The state writes of a turn that ended before its steps wrote everything it spent (a node
    failed, or the turn waits for an answer inside an agent of 'agents:'): what those agents spent
    (their steps and tool calls) and, when ``waiting``, the turn's totals so far, which the turn
    resumed by the answer goes on from."""
    ledger = turn_ledger(config)
    if ledger is None:
        return []
    writes: list[tuple[str, Any]] = []
    if unsaved := ledger.take_unsaved():
        writes.append((USAGE_KEY, unsaved))
    if waiting:
        writes.append((TURN_USAGE_KEY, ledger.so_far()))
    return writes


def turn_ledger(config: RunnableConfig | None) -> TurnLedger | None:
    """The ledger of the turn ``config`` runs in (None: a run not started by stream_turn)."""
    ledger = ((config or {}).get("configurable") or {}).get(LEDGER_KEY)
    return ledger if isinstance(ledger, TurnLedger) else None


def with_ledger(config: RunnableConfig, ledger: TurnLedger) -> RunnableConfig:
    return {**config, "configurable": {**config.get("configurable", {}), LEDGER_KEY: ledger}}


def refused_text(hit: LimitHit) -> str:
    return (f"This call did not run: the {hit.scope}'s limit of {describe(hit.name, hit.limit)} "
            f"(limits.per_{hit.scope}.{hit.name}) was reached.")


def usage_update(spent: Mapping[str, float], agent: str = MAIN_AGENT) -> dict[str, Any]:
    """The state update adding ``spent`` to ``agent``'s totals."""
    return {"usage": {agent: dict(spent)}}


# --------------------------------------------------------------------------- the graph's use


TOOL_CALL_USAGE = usage_update({"tool_calls": 1})


def tool_call_usage(config: RunnableConfig) -> dict[str, Any]:
    """The state update of a tool call that ran: its count, in a run without a turn's ledger
    (LangGraph Server); a turn's ledger counted it when it started (:func:`refused_call`)."""
    return TOOL_CALL_USAGE if turn_ledger(config) is None else {}


@dataclass(frozen=True)
class Spending:
    """What the graph's nodes need: the model chain's prices, and whether the budgets are on."""

    pricer: Pricer
    primary: Any = None  # the chain's primary chat model, for the cost metric's attributes
    limits: LimitsSpec | None = None  # for runs without a turn's ledger (LangGraph Server)
    agent: str = MAIN_AGENT  # whose steps these are (an agent of 'agents:' works for the same turn)

    def stop_before_step(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any] | None:
        """The state update ending the turn at a reached limit instead of this model step (its
        message, and the time since the last write: the limit's totals are the state's), or None.

        A run no ledger was made for (LangGraph Server runs the graph itself) has the thread's
        totals in its state: its ``per_thread`` limits of tokens and cost still hold."""
        ledger = turn_ledger(config)
        if ledger is None:
            spent = thread_totals(state.get(USAGE_KEY))
            hit = None if self.limits is None else _over(self.limits.per_thread, "thread", spent, calls=False)
            return None if hit is None else {"messages": [limit_message(hit, {}, spent)]}
        ledger.seed(state.get(USAGE_KEY))
        hit = ledger.before_model_step()
        if hit is None:
            return None
        update = self.ending(config)
        return {"messages": [limit_message(hit, ledger.turn(), ledger.thread())], **update}

    def ending(self, config: RunnableConfig) -> dict[str, Any]:
        """The state update of a model node that ends the turn without calling the model (a
        limit, ``max_steps``): the time since the last write (and, for the main agent, what the
        agents it called spent), so the thread's totals have all the turn's."""
        ledger = turn_ledger(config)
        if ledger is None:
            return {}
        update = usage_update(ledger.record({}, self.agent), self.agent)
        if self.agent == MAIN_AGENT and (others := ledger.take_unsaved()):
            update[USAGE_KEY] = add_usage(update[USAGE_KEY], others)
        return update

    def failed_steps(self, usage: Mapping[str, Spent], config: RunnableConfig) -> None:
        """``usage`` (agent -> spent) of steps whose node then failed, kept for the thread's state."""
        if (ledger := turn_ledger(config)) is not None:
            ledger.keep_unsaved(usage)

    def turn_so_far(self, config: RunnableConfig) -> dict[str, Any]:
        """The state update keeping the turn's totals (none outside a turn): a turn resumed
        after a question goes on from them."""
        ledger = turn_ledger(config)
        return {} if ledger is None else {TURN_USAGE_KEY: ledger.so_far()}

    def after_step(self, reply: AIMessage, config: RunnableConfig) -> dict[str, Any]:
        """The state update of a model step's spending (added to the turn's ledger too)."""
        spent = step_spent(reply, self.pricer)
        if "cost" in spent:
            telemetry.model_cost(self.primary, reply.response_metadata, spent["cost"])
        ledger = turn_ledger(config)
        if ledger is None:
            return usage_update(spent, self.agent)
        written = ledger.record(spent, self.agent)
        ledger.remember_step(reply.id, written)
        update = usage_update(written, self.agent)
        if self.agent == MAIN_AGENT and (others := ledger.take_unsaved()):
            update["usage"] = add_usage(update["usage"], others)  # the thread's totals include theirs
        return update


def refused_call(call: Mapping[str, Any], config: RunnableConfig) -> ToolMessage | None:
    """An error result for a tool call a reached limit refuses (None: it may run, and is counted,
    as the call of the agent of 'agents:' whose graph runs it, if any). A call run again by the
    answer to a question it raised (its own, or of an agent it runs) was let through and counted
    before the question: it goes on, not counted twice."""
    ledger = turn_ledger(config)
    if ledger is None or sdk.resuming(config):
        return None
    agent = (config.get("metadata") or {}).get(AGENT_KEY) or MAIN_AGENT
    hit = ledger.take_tool_call(agent)
    if hit is None:
        return None
    return ToolMessage(content=refused_text(hit), tool_call_id=call["id"], name=call["name"], status="error")


# --------------------------------------------------------------------------- a turn's events


async def turn_started(
    graph: Any, config: RunnableConfig, limits: LimitsSpec, *, resumed: bool
) -> RunnableConfig:
    """``config`` with a new turn's ledger. A resumed turn (an approval answered) may run tool
    calls before any model step: the thread's totals are read from its checkpoint first, and the
    turn's totals go on from what it had spent before its question (``turn_usage``)."""
    ledger = TurnLedger(limits)
    if resumed:
        state = await graph.aget_state(config)
        ledger.seed(state.values.get("usage"), state.values.get(TURN_USAGE_KEY))
    return with_ledger(config, ledger)


def step_event(reply: AIMessage, spent: Mapping[str, float], config: RunnableConfig,
               agent: str = MAIN_AGENT) -> UsageReported | None:
    """The ``usage`` event of a model step the node reports itself (structured output's rejected
    answers: steps inside one node run), or None outside a turn."""
    ledger = turn_ledger(config)
    if ledger is None:
        return None
    model = reply.response_metadata.get("model_name")
    return UsageReported(type="usage", agent=agent, model=model if isinstance(model, str) else None,
                         step=totals(ledger.step_of(reply, dict(spent))), turn=totals(ledger.turn()),
                         thread=totals(ledger.thread()))


def usage_events(node: str, update: Any, config: RunnableConfig, agent: str = MAIN_AGENT
                 ) -> list[UsageReported | LimitReached]:
    """The events of one node's state update: ``agent``'s model step's ``usage`` (the main agent's
    update also carries what the agents it called spent: reported at their own steps), a turn
    stopped at a ``limit``."""
    ledger = turn_ledger(config)
    if node != "model" or not isinstance(update, Mapping) or ledger is None:
        return []
    events: list[UsageReported | LimitReached] = []
    for stepper, spent in (update.get(USAGE_KEY) or {}).items():
        if stepper != agent or not spent.get("model_steps"):
            continue  # another agent's (reported at its own steps), or only the time of a turn's end
        reply = next((m for m in update.get("messages", ()) if isinstance(m, AIMessage)), None)
        if reply is not None and reply.response_metadata.get("limit"):
            continue  # a limit reached before a retry: its rejected answers were reported as they came
        model = reply.response_metadata.get("model_name") if reply is not None else None
        events.append(UsageReported(
            type="usage", agent=stepper, model=model if isinstance(model, str) else None,
            step=totals(ledger.step_of(reply, spent)), turn=totals(ledger.turn()),
            thread=totals(ledger.thread())))
    for message in update.get("messages", ()):
        limit = isinstance(message, AIMessage) and message.response_metadata.get("limit")
        if limit and ledger.tell_limit():
            hit = LimitHit(limit["scope"], limit["name"], limit["max"], limit["spent"])
            events.append(hit.event(ledger.turn(), ledger.thread()))
    return events


class TurnSpending:
    """What a caller of a whole turn reports (serve's ``ask`` result, in its ``_meta``): the last
    ``usage`` totals seen and the ``limit`` that ended the turn, from the turn's events."""

    META_KEY = "mcp-run/usage"

    def __init__(self) -> None:
        self.usage: UsageReported | None = None
        self.limit: LimitReached | None = None

    def see(self, event: Any) -> None:
        if event["type"] == "usage":
            self.usage = event
        elif event["type"] == "limit":
            self.limit = event

    def meta(self) -> dict[str, Any] | None:
        """``{"mcp-run/usage": {turn, thread, limit?}}``, or None when no step reported usage."""
        latest = self.limit or self.usage
        if latest is None:
            return None
        report: dict[str, Any] = {"turn": latest["turn"], "thread": latest["thread"]}
        if self.limit is not None:
            report["limit"] = {key: self.limit[key] for key in ("scope", "limit", "max", "spent")}
        return {self.META_KEY: report}
