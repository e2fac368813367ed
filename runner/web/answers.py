"""The page's answer to the question a turn paused on, checked here before it resumes the turn
(the page checks it too, but the page is not trusted): an approval as the graph takes it
(approve, deny with a reason, edit with arguments the tool accepts), a form's content against
its schema as the chat checks it (:func:`runner.tools.form_answers.content_problem`), a URL
visit's and a sampling request's action.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from runner.agent.nodes import Decision
from runner.agent.runtime import Runtime
from runner.events import ApprovalAsked, Question
from runner.tools.form_answers import content_problem

FORM_ACTIONS = ("accept", "decline", "cancel")
SAMPLING_ACTIONS = ("approve", "deny")
_DECISION: TypeAdapter[Any] = TypeAdapter(Decision)


class AnswerError(ValueError):
    """The answer does not fit its question; the message says why, naming the field."""


def checked_approval(runtime: Runtime, asked: ApprovalAsked, answer: Any) -> dict[str, Any]:
    """The decision ``answer`` makes of the approval ``asked``; AnswerError if it is none."""
    try:
        decision: dict[str, Any] = _DECISION.validate_python(answer).model_dump()
    except ValidationError as exc:
        raise AnswerError("answer: approve, deny (with a reason) or edit (with the arguments as an "
                          f"object): {exc.errors()[0]['msg']}") from None
    if decision["action"] == "edit":
        if problems := runtime.caller.argument_problems(asked["tool"], decision["args"]):
            raise AnswerError(f"arguments of {asked['tool']}: " + "; ".join(problems))
    return decision


def checked_answer(runtime: Runtime, asked: Question, answer: Any) -> dict[str, Any]:
    """The resume value of ``answer`` to ``asked``; AnswerError if it does not fit."""
    if not isinstance(answer, dict):
        raise AnswerError("answer: expected an object with an 'action'")
    if asked["type"] == "approval":
        return checked_approval(runtime, asked, answer)
    if asked["type"] == "sampling":
        if answer.get("action") not in SAMPLING_ACTIONS:
            raise AnswerError("answer: approve or deny the sampling request")
        return {"action": answer["action"]}
    if answer.get("action") not in FORM_ACTIONS:
        raise AnswerError("answer: accept, decline or cancel")
    checked = {key: answer[key] for key in ("action", "content") if key in answer}
    if asked["mode"] == "url":
        checked.pop("content", None)
        checked["elicitation_id"] = asked.get("elicitation_id")
    elif (problem := content_problem(asked, checked)) is not None:
        raise AnswerError(problem)
    return checked
