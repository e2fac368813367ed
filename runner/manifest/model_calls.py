"""How one model request is tried: its timeout and its retries (``model.timeout``,
``model.retries``). A failed request is retried after a growing, jittered delay (or the one the
provider asks for with Retry-After) on rate limits, server errors, timeouts and answers cut off
mid-stream; once its attempts are spent, the next of ``model.fallbacks`` is tried the same way.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from runner.manifest.basics import Duration, Spec

DEFAULT_TIMEOUT = 120.0


class RetrySpec(Spec):
    """Retries of one model request (on 429, 5xx, timeouts, streams cut mid-answer)."""

    max_attempts: int = Field(
        3, ge=1, le=20, strict=True,
        description="Attempts of one request on one model, the first included (1: no retry).",
    )
    initial_delay: Duration = Field(
        1.0, description="Delay before the first retry; doubles at each one, with jitter.",
    )
    max_delay: Duration = Field(
        20.0,
        description=(
            "Longest delay between two attempts. A provider asking for a longer wait (Retry-After) "
            "is not waited for: the fallbacks are tried, or the request fails."
        ),
    )

    @model_validator(mode="after")
    def _max_above_initial(self) -> RetrySpec:
        if self.max_delay < self.initial_delay:
            raise ValueError("max_delay must be at least initial_delay")
        return self
