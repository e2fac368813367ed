"""What each model provider accepts as a tool name, as the providers document it.

The tests check generated names against these rules independently of the runner's own
``NAME_PATTERN`` (runner/tools/naming.py), which is meant to be their intersection.
"""

from __future__ import annotations

import re

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
GEMINI_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
