"""What ``serve`` and ``web`` share about listening: the bearer token a caller must present.

Kept out of both command modules because a command module may define only its own commands.
"""

from __future__ import annotations

import os

import click


def token_from_env(token_env: str | None) -> str | None:
    """The bearer token named by ``--token-env`` (None without it); an unset variable is a usage error."""
    if token_env is None:
        return None
    token = os.environ.get(token_env)
    if not token:
        raise click.BadParameter(
            f"the environment variable {token_env} is not set or empty", param_hint="--token-env"
        )
    return token
