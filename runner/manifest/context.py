"""``context:``, what one model request may carry: the limit, and how older turns make room.

Its own module (referenced by one field of :class:`runner.manifest.Manifest`) so that several
agents of one manifest can later each declare their own block. What it does at every model step
is :mod:`runner.agent.context`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from runner.manifest.basics import SCRIPTED_ID, PositiveInt, Spec

# max_tokens unset: this share of the model's input window (the counts are approximate).
WINDOW_SHARE = 0.85


class ContextSpec(Spec):
    """How much of the conversation each model request carries."""

    max_tokens: PositiveInt | None = Field(
        None,
        description=(
            "Most tokens one model request may carry (system prompt, tool definitions and "
            "messages, counted approximately). Unset: the model's input window less 15% where "
            "LangChain's model profile knows it, else no limit."
        ),
    )
    strategy: Literal["trim", "summarize"] = Field(
        "trim",
        description=(
            "What makes room once a request would pass max_tokens: trim leaves the oldest turns "
            "out of the request; summarize replaces them by a summary written once and kept in "
            "the thread. The thread itself always keeps every message."
        ),
    )
    keep_last_turns: PositiveInt = Field(
        2,
        description=(
            "The most recent turns sent whole (as far as they fit); large tool results of older "
            "turns are the first to be shortened to a reference."
        ),
    )
    summarize_with: Annotated[str, Field(min_length=1)] | None = Field(
        None,
        description="Model id writing the summaries (strategy: summarize); default the agent's model.",
    )

    @model_validator(mode="after")
    def _summarizer_fits(self) -> ContextSpec:
        if self.summarize_with is not None and self.strategy != "summarize":
            raise ValueError("'summarize_with' is only used with 'strategy: summarize'")
        if self.summarize_with == SCRIPTED_ID:
            raise ValueError("the 'scripted' model plays the agent's own script: leave "
                             "'summarize_with' unset to summarize with it")
        return self
