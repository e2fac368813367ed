"""``mcp-run test``: regression tests for an agent, declared in YAML next to its manifest.

    cases.py      case files: models, located errors, discovery in ``evals/``, the JSON Schema
    matching.py   trajectory match modes, argument matchers, answer checks
    cassettes.py  what a run saw, as YAML next to the case; secrets scrubbed; drift
    sessions.py   cases told apart by thread: the model and tool calls live, recorded or replayed
    replay.py     stand-in servers that offer what the cassettes recorded
    judge.py      a model grades a conversation against criteria
    running.py    cases in parallel over one runtime; watch mode
    report.py     table and first difference, JSON, JUnit XML
    saving.py     a chat thread written as a case (``/save NAME``)
"""
