"""What ``serve`` and ``web`` share about listening: the bearer token a caller must present.

Kept out of both command modules because a command module may define only its own commands.
"""

from __future__ import annotations

import os

import click

from runner.cli import stderr

MIN_TOKEN_LENGTH = 16  # characters below which a token is warned about: short enough to guess


def token_from_env(token_env: str | None) -> str | None:
    """The bearer token named by ``--token-env`` (None without it); an unset variable is a usage error."""
    if token_env is None:
        return None
    token = os.environ.get(token_env)
    if not token:
        raise click.BadParameter(
            f"the environment variable {token_env} is not set or empty", param_hint="--token-env"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        stderr.print(f"warning: the token in {token_env} has only {len(token)} characters: anyone who can "
                     f"reach the address could guess it (use at least {MIN_TOKEN_LENGTH}; for example "
                     "python -c 'import secrets; print(secrets.token_urlsafe(32))')", style="yellow",
                     markup=False, highlight=False)
    return token
