"""Where a grading's runs started ahead go: a pool in which each working run holds one of the machine's cores, and a
run that only waits gives its core to the next.

A run's start-up is CPU work (bubblewrap, bash, a kubectl), so runs started ahead go one per core. But a run may
only wait: a kubectl between its retries on an API server that fails, or a script that sleeps until its timeout.
Such a run, seen waiting by its supervision (``sandbox/watches.py``), gives its core back (:meth:`Seat.idle`) and
goes on beside the others; so the runs of a script that hangs in each of its circumstances hang side by side, not
one pair of cores after another. A check's own run (not started ahead) holds no seat, as before. Usable without
pytest.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

WAITING_RUNS = 32  # runs that may wait side by side, besides one working per core


class Seat:
    """One run's core: held while the run works, given back while it only waits."""

    def __init__(self, cores: Cores) -> None:
        self._cores, self._held = cores, True
        self._lock = threading.Lock()

    def idle(self) -> None:
        """The run only waits (or ended): its core goes to the next run."""
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._cores.give_back()

    def hold(self) -> None:
        """The core taken again (a task's next run, which works again), if it was given back."""
        with self._lock:
            if self._held:
                return
        self._cores.take()
        with self._lock:
            self._held = True

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The core given back while the run waits for another to end, and taken again after."""
        self.idle()
        try:
            yield
        finally:
            self.hold()


class Cores:
    """The machine's cores, as seats for the runs that work."""

    def __init__(self, count: int) -> None:
        self._free = threading.Semaphore(count)

    def take(self) -> None:
        self._free.acquire()

    def give_back(self) -> None:
        self._free.release()

    def seat(self) -> Seat:
        self.take()
        return Seat(self)


SEAT: ContextVar[Seat | None] = ContextVar("gpulab_run_seat", default=None)


class CorePool(Executor):
    """An executor whose tasks each run holding a :class:`Seat` (:data:`SEAT` names it inside the task)."""

    def __init__(self, cores: int | None = None) -> None:
        count = cores or os.cpu_count() or 2
        self._cores = Cores(count)
        self._threads = ThreadPoolExecutor(max_workers=count + WAITING_RUNS, thread_name_prefix="gpulab-run")

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self._threads.submit(self._seated, fn, *args, **kwargs)

    def _seated(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        seat = self._cores.seat()
        token = SEAT.set(seat)
        try:
            return fn(*args, **kwargs)
        finally:
            SEAT.reset(token)
            seat.idle()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._threads.shutdown(wait=wait, cancel_futures=cancel_futures)
