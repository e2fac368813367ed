"""One turn at a time on a thread, across processes: a second ``-p --thread T`` started while a
first runs waits for it (saying so) and then continues from it, so no finished turn is lost; a
wait is bounded and names the thread."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.lowlevel
import pytest
from builders import MCP_RUN, write_manifest
from thread_turns import take_turns, wait_in_vain

from runner.store.checkpointers import open_checkpointer
from runner.store.thread_locks import thread_turn

PROCESS_LIMIT = 60.0


def human_messages(database: Path, thread: str) -> list[str]:
    async def read() -> list[str]:
        async with open_checkpointer(f"sqlite:///{database}", state_dir=database.parent) as saver:
            saved = await saver.aget({"configurable": {"thread_id": thread}})
        assert saved is not None, f"no checkpoint of thread {thread}"
        return [m.content for m in saved["channel_values"]["messages"] if m.type == "human"]

    return anyio.run(read)


class OneShot:
    """``mcp-run agent.yaml -p MESSAGE --thread T`` running; its stderr read as it comes."""

    def __init__(self, folder: Path, message: str, thread: str) -> None:
        self.process = subprocess.Popen([str(MCP_RUN), "agent.yaml", "-p", message, "--thread", thread],
                                        cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(self.process.stderr,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._seen:
                self.stderr.append(line)
                self._seen.notify_all()
        with self._seen:
            self.stderr.append("")  # end of stream
            self._seen.notify_all()

    def wait_for_stderr(self, wanted: Callable[[str], bool]) -> str:
        """The first stderr line ``wanted`` accepts, or "" when the process ended without one."""
        with self._seen:
            assert self._seen.wait_for(lambda: any(line == "" or wanted(line) for line in self.stderr),
                                       PROCESS_LIMIT), self.stderr
            return next(line for line in self.stderr if line == "" or wanted(line))

    def finish(self) -> tuple[int, str]:
        stdout, _ = self.process.communicate(timeout=PROCESS_LIMIT)
        self._reader.join(PROCESS_LIMIT)
        return self.process.returncode, stdout


@pytest.fixture
def one_shots() -> Iterator[Callable[..., OneShot]]:
    started: list[OneShot] = []

    def start(folder: Path, message: str, thread: str) -> OneShot:
        started.append(OneShot(folder, message, thread))
        return started[-1]

    try:
        yield start
    finally:
        for one_shot in started:
            if one_shot.process.poll() is None:
                one_shot.process.kill()
            one_shot.process.wait(PROCESS_LIMIT)


def test_a_second_process_on_a_busy_thread_waits_says_it_resumes_it_and_both_turns_are_kept(
    tmp_path: Path, serve_http: Any, one_shots: Callable[..., OneShot]
) -> None:
    from mcp_servers.gates import Gates, build

    gates = Gates()
    write_manifest(tmp_path, {"gates": {"url": serve_http(build(gates))}}, name="turns", model="offline")
    gates.open("second")  # the second turn's call returns at once: only the thread can hold it up
    first = one_shots(tmp_path, 'gates__hold {"key": "first"}', "t")
    gates.wait_for("enter first")
    second = one_shots(tmp_path, 'gates__hold {"key": "second"}', "t")
    waiting = second.wait_for_stderr(lambda line: "thread t is in use" in line)
    gates.open("first")
    assert first.finish()[0] == 0, first.stderr
    assert second.finish()[0] == 0, second.stderr
    assert human_messages(tmp_path / ".mcp-run" / "state.sqlite", "t") == [
        'gates__hold {"key": "first"}', 'gates__hold {"key": "second"}']
    assert gates.log.index("leave first") < gates.log.index("enter second")
    assert "by process" in waiting and "Ctrl-C" in waiting, second.stderr
    # What it says of the thread is decided once the first turn has ended: that turn is in it.
    assert not any("new thread" in line for line in second.stderr), second.stderr
    told = [line for line in second.stderr if "resumed thread t" in line]
    assert told and second.stderr.index(waiting) < second.stderr.index(told[0]), second.stderr


async def test_two_checkpointers_on_one_database_take_turns_on_a_thread(tmp_path: Path) -> None:
    """Two savers on one file lock as two processes do (each holds a file lock of its own)."""
    await take_turns(f"sqlite:///{tmp_path / 'state.sqlite'}", tmp_path)
    assert list((tmp_path / "state.sqlite.locks").iterdir()) == []  # no lock file left behind


async def test_a_wait_for_a_busy_thread_is_bounded_and_names_the_thread(tmp_path: Path) -> None:
    await wait_in_vain(f"sqlite:///{tmp_path / 'state.sqlite'}", tmp_path)


async def test_turns_of_one_thread_in_one_process_run_one_after_the_other() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    inside = 0
    most = 0

    async def turn() -> None:
        nonlocal inside, most
        async with thread_turn(saver, "t"):
            inside += 1
            most = max(most, inside)
            await anyio.lowlevel.checkpoint()  # let the others try to come in
            await anyio.lowlevel.checkpoint()
            inside -= 1

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(turn)
    assert most == 1
