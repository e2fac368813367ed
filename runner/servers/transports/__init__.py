"""How a connection reaches its server: stdio subprocesses (``stdio``) started directly, in a
container or under bubblewrap (``isolation``) with an allow-listed environment (``environment``)
and reaped with the runner (``child_reaping``); websocket (``websocket``); and the per-attempt link
the supervisor watches (``links``), which also opens streamable HTTP and SSE. What a hostile server
can cost is bounded there too: the size of one message on every transport (``message_limits``),
repeated warnings (``repeated_warnings``), and the SDK's tracebacks about a server's output, which
become one line naming it (``library_logs``).
"""
