"""How a connection reaches its server: stdio subprocesses (``stdio``) started directly, in a
container or under bubblewrap (``isolation``) with an allow-listed environment (``environment``)
and reaped with the runner (``child_reaping``); websocket (``websocket``); and the per-attempt link
the supervisor watches (``links``), which also opens streamable HTTP and SSE.
"""
