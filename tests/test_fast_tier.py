"""The fast tier cannot silently include a test that starts a process or a network service."""

from __future__ import annotations

import fast_tier
import pytest

SPAWNS = '''
import socket
import subprocess


def test_swallows_a_refused_process():
    try:
        subprocess.run(["true"])
    except Exception:
        pass


def test_listens():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)


def test_computes():
    assert 6 * 7 == 42
'''


def test_a_listed_file_that_starts_a_process_fails_and_unlisted_files_are_not_collected(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fast_tier, "TESTS_DIR", pytester.path)
    monkeypatch.setattr(fast_tier, "FAST_FILES", frozenset({"test_spawns.py"}))
    pytester.makepyfile(test_spawns=SPAWNS, test_unlisted="def test_unlisted():\n    assert False\n")
    result = pytester.runpytest("-p", "fast_tier", "-m", "fast")
    result.assert_outcomes(passed=2, failed=1, errors=2)  # a teardown error each
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_swallows_a_refused_process*",
                                 "*a test of the fast tier started a process*",
                                 "*the fast tier starts no network service*"])
    assert "test_unlisted" not in result.stdout.str()
