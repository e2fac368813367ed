"""What people see of model retries, end to end through ``mcp-run`` against the local
OpenAI-compatible server (tests/provider_server.py): one line per retry on stderr with ``-p``, the
``model_retry`` event with ``--json``, one line in the chat, one clear error once retries and
fallbacks are spent, never a traceback; and Ctrl-C during the wait stops at once (exit 130)."""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from builders import JsonChat, chat_in_a_terminal, invoke, server, write_manifest
from provider_server import Failure, ProviderServer, Reply

QUICK = {"initial_delay": "10ms", "max_delay": "1s"}
EVENT_LIMIT = 60.0


def agent(folder: Path, provider: ProviderServer, servers: dict[str, Any] | None = None,
          **model: Any) -> Path:
    return write_manifest(folder, servers or {}, model=provider.model(**model), checkpointer="memory")


def test_one_shot_says_rate_limited_retrying_in_one_line_and_prints_the_answer(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="1"), Reply("Hello."))
    agent(tmp_path, provider_server)
    result = invoke("agent.yaml", "-p", "hi", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Hello."
    assert "rate limited, retrying in 1 s (attempt 2 of 3)" in result.stderr.splitlines()
    assert "Traceback" not in result.stderr


def test_one_shot_json_emits_the_model_retry_event_with_the_wait_retry_after_asked(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(503, retry_after="1"), Reply("Hello."))
    agent(tmp_path, provider_server)
    result = invoke("agent.yaml", "-p", "hi", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    (retry,) = [event for event in events if event["type"] == "model_retry"]
    assert retry == {"type": "model_retry", "model": "openai:gpt-stub", "attempt": 2, "max_attempts": 3,
                     "delay": 1.0, "reason": "server_error", "status": 503,
                     "message": "the provider failed (HTTP 503)"}
    assert events[-1]["type"] == "final" and events[-1]["text"] == "Hello."


def test_one_shot_falls_back_after_the_retries_and_says_so(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Failure(500))
    agent(tmp_path, provider_server, fallbacks=["offline"], retries={**QUICK, "max_attempts": 2})
    result = invoke("agent.yaml", "-p", "hello", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert ("openai:gpt-stub failed (the provider failed (HTTP 500) after 2 attempts): trying offline"
            in result.stderr.splitlines())
    assert "offline model" in result.stdout
    assert len(provider_server.completions()) == 2


def test_one_shot_spent_retries_end_in_one_clear_error_and_exit_1_without_a_traceback(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Failure(500), Failure(500))
    agent(tmp_path, provider_server, retries=QUICK)
    result = invoke("agent.yaml", "-p", "hi", cwd=tmp_path)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: the model call failed: openai:gpt-stub: the provider failed (HTTP 500) after 3 attempts")
    assert "Traceback" not in result.stderr
    assert len(provider_server.completions()) == 3


def test_the_chat_shows_one_line_per_retry_then_the_answer(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="1"), Reply("Hello from the stub."))
    agent(tmp_path, provider_server)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("hi")
        chat.expect("rate limited, retrying in 1 s \\(attempt 2 of 3\\)")
        chat.expect("Hello from the stub.")
        chat.expect("> ")
    assert "Traceback" not in (chat.before or "")


def test_ctrl_c_during_a_backoff_wait_stops_at_once_with_exit_130_and_no_orphan(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="300"))
    agent(tmp_path, provider_server, {"demo": server("demo")},
          retries={"max_attempts": 3, "max_delay": "10m"})
    with (tmp_path / "stderr.txt").open("w") as errors:
        run = subprocess.Popen([sys.executable, "-m", "runner", "agent.yaml", "-p", "hi", "--json"],
                               cwd=tmp_path, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=errors)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert run.stdout is not None
        for line in run.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        seen = []
        while (line := lines.get(timeout=EVENT_LIMIT)) is not None:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "model_retry":
                break
        assert seen and seen[-1]["type"] == "model_retry", (tmp_path / "stderr.txt").read_text()
        assert seen[-1]["delay"] == 300.0
        children = [child.pid for child in psutil.Process(run.pid).children(recursive=True)]
        assert children  # the demo server
        run.send_signal(signal.SIGINT)
        after = []
        while (line := lines.get(timeout=EVENT_LIMIT)) is not None:
            after.append(json.loads(line))
        code = run.wait(timeout=EVENT_LIMIT)  # far less than the 300 s wait
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=EVENT_LIMIT)
    assert code == 130, (tmp_path / "stderr.txt").read_text()
    assert after == [{"type": "interrupted", "what": "turn"}]
    assert len(provider_server.completions()) == 1
    assert not [pid for pid in children if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_a_turn_whose_model_fails_for_good_is_an_error_event_and_the_chat_goes_on(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Reply("Back again."))
    agent(tmp_path, provider_server, retries={"max_attempts": 1})
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "hi"})
        failed = chat.wait_for("error")
        assert failed["message"].startswith("the turn failed: ") and "HTTP 500" in failed["message"]
        chat.send({"text": "hi again"})
        assert chat.wait_for("final")["text"] == "Back again."
        chat.send({"text": "/exit"})
        assert chat.process.wait(timeout=EVENT_LIMIT) == 0
    finally:
        if chat.process.poll() is None:
            chat.process.terminate()
            chat.process.wait(timeout=EVENT_LIMIT)


def test_a_request_the_provider_refuses_fails_with_its_status_and_message_not_the_client_class(
        tmp_path: Path, provider_server: ProviderServer, caplog: pytest.LogCaptureFixture) -> None:
    refusal = ("Invalid value for 'temperature': must be at most 2. Key sk-proj-Zq8xR2mN5vB7cK1pL4tY9wE3 "
               "was used.")
    provider_server.script(Failure(400, message=refusal), Reply("never asked for"))
    agent(tmp_path, provider_server, retries=QUICK)
    result = invoke("agent.yaml", "-p", "hi", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    assert ("error: the model call failed: openai:gpt-stub: the provider refused the request (HTTP 400): "
            "Invalid value for 'temperature': must be at most 2. Key *** was used.") in result.stderr
    # what the process would print: its output and its log records
    for printed in (result.output, caplog.text):
        assert "BadRequestError" not in printed and "sk-proj" not in printed
        assert "Traceback" not in printed
    assert len(provider_server.completions()) == 1  # refused: not asked again


UNSET_KEY = "MCP_RUN_TEST_UNSET_KEY"
WITHOUT_KEYS = {UNSET_KEY: None, **{key: None for key in os.environ if key.startswith("OPENAI_")}}


def test_a_primary_model_whose_api_key_variable_is_unset_is_skipped_for_its_fallbacks_saying_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_manifest(tmp_path, {}, checkpointer="memory", model={
        "id": "openai:gpt-4.1-mini", "api_key_env": UNSET_KEY, "fallbacks": ["offline"]})
    result = invoke("agent.yaml", "-p", "hello", cwd=tmp_path, env=WITHOUT_KEYS)
    assert result.exit_code == 0, result.stderr
    assert "This is the offline model" in result.stdout
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert (f"model 'openai:gpt-4.1-mini' is skipped: its API key variable {UNSET_KEY} "
            "(model.api_key_env) is not set: using offline instead") in warnings


def test_when_no_fallback_can_stand_in_for_a_keyless_primary_the_error_names_its_variable(
        tmp_path: Path) -> None:
    write_manifest(tmp_path, {}, checkpointer="memory", model={
        "id": "openai:gpt-4.1-mini", "api_key_env": UNSET_KEY, "fallbacks": ["openai:gpt-4o-mini"]})
    result = invoke("agent.yaml", "-p", "hello", cwd=tmp_path, env=WITHOUT_KEYS)
    assert result.exit_code == 1, result.stderr
    assert (f"error: model 'openai:gpt-4.1-mini' cannot be used: its API key variable {UNSET_KEY} "
            f"(model.api_key_env) is not set (export {UNSET_KEY}=…), and no fallback can be used instead: "
            "model 'openai:gpt-4o-mini' cannot be created") in result.stderr
    assert "Traceback" not in result.stderr
