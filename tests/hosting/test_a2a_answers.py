"""How an A2A caller's reply to an input-required task is read as the answer to the agent's question:
yes/no (with a reason) for an approval, the fields of a form from a data part or a JSON object,
plain text for a form of one field, decline and cancel; a reply that fits no form is refused with
a message saying how to answer."""

from __future__ import annotations

import pytest
from a2a.helpers import new_data_part, new_message, new_text_part
from a2a.types import Message, Part, Role

from runner.errors import ServeError
from runner.events import ApprovalAsked, ElicitationAsked
from runner.hosting.a2a_api import reply_as_answer

APPROVAL = ApprovalAsked(type="approval", tool="gates__note", args={"text": "x"}, id="call-1")
ONE_FIELD = ElicitationAsked(type="elicitation", server="s", message="Which colour?", mode="form",
                             schema={"type": "object", "properties": {"colour": {"type": "string"}}})
TWO_FIELDS = ElicitationAsked(type="elicitation", server="s", message="Where?", mode="form",
                              schema={"type": "object", "properties": {"x": {"type": "integer"},
                                                                       "y": {"type": "integer"}}})


def reply(*parts: Part) -> Message:
    return new_message(list(parts), role=Role.ROLE_USER)


@pytest.mark.parametrize(("text", "content"), [
    ("yes", {"approve": True}), ("Yes!", {"approve": True}), ("ok", {"approve": True}),
    ("no", {"approve": False}), ("not on a Friday", {"approve": False, "reason": "not on a Friday"}),
])
def test_an_approval_reply_is_yes_or_a_refusal_with_its_text_as_reason(text: str, content: dict) -> None:
    answer = reply_as_answer(APPROVAL, reply(new_text_part(text)))
    assert (answer.action, answer.content) == ("accept", content)


def test_a_form_takes_a_data_part_or_a_json_object_with_whole_numbers_kept_whole() -> None:
    from_data = reply_as_answer(TWO_FIELDS, reply(new_data_part({"x": 3, "y": 4})))
    from_json = reply_as_answer(TWO_FIELDS, reply(new_text_part('{"x": 3, "y": 4.5}')))
    assert (from_data.action, from_data.content) == ("accept", {"x": 3, "y": 4})
    assert isinstance(from_data.content["x"], int)
    assert from_json.content == {"x": 3, "y": 4.5}


def test_a_form_of_one_field_takes_plain_text_and_any_form_can_be_declined_or_cancelled() -> None:
    assert reply_as_answer(ONE_FIELD, reply(new_text_part("teal"))).content == {"colour": "teal"}
    assert reply_as_answer(TWO_FIELDS, reply(new_text_part("decline"))).action == "decline"
    assert reply_as_answer(ONE_FIELD, reply(new_text_part("Cancel"))).action == "cancel"


def test_plain_text_for_a_form_of_several_fields_is_refused_saying_how_to_answer() -> None:
    with pytest.raises(ServeError, match="send its fields as a data part"):
        reply_as_answer(TWO_FIELDS, reply(new_text_part("somewhere")))
