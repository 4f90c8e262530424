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
        self.received: signal.Signals | None = None  # the first stop signal, once one came

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.event.is_set():  # a second signal: stop now
            raise KeyboardInterrupt
        self.received = signal.Signals(signum)
        log.warning("received %s: finishing the current step, then checkpointing", self.received.name)
        self.event.set()

    def __exit__(self, *exc: object) -> None:  # an exception propagates
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class TrainingStopped(KeyboardInterrupt):
    """A run ended early by SIGINT or SIGTERM, after its checkpoint: `planet_sac.train` raises it (as Ctrl-C raises
    KeyboardInterrupt) so that a stopped run is never taken for a finished one. The CLI exits 128 + the signal's
    number (130 for SIGINT, 143 for SIGTERM), as a shell reports a process a signal ended."""

    def __init__(self, received: signal.Signals, step: int, total: int):
        super().__init__(f"stopped by {received.name} at step {step} of {total}; checkpointed: the same command "
                         "resumes")
        self.signal, self.step, self.total = received, step, total
