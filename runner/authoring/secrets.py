"""Which values are secrets: used by ``import`` (never copy them) and ``config`` (never show them).

A value is a secret when its name says so (``GITHUB_TOKEN``, ``Authorization``) or when it looks
like a credential whatever its name (``ghp_…``, ``sk-…``, a JWT, a password inside a URL, a long
random string). Erring on the side of secrecy costs a variable to set; the other error leaks a key.
"""

from __future__ import annotations

import re

_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|passwd|pwd|api_?key|apikey|access_?key|private_?key|credential|"
    r"auth|cookie|session|bearer|signature|salt|(^|_)pat($|_)|(^|_)key($|_)|dsn|connection_?string)",
    re.IGNORECASE,
)
_HARMLESS_HEADERS = frozenset({
    "accept", "accept-language", "content-type", "user-agent", "mcp-protocol-version", "x-request-id",
})
_CREDENTIAL_PREFIXES = (
    "sk-", "sk_", "rk_", "pk_live", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xoxb-", "xoxp-", "xoxa-", "xapp-", "AKIA", "ASIA", "AIza", "hf_", "npm_", "pypi-", "dop_v1_",
    "lin_api_", "ntn_", "secret_", "eyJ",
)
_RANDOM = re.compile(r"^[A-Za-z0-9_\-+=.~]{24,}$")
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)(?P<password>[^@\s/]+)(?=@)")
AUTH_SCHEME = re.compile(r"^(?P<scheme>Bearer|Basic|Token|Bot|ApiKey)\s+(?P<credential>\S.*)$",
                         re.IGNORECASE)


def secret_name(name: str) -> bool:
    """The name of a variable, header, flag or query parameter that holds a secret."""
    return bool(_SECRET_NAME.search(name.replace("-", "_")))


def looks_like_credential(value: str) -> bool:
    """A value that is a credential whatever it is called."""
    text = value.strip()
    if text.startswith(_CREDENTIAL_PREFIXES) or AUTH_SCHEME.match(text) or URL_PASSWORD.search(text):
        return True
    if _RANDOM.match(text) and "/" not in text and not text.startswith(("-", ".")):
        return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)
    return False


def secret_env(name: str, value: str) -> bool:
    return secret_name(name) or looks_like_credential(value)


def secret_header(name: str, value: str) -> bool:
    return name.lower() not in _HARMLESS_HEADERS or looks_like_credential(value)


def variable_name(*parts: str) -> str:
    """``github``, ``x-api-key`` -> ``GITHUB_X_API_KEY``: a valid, conventional variable name."""
    text = "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).strip("_") for part in parts if part)
    text = re.sub(r"_+", "_", text).upper().strip("_") or "SECRET"
    return text if not text[0].isdigit() else f"V_{text}"
