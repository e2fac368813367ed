"""A server whose tool answers with a short sound (``chime``: a WAV of silence, then a text).

    media.py
"""

from __future__ import annotations

import io
import sys
import wave
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `mcp_servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import Audio, MCPServer

from mcp_servers import _serve


def silence(seconds: float = 0.1, rate: int = 8000) -> bytes:
    """A mono 8-bit WAV of ``seconds`` of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(1)
        sound.setframerate(rate)
        sound.writeframes(bytes([128]) * int(seconds * rate))
    return buffer.getvalue()


def build() -> MCPServer:
    server = MCPServer("media")

    @server.tool()
    def chime() -> list[Audio | str]:
        """A short sound, and what it is."""
        return [Audio(data=silence(), format="wav"), "a chime"]

    return server


if __name__ == "__main__":
    _serve.main(build, sys.argv[1:])
