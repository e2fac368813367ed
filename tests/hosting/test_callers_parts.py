"""The callers of a served agent, read from a tokens file and MCP_RUN_TOKEN_<CALLER> variables,
and the thread spaces that keep their conversations apart (no process, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import ApiRequestError, ServeError
from runner.hosting.callers import Callers, read_callers, thread_in_space, thread_seen_by
from runner.hosting.chat_completions.requests import parse_chat_request


def tokens(folder: Path, text: str, mode: int = 0o600) -> Path:
    path = folder / "tokens"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_each_token_of_the_file_and_the_variables_names_its_caller(tmp_path: Path) -> None:
    path = tokens(tmp_path, "# callers\nalice: a-secret\nbob: 'b-secret'  # quoted\n")
    environ = {"MCP_RUN_TOKEN_carol": "c-secret", "MCP_RUN_TOKEN_DIR": "/tmp/x", "HOME": "/"}
    callers = read_callers(path, environ)
    assert callers.by_token == {"a-secret": "alice", "b-secret": "bob", "c-secret": "carol"}
    assert callers.caller(b"b-secret") == (True, "bob")
    assert callers.caller(b"a-secre") == (False, None)
    assert callers.named and not Callers.one("t").named and not Callers()


@pytest.mark.parametrize(("text", "found"), [
    ("alice: one\nalice: two\n", "tokens:2: the caller alice is given twice"),
    ("alice: same\nbob: same\n", "tokens:2: the caller bob has the same token as the caller alice"),
    ("alice: one\nal ice: two\n", "tokens:2: 'al ice' is no caller name"),
    ("alice:\n", "tokens:1: each line is 'caller: token'"),
    ("- alice\n", "tokens:1: not a tokens file"),
    ("alice: [one\n", "not a tokens file"),
    # A line without its ':' is found wrong only at the next one: the line named is its own.
    ("alice: one\nbob\ncarol: three\n", "tokens:2: not a tokens file"),
    ("alice: one\nbob:two\ncarol: three\n", "tokens:2: not a tokens file"),
    ("alice: one\nbob two\n", "tokens:2: not a tokens file"),
    ("alice: one\nbob: two: three\ncarol: four\n", "tokens:2: not a tokens file"),
])
def test_a_bad_tokens_file_is_refused_at_its_line_without_showing_a_token(
    tmp_path: Path, text: str, found: str
) -> None:
    with pytest.raises(ServeError) as refused:
        read_callers(tokens(tmp_path, text), {})
    assert found in str(refused.value)
    assert "same" not in str(refused.value).replace("the same token", "")


@pytest.mark.parametrize("text", ["", "# alice: to come\n", "{}\n"])
def test_a_tokens_file_that_names_no_caller_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tokens(tmp_path, text)
    with pytest.raises(ServeError) as refused:
        read_callers(path, {"MCP_RUN_TOKEN_carol": "c-secret"})
    assert str(refused.value).startswith(f"{path}: the tokens file names no caller")


def test_a_tokens_file_others_may_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="chmod 600"):
        read_callers(tokens(tmp_path, "alice: one\n", mode=0o640), {})


def test_a_caller_sees_its_own_threads_only_and_the_one_caller_those_of_nobody_named() -> None:
    stored = [thread_in_space("alice", "t1"), thread_in_space("bob", "t1"), thread_in_space(None, "t1")]
    assert stored == ["alice/t1", "bob/t1", "t1"]
    assert [thread_seen_by("alice", thread) for thread in stored] == ["t1", None, None]
    assert [thread_seen_by(None, thread) for thread in stored] == [None, None, "t1"]


def test_with_a_thread_only_the_last_message_is_sent_without_one_all_of_them() -> None:
    body = (b'{"model": "m", "messages": [{"role": "system", "content": "brief"}, {"role": "user", '
            b'"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "user": "u1"}')
    with_user = parse_chat_request(body, None)
    assert with_user.thread == "u1" and [m.text for m in with_user.messages] == ["a\nb"]
    by_header = parse_chat_request(body, "h1")
    assert by_header.thread == "h1"
    whole = parse_chat_request(body.replace(b', "user": "u1"', b""), None)
    assert whole.thread is None and [m.type for m in whole.messages] == ["system", "human"]


@pytest.mark.parametrize(("body", "param"), [
    (b'{"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}, '
     b'{"role": "user", "content": "z"}]}', "messages[1].role"),
    (b'{"model": "m", "messages": [{"role": "tool", "content": "x"}]}', "messages[0].role"),
    (b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
     "messages[0].content[0]"),
    (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
    (b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
    (b'{"model": "m", "messages": []}', "messages"),
])
def test_a_bad_request_is_located_at_its_parameter(body: bytes, param: str) -> None:
    with pytest.raises(ApiRequestError) as refused:
        parse_chat_request(body, None)
    assert refused.value.status == 400 and refused.value.param == param
