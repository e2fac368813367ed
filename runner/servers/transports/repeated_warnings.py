"""Warnings a server can provoke without end: the first few shown, the rest counted and summarised.

A server that writes junk to stdout in a loop, or answers every request with a body that does not
parse, would otherwise put one warning line per offence on the terminal (216,500 lines in 40 s
were seen). Each kind of warning about each server is a :class:`RepeatedWarning`: per interval the
first ``shown`` occurrences are logged, the others only counted; the count is logged as one line
when the next interval begins, and when the connection ends (:meth:`RepeatedWarning.flush`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

SHOWN_PER_INTERVAL = 3
INTERVAL = 10.0  # seconds


class RepeatedWarning:
    """One kind of warning (``what``, a plural noun phrase) about server ``key``."""

    def __init__(
        self,
        logger: logging.Logger,
        key: str,
        what: str,
        *,
        shown: int = SHOWN_PER_INTERVAL,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.key = key
        self.what = what
        self._shown_per_interval = shown
        self._interval = interval
        self._clock = clock
        self._interval_start = -float("inf")
        self._shown = 0
        self.suppressed = 0

    def warn(self, message: str) -> bool:
        """Log ``message`` unless this interval's share is used up; True if it was logged."""
        now = self._clock()
        if now - self._interval_start >= self._interval:
            self.flush()
            self._interval_start = now
            self._shown = 0
        if self._shown >= self._shown_per_interval:
            self.suppressed += 1
            return False
        self._shown += 1
        self._emit(message)
        return True

    def flush(self) -> None:
        """Log how many were counted and not shown since the last summary, if any were."""
        if self.suppressed:
            count, self.suppressed = self.suppressed, 0
            self._emit(f"server {self.key}: {count:,} more {self.what} not shown")

    def _emit(self, line: str) -> None:
        self._logger.warning("%s", line)
