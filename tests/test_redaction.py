"""runner.redaction: a URL keeps what says where it points and loses what lets one in."""

from __future__ import annotations

import logging
import sys

import pytest

from runner.redaction import RedactingFormatter, redact_url, redact_urls, secret_name, secret_query_name

CANARY = "CANARYpw0000"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://ann:{CANARY}@127.0.0.1:8080/mcp", "http://ann:***@127.0.0.1:8080/mcp"),
    (f"https://{CANARY}@github.example/x", "https://***@github.example/x"),  # a lone user name is a token
    (f"https://ghp_{CANARY}abcdefghijkl:x-oauth-basic@h/x", "https://***@h/x"),
    (f"https://ann:p@ss{CANARY}@h/x", "https://ann:***@h/x"),  # an '@' inside the password
    (f"http://h/mcp?token={CANARY}&page=2", "http://h/mcp?token=***&page=2"),
    (f"http://h/mcp?X-Amz-Signature={CANARY}&sig={CANARY}#top", "http://h/mcp?X-Amz-Signature=***&sig=***#top"),
    (f"http://h/mcp?q=sk-{CANARY}abcdef", "http://h/mcp?q=***"),  # named harmlessly, looks like a key
    ("http://[::1]:9/mcp?page=2&empty=", "http://[::1]:9/mcp?page=2&empty="),
    ("https://u:${PASSWORD}@h/mcp?token=${TOKEN}", "https://u:${PASSWORD}@h/mcp?token=${TOKEN}"),
    ("not a url", "not a url"),
    (f"https://app/callback?code={CANARY}&state=s1", "https://app/callback?code=***&state=s1"),  # OAuth
    (f"https://app/cb#access_token={CANARY}&state=s1", "https://app/cb#access_token=***&state=s1"),
    (f"https://app/cb#token={CANARY}", "https://app/cb#token=***"),
    (f"https://app/cb#ghp_{CANARY}abcdefghijkl", "https://app/cb#***"),  # a fragment that is a key
    ("https://h/docs?country_code=US#section-2", "https://h/docs?country_code=US#section-2"),
    ("https://h/cb?code=${CODE}#token=${TOKEN}", "https://h/cb?code=${CODE}#token=${TOKEN}"),
])
def test_a_url_loses_its_password_and_secret_query_values_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_url_of_a_text_is_redacted_and_the_words_around_it_kept() -> None:
    line = f'HTTP Request: POST http://ann:{CANARY}@h/mcp?token={CANARY} "HTTP/1.1 200 OK" (see https://h/x)'
    assert redact_urls(line) == 'HTTP Request: POST http://ann:***@h/mcp?token=*** "HTTP/1.1 200 OK" (see https://h/x)'
    assert redact_urls("cannot reach it", mask="(hidden)") == "cannot reach it"
    retries = f"Max retries exceeded with url: /v1/metrics?access_token={CANARY}&page=2 (Caused by …)"
    assert redact_urls(retries) == ("Max retries exceeded with url: /v1/metrics?access_token=***&page=2 "
                                    "(Caused by …)")
    assert redact_urls("is it? yes/no?") == "is it? yes/no?"


def test_a_log_line_of_any_logger_shows_its_urls_without_their_secrets_traceback_included() -> None:
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s %r",
                               ("POST", f"http://ann:{CANARY}@h/mcp?token={CANARY}", "HTTP/1.1 200 OK"), None)
    try:
        raise ConnectionError(f"lost http://h/mcp?api_key={CANARY}")
    except ConnectionError:
        record.exc_info = sys.exc_info()
    text = RedactingFormatter("%(name)s: %(message)s").format(record)
    assert CANARY not in text
    assert text.startswith("httpx: HTTP Request: POST http://ann:***@h/mcp?token=*** 'HTTP/1.1 200 OK'")
    assert "ConnectionError: lost http://h/mcp?api_key=***" in text


def test_code_is_a_secret_name_in_urls_only_so_a_flag_like_exit_code_stays_a_plain_name() -> None:
    assert secret_query_name("code") and secret_query_name("token")
    assert not secret_name("code") and not secret_name("--exit-code")
    assert redact_urls(f"see /cb?code={CANARY}&exit_code=3") == "see /cb?code=***&exit_code=3"
