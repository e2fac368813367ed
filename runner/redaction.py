"""Secrets kept out of what people see: credentials inside URLs, wherever a URL is shown.

    redact_url("http://ann:pw@host/mcp?token=t0k&page=2")  # 'http://ann:***@host/mcp?token=***&page=2'
    redact_urls("POST http://ann:pw@host/mcp 200")          # every URL of a text, the rest as it is
    handler.setFormatter(RedactingFormatter())               # every line a log handler writes

A URL's password is always hidden, and so is a user name that looks like a credential or that
stands alone (``https://TOKEN@host``); a query value is hidden when its name says it is a secret
(``token``, ``api_key``, ``sig``, …, and in a URL ``code``, an OAuth authorization code) or when it
looks like one (``ghp_…``, a JWT, a long random string), and so is such a value in the fragment
(``#access_token=…``) or a fragment that looks like a credential itself. The same rules decide what
``import`` moves into variables (``code`` aside: ``--exit-code 3`` is no secret) and what
``config`` hides.
"""

from __future__ import annotations

import logging
import re

MASK = "***"

_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|passwd|pwd|api_?key|apikey|access_?key|private_?key|credential|"
    r"auth|cookie|session|bearer|signature|(^|_)sig($|_)|salt|(^|_)pat($|_)|(^|_)key($|_)|dsn|"
    r"connection_?string)",
    re.IGNORECASE,
)
_CREDENTIAL_PREFIXES = (
    "sk-", "sk_", "rk_", "pk_live", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xoxb-", "xoxp-", "xoxa-", "xapp-", "AKIA", "ASIA", "AIza", "hf_", "npm_", "pypi-", "dop_v1_",
    "lin_api_", "ntn_", "secret_", "eyJ",
)
_RANDOM = re.compile(r"^[A-Za-z0-9_\-+=.~]{24,}$")
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)(?P<password>[^@\s/]+)(?=@)")
AUTH_SCHEME = re.compile(r"^(?P<scheme>Bearer|Basic|Token|Bot|ApiKey)\s+(?P<credential>\S.*)$",
                         re.IGNORECASE)

# A URL inside free text: a scheme, then anything up to white space or a quote or bracket; and a
# path with a query without them (urllib3 says "Max retries exceeded with url: /v1/traces?key=…").
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_QUERY_IN_TEXT = re.compile(r"(?P<path>/[^\s?'\"<>`]*)\?(?P<query>[^\s'\"<>`#]+)")
# The parts of one URL: scheme://, userinfo@ (optional), the rest of the authority, and the rest.
_URL_PARTS = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?:(?P<userinfo>[^/?#\s]*)@)?"
                        r"(?P<host>[^/?#\s]*)(?P<path>[^?#\s]*)(?:\?(?P<query>[^#\s]*))?(?P<fragment>#\S*)?$")
_QUERY_ITEM = re.compile(r"(?P<name>[^=&;]*)=(?P<value>[^&;]*)")
_SECRET_IN_URLS_ONLY = frozenset({"code"})  # a flag named so (--exit-code) is no secret
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")  # ${NAME} as written: no secret, its value is


def secret_name(name: str) -> bool:
    """The name of a variable, header, flag or query parameter that holds a secret."""
    return bool(_SECRET_NAME.search(name.replace("-", "_")))


def secret_query_name(name: str) -> bool:
    """The name of a URL's query or fragment parameter that holds a secret: a secret name, or
    ``code`` (the OAuth authorization code a redirect carries)."""
    return secret_name(name) or name.strip().lower() in _SECRET_IN_URLS_ONLY


def looks_like_credential(value: str) -> bool:
    """A value that is a credential whatever it is called."""
    text = value.strip()
    if text.startswith(_CREDENTIAL_PREFIXES) or AUTH_SCHEME.match(text) or URL_PASSWORD.search(text):
        return True
    if _RANDOM.match(text) and "/" not in text and not text.startswith(("-", ".")):
        return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)
    return False


def redact_url(url: str, mask: str = MASK) -> str:
    """``url`` with its password, a credential-like user name and secret query and fragment
    values replaced by ``mask``; scheme, host, port, path and harmless values as they were."""
    parts = _URL_PARTS.match(url)
    if parts is None:
        return url
    userinfo, query = parts["userinfo"], parts["query"]
    shown = parts["scheme"]
    if userinfo is not None:
        user, has_password, password = userinfo.partition(":")
        if _REFERENCE.fullmatch(password) and (_REFERENCE.fullmatch(user) or not looks_like_credential(user)):
            shown += userinfo + "@"
        elif has_password and user and not looks_like_credential(user):
            shown += f"{user}:{mask}@"
        else:
            shown += f"{mask}@"
    shown += parts["host"] + parts["path"]
    if query is not None:
        shown += "?" + _redacted_query(query, mask)
    if parts["fragment"] is not None:
        shown += "#" + _redacted_fragment(parts["fragment"][1:], mask)
    return shown


def _redacted_query(query: str, mask: str) -> str:
    return _QUERY_ITEM.sub(lambda item: _query_item(item, mask), query)


def _redacted_fragment(fragment: str, mask: str) -> str:
    # ``#access_token=…&state=…`` (an OAuth implicit grant) is read as a query; ``#ghp_…`` whole.
    if "=" not in fragment and not _REFERENCE.fullmatch(fragment) and looks_like_credential(fragment):
        return mask
    return _redacted_query(fragment, mask)


def _query_item(item: re.Match[str], mask: str) -> str:
    name, value = item["name"], item["value"]
    secret = secret_query_name(name) or looks_like_credential(value)
    if value and secret and not _REFERENCE.fullmatch(value):
        return f"{name}={mask}"
    return item[0]


def redact_urls(text: str, mask: str = MASK) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`, and the secret values of
    a query after a bare path (``/v1/traces?token=…``) hidden too."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda found: redact_url(found[0], mask), text)
    if "?" in text:
        text = _QUERY_IN_TEXT.sub(lambda found: f"{found['path']}?{_redacted_query(found['query'], mask)}",
                                  text)
    return text


_WORD = re.compile(r"[^\s'\"(),;]+")


def redact_credentials(text: str, mask: str = MASK) -> str:
    """``text`` (a provider's error message, say) with its URLs redacted and every word that
    looks like a credential (``sk-…``, a JWT, a long random string) hidden."""
    def masked(word: re.Match[str]) -> str:
        core = word[0].rstrip(".:")
        return mask + word[0][len(core):] if looks_like_credential(core) else word[0]

    return _WORD.sub(masked, redact_urls(text, mask))


class RedactingFormatter(logging.Formatter):
    """A handler's formatter whose lines show URLs redacted, whoever logged them (httpx and the MCP
    SDK log each request's URL) and in tracebacks too: the whole formatted line goes through
    :func:`redact_urls`, so no record is changed for the other handlers."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_urls(super().format(record))
