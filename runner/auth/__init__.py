"""OAuth 2.1 authorization for http/sse servers: the MCP authorization flow, stored tokens, logins.

    context    who answers an authorization request here (nobody, by default); login hints
    store      token files (0600) per server URL and client, in the user's state folder; which
               record (and file) belongs to a server
    callback   the one-shot 127.0.0.1 listener for the login redirect
    flow       the SDK's provider wired to the store, the interaction and runner.errors;
               ``http_auth(key, spec)`` is the server layer's one call
    login      the browser interaction of ``mcp-run auth login``; ``forget_login`` (revokes, deletes)

Attributes are imported on first use, so naming the manifest (``set_manifest_file``) stays cheap.
"""

from runner.lazy import lazy_attributes

_EXPORTS = {
    "Interaction": "runner.auth.context",
    "NoInteraction": "runner.auth.context",
    "interacting": "runner.auth.context",
    "login_command": "runner.auth.context",
    "set_manifest_file": "runner.auth.context",
    "TokenRecord": "runner.auth.store",
    "token_dir": "runner.auth.store",
    "effective_auth": "runner.auth.store",
    "http_auth": "runner.auth.flow",
    "token_record": "runner.auth.store",
    "login_files": "runner.auth.store",
    "BrowserLogin": "runner.auth.login",
    "has_display": "runner.auth.login",
    "forget_login": "runner.auth.login",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_attributes(__name__, _EXPORTS)
