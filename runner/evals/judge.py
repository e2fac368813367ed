"""The judge: a model grades a case's conversation against the case's criteria.

The judge answers with a JSON object ``{"pass": true|false, "reasoning": "..."}``; an answer
that cannot be read fails the case with the judge's text as its reasoning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage

from runner.errors import ModelError
from runner.evals.cases import JudgeSpec
from runner.evals.cassettes import Verdict
from runner.evals.matching import Observation, describe_call
from runner.manifest import ModelSpec
from runner.manifest.basics import OFFLINE_ID
from runner.models import build_model_chain

JUDGE_INSTRUCTIONS = (
    "You grade a conversation between a user and an AI agent that uses tools, against the "
    "criteria given. Answer with one JSON object and nothing else: "
    '{"pass": true or false, "reasoning": "one or two sentences"}.'
)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def transcript(inputs: list[str], observed: Observation) -> str:
    lines = [f"User: {text}" for text in inputs]
    for call in observed.calls:
        outcome = "failed" if call.status == "error" else "returned"
        lines.append(f"Tool call: {describe_call(call)} {outcome}: {call.result[:500]}")
    lines.append(f"Agent's answer: {observed.answer}")
    return "\n".join(lines)


def read_verdict(text: str) -> Verdict:
    match = _OBJECT.search(text)
    if match is not None:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("pass"), bool):
            return Verdict(passed=data["pass"], reasoning=str(data.get("reasoning", "")))
    return Verdict(passed=False, reasoning=f"the judge's answer could not be read: {text[:300]!r}")


async def grade(spec: JudgeSpec, default_model: ModelSpec, base_dir: Path, inputs: list[str],
                observed: Observation) -> Verdict:
    """Ask the judge's model (``spec.model``, else ``default_model``) for a verdict; the offline
    model cannot give one (ModelError saying what to set)."""
    model = spec.model or default_model
    if model.id == OFFLINE_ID:
        raise ModelError("the offline model cannot judge a conversation: give the case's judge a "
                         "model (judge: {criteria: ..., model: PROVIDER:MODEL}), or run it with --replay "
                         "from a cassette recorded with one")
    chain = build_model_chain(model, base_dir=base_dir)
    prompt = [
        SystemMessage(JUDGE_INSTRUCTIONS),
        HumanMessage(f"Criteria:\n{spec.criteria}\n\nConversation:\n{transcript(inputs, observed)}"),
    ]
    reply = await chain.ainvoke(prompt, tools=[])
    return read_verdict(str(reply.text))
