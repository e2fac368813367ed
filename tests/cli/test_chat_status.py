"""The chat's status line on a narrow terminal keeps the running call and the servers' health."""

from __future__ import annotations

from types import SimpleNamespace

from runner.cli.status import ChatStatus


def status_of(connections: dict[str, str]) -> ChatStatus:
    runtime = SimpleNamespace(
        manifest=SimpleNamespace(name="research-assistant", model=SimpleNamespace(id="openai:gpt-4o-mini")),
        thread_id="2ec41f0a9b7d",
        fleet=SimpleNamespace(connections={key: SimpleNamespace(status=s) for key, s in connections.items()}))
    return ChatStatus(runtime)  # type: ignore[arg-type]


def test_a_wide_status_line_names_everything() -> None:
    line = status_of({"a": "ready", "b": "restarting"}).line(width=200)
    assert line == ("research-assistant · openai:gpt-4o-mini · thread 2ec41f0a9b7d · "
                    "servers 1/2 up (b restarting)")


def test_a_narrow_status_line_shortens_the_agent_parts_and_keeps_servers_and_the_running_call() -> None:
    status = status_of({"a": "ready", "b": "restarting"})
    status.observe({"type": "tool_call", "name": "a__search"})
    line = status.line(width=60)
    assert len(line) <= 60
    assert "calling a__search" in line and line.endswith("servers 1/2 up (b restarting)")
    assert "openai:gpt-4o-mini" not in line
    status.stop()
    assert status.line(width=70) == "research-assistant · thread 2ec41f… · servers 1/2 up (b restarting)"
