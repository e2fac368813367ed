"""A served turn's progress: the model's tokens coalesced into few notifications (each carrying
the answer so far, the last one its end), and one increasing count over the whole turn, also
across a question put to the caller and the call it retried with the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from builders import scripted_model, write_manifest
from mcp_servers import gates as gates_server
from serving import Progress, call_message, http_agent, http_client, stdio_agent, text_of, write_served_agent

from runner.hosting.mcp.ask import ANSWER_TAIL_CHARS

LIMIT = 90
WORDS = 3000  # the scripted model streams each word as one token


def increasing(values: list[float]) -> bool:
    return all(earlier < later for earlier, later in zip(values, values[1:], strict=False))


async def test_a_long_streamed_answer_reaches_the_caller_in_few_notifications_ending_with_its_end(
    tmp_path: Path
) -> None:
    answer = " ".join(f"w{index}" for index in range(WORDS))
    manifest = write_manifest(tmp_path, {}, name="talker", model=scripted_model(tmp_path, [answer]))
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                progress = Progress()
                result = await client.call_tool("ask", {"message": "talk"}, progress_callback=progress)
    assert text_of(result) == answer
    # One notification per token would be WORDS of them; coalesced, a few per second of streaming.
    assert 1 <= len(progress.messages) <= WORDS // 4
    assert increasing(progress.values)
    assert progress.messages[-1] == "…" + answer[-ANSWER_TAIL_CHARS:]  # the last one is always sent
    for message in progress.messages:  # each the answer so far (its tail)
        assert answer.startswith(message) or message.startswith("…") and message[1:] in answer


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: 2026-07-28, the question returned, then retried
async def test_a_turn_resumed_after_the_callers_answer_goes_on_counting_its_progress(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], mode: str
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode, elicitation_callback=approve) as client:
            progress = Progress()
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="go")},
                                            progress_callback=progress)
    assert text_of(result) == "gates__note returned: noted go"
    assert log.log == ["note go"]
    assert progress.messages[0] == 'tool call gates__note {"text": "go"}'  # before the question
    assert "tool result gates__note (success): noted go" in progress.messages  # after the answer
    assert increasing(progress.values), progress.values
