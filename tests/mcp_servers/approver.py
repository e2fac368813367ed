"""A person who approves every login: follows the authorization URL with an HTTP client.

``Approver`` is an ``Interaction`` (``runner.auth.context``) for in-process runs: it asks the
authorization endpoint (which answers with a redirect at once), and returns the redirect's ``code``,
``state`` and ``iss`` the way the 127.0.0.1 listener would. ``follow_login(url)`` does the same for a
login driven through the CLI, delivering the redirect to the CLI's listener; ``tamper`` rewrites the
redirect's query on the way (a forged ``state``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult

TIMEOUT = 30.0


def authorization_redirect(url: str) -> str:
    """The Location the authorization endpoint redirects the browser to."""
    response = httpx2.get(url, follow_redirects=False, timeout=TIMEOUT, trust_env=False)
    assert response.status_code in (302, 303, 307), f"{response.status_code}: {response.text}"
    return response.headers["location"]


def follow_login(url: str, tamper: Callable[[str], str] = lambda location: location) -> httpx2.Response:
    """Approve at ``url`` and deliver the redirect (through ``tamper``) to the CLI's listener."""
    return httpx2.get(tamper(authorization_redirect(url)), timeout=TIMEOUT, trust_env=False)


@dataclass
class Approver:
    """The ``Interaction`` of a person who approves every request; ``urls`` records what was asked."""

    urls: list[str] = field(default_factory=list)

    async def authorize(self, server: str, url: str, port: int) -> AuthorizationCodeResult:
        self.urls.append(url)
        async with httpx2.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            response = await client.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (302, 303, 307) or not location:
            raise RuntimeError(f"the authorization endpoint answered {response.status_code}: {response.text}")
        query = {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
