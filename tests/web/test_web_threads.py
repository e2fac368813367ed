"""Whose threads a page (and the chat's /threads) lists when manifests share a store: two manifests
in one folder keep their conversations in the same ``state.sqlite``, each lists and opens only its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from builders import write_manifest

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.cli.completion import stored_threads
from runner.manifest import MAIN_AGENT
from runner.web.threads import foreign_thread, thread_ids

pytestmark = pytest.mark.anyio


async def test_two_manifests_in_one_folder_list_and_open_only_their_own_threads(tmp_path: Path) -> None:
    first = write_manifest(tmp_path, {}, name="first", model="offline", checkpointer="sqlite:///state.sqlite")
    second = tmp_path / "second.yaml"
    shutil.copy(first, second)
    for path, thread in ((first, "of-first"), (second, "of-second")):
        async with load_agent(path) as runtime:
            [event async for event in stream_turn(runtime, "hello", thread_id=thread)]
    async with load_agent(second) as runtime:
        assert await thread_ids(runtime, MAIN_AGENT) == ["of-second"]
        assert await stored_threads(runtime) == ["of-second"]  # the chat's /threads and completion
        assert await foreign_thread(runtime, MAIN_AGENT, "of-first")
        assert not await foreign_thread(runtime, MAIN_AGENT, "of-second")
        assert not await foreign_thread(runtime, MAIN_AGENT, "never-written")
