"""Which values are secrets: used by ``import`` (never copy them) and ``config`` (never show them).

A value is a secret when its name says so (``GITHUB_TOKEN``, ``Authorization``) or when it looks
like a credential whatever its name (``ghp_…``, ``sk-…``, a JWT, a password inside a URL, a long
random string). Erring on the side of secrecy costs a variable to set; the other error leaks a key.
"""

from __future__ import annotations

import re

from runner.redaction import looks_like_credential, secret_name

_HARMLESS_HEADERS = frozenset({
    "accept", "accept-language", "content-type", "user-agent", "mcp-protocol-version", "x-request-id",
})


def secret_env(name: str, value: str) -> bool:
    return secret_name(name) or looks_like_credential(value)


def secret_header(name: str, value: str) -> bool:
    return name.lower() not in _HARMLESS_HEADERS or looks_like_credential(value)


def variable_name(*parts: str) -> str:
    """``github``, ``x-api-key`` -> ``GITHUB_X_API_KEY``: a valid, conventional variable name."""
    text = "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).strip("_") for part in parts if part)
    text = re.sub(r"_+", "_", text).upper().strip("_") or "SECRET"
    return text if not text[0].isdigit() else f"V_{text}"
