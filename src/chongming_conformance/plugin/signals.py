"""SIGTERM ends a configured run the way Ctrl-C does, so the report is still written.

CI runners cancel a job with SIGTERM (then SIGKILL after a grace period). Its
default action ends the interpreter at once: no ``pytest_sessionfinish``, no
report, and the stress workers are left to their self-destruct timers. Raised
as ``KeyboardInterrupt`` in the main thread instead, it takes pytest's
interrupt path: the session finishes, the report is written marked partial
(see ``run.INTERRUPTED_REASON``), and multiprocessing's exit handler
terminates the daemonic stress workers.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["sigterm_as_interrupt"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sigterm_as_interrupt() -> Callable[[], None]:
    """Route SIGTERM to ``KeyboardInterrupt``; return the function that restores the old handler.

    Does nothing (and restores nothing) outside the main thread, where Python
    cannot install handlers, or when someone else already handles SIGTERM.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: Any = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        return lambda: None  # the embedding program has its own plan for SIGTERM
    signal.signal(signal.SIGTERM, _interrupt)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, previous)

    return restore
