"""Stopping a training loop cleanly on SIGINT/SIGTERM (as Acme's `signals.runtime_terminator`)."""

from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger("planet_sac")


class GracefulStop:
    """While entered, SIGINT/SIGTERM set `event` instead of killing the process mid-write: the loop that polls it then
    finishes its step, checkpoints and exits. A second signal raises KeyboardInterrupt at once. Handlers are only
    installed from the main thread (the only one Python delivers signals to); the previous ones return on exit."""

    def __init__(self, event: threading.Event):
        self.event = event
        self.previous: dict = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.event.is_set():  # a second signal: stop now
            raise KeyboardInterrupt
        log.warning("received %s: finishing the current step, then checkpointing", signal.Signals(signum).name)
        self.event.set()

    def __exit__(self, *exc: object) -> None:  # an exception propagates
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
