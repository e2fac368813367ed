"""How an answer is read against ``output.schema``, without a graph: fenced JSON is accepted, a
final_answer call mixed with other calls is sent back with a result for every call, broken
arguments are named, each rejected answer is handed back as a step of its own; and the values
the offline model makes fit the schemas they are made from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from runner.agent.output_contract import OutputContract
from runner.agent.structured import OUTPUT_KEY, StructuredOutput
from runner.errors import OutputError
from runner.models.schema_values import fitting_value

pytestmark = pytest.mark.anyio
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Replies:
    """The model's next answers, and what it was sent each time."""

    def __init__(self, *replies: AIMessage) -> None:
        self.replies = list(replies)
        self.sent: list[list[BaseMessage]] = []

    async def __call__(self, conversation: Sequence[BaseMessage]) -> AIMessage:
        self.sent.append(list(conversation))
        return self.replies.pop(0)


def usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}


async def test_a_fenced_json_answer_is_accepted_and_the_object_kept_with_the_message() -> None:
    output = StructuredOutput(OutputContract(SCHEMA), native=True)
    reply = AIMessage(content='```json\n{"n": 3}\n```', id="r1", response_metadata={"finish_reason": "stop"})
    accepted = await output.settle(reply, [HumanMessage("n?")], Replies())
    assert accepted.response_metadata[OUTPUT_KEY] == {"n": 3} and accepted.id == "r1"
    assert accepted.content == '{\n  "n": 3\n}'


async def test_a_mixed_final_answer_gets_a_result_for_every_call_and_is_a_step_of_its_own() -> None:
    output = StructuredOutput(OutputContract(SCHEMA), native=False)
    mixed = AIMessage(content="", usage_metadata=usage(10), tool_calls=[
        {"name": "demo__echo", "args": {}, "id": "a", "type": "tool_call"},
        {"name": "final_answer", "args": {"n": 1}, "id": "b", "type": "tool_call"}])
    fixed = AIMessage(content="", usage_metadata=usage(20), tool_calls=[
        {"name": "final_answer", "args": {"n": 2}, "id": "c", "type": "tool_call"}])
    replies = Replies(fixed)
    rejected: list[AIMessage] = []
    accepted = await output.settle(mixed, [HumanMessage("n?")], replies, rejected=rejected.append)
    assert accepted.response_metadata[OUTPUT_KEY] == {"n": 2} and not accepted.tool_calls
    assert accepted.usage_metadata is not None and accepted.usage_metadata["input_tokens"] == 20
    assert rejected == [mixed]  # a step of its own: the model node counts its usage
    answered = [m for m in replies.sent[0] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in answered] == [("a", "error"), ("b", "error")]
    assert "call final_answer alone and once" in answered[1].text


async def test_broken_final_answer_arguments_are_named_and_a_text_answer_is_asked_to_call_the_tool() -> None:
    output = StructuredOutput(OutputContract(SCHEMA, retries=1), native=False)
    broken = AIMessage(content="", invalid_tool_calls=[
        {"name": "final_answer", "args": "{n:", "id": "x", "error": None, "type": "invalid_tool_call"}])
    with pytest.raises(OutputError) as failed:
        await output.settle(broken, [HumanMessage("n?")], Replies(AIMessage(content="It is 4.")))
    assert failed.value.problems == ["give the final answer by calling final_answer with the object"]
    output = StructuredOutput(OutputContract(SCHEMA, retries=0), native=False)
    with pytest.raises(OutputError) as failed:
        await output.settle(broken, [HumanMessage("n?")], Replies())
    assert failed.value.problems == ["the arguments of final_answer are not a JSON object"]


def test_at_most_ten_validation_errors_are_reported_each_located() -> None:
    many = {"type": "object", "properties": {f"f{i:02}": {"type": "string"} for i in range(15)}}
    problems = OutputContract(many).problems({f"f{i:02}": i for i in range(15)})
    assert len(problems) == 10 and problems[0] == "at f00: 0 is not of type 'string'"


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 8}},
     "required": ["a"]},
    {"type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 3, "maximum": 10},
                                      "i": {"type": "integer", "minimum": -4, "maximum": -2}},
     "required": ["n", "i"]},
    {"type": "object", "properties": {"kind": {"const": "x"}, "tags": {"type": "array", "minItems": 2,
                                                                        "items": {"enum": ["a", "b"]}}},
     "required": ["kind", "tags"], "additionalProperties": False},
    {"type": "object", "properties": {"maybe": {"type": ["null", "boolean"]},
                                      "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                                      "both": {"allOf": [{"type": "object"}, {"required": ["k"],
                                               "properties": {"k": {"type": "string"}}}]}},
     "required": ["maybe", "either", "both"]},
    {"type": "object",
     "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
     "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"]},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_offline_models_values_fit_the_schema_they_are_made_from(schema: dict[str, Any]) -> None:
    jsonschema.validate(fitting_value(schema, "an answer"), schema)
