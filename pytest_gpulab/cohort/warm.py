"""Gradings forked from a warm server: ``python -m pytest ARGS`` as a process, without its imports each time.

A grading is a whole ``pytest`` process, and most of a short one is importing pytest, its plugins and the
kubernetes client (``bench/README.md``); a batch or a self-test runs hundreds. :class:`WarmGradings` starts
one server process that imports them once, then forks each grading from it: a process of its own, with
the environment, working directory, output file and exit status ``python -m pytest`` would have had. A
grading whose environment would start Python differently (a ``PYTHON*`` variable of its own) runs cold.

The server reads requests from one Unix socket: a JSON message (args, cwd, env, timeout) with two
descriptors, the output file and a reply socket. For each it forks a watcher, which forks the grading,
waits for it, and writes its exit status to the reply socket. The watcher is the grading's parent, so it
alone can stop it: at the timeout, or when the reply socket closes because the caller stopped waiting or
died. The server ends when its socket closes, so nothing outlives the caller.

A preloaded module that read the environment as it was imported keeps the server's: this package reads it
only when asked (the client's default kubeconfig included, ``cluster/transport.py``).

The server runs what it is asked, so only the caller can ask: its socket is one end of a socketpair, never a
path, and no descriptor of it reaches a watcher, a grading or a learner's script.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

PRELOAD = ("pytest", "pytest_gpulab.plugin", "kubernetes.client")
MAX_MESSAGE = 1 << 20
SERVER_START = 60.0  # seconds for the server's imports
TIMED_OUT = "timeout"
STOP_WAIT = 5.0  # seconds a cold grading told to stop (SIGTERM) has to write its report and end


class Gradings(Protocol):
    def run(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, timeout: float) -> int:
        """``python -m pytest ARGS``'s exit status, its output in ``output``; subprocess.TimeoutExpired once
        ``timeout`` seconds passed."""


class ColdGradings:
    """Each grading a new interpreter, as ``gpulab grade`` runs its one, in a process group of its own: when the
    caller stops waiting (its timeout, Ctrl-C, the SIGTERM ``gpulab job-entry`` turns into :class:`Stopped`), the
    grading is sent SIGTERM (it writes its report as interrupted and ends its scripts), then SIGKILL after
    ``STOP_WAIT`` seconds, its group with it."""

    def run(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, timeout: float) -> int:
        with open(output, "w") as out:
            grading = subprocess.Popen(
                [sys.executable, "-m", "pytest", *args], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                return grading.wait(timeout)
            except subprocess.TimeoutExpired:
                _stop(grading)
                raise subprocess.TimeoutExpired(["pytest", *args], timeout) from None
            except BaseException:
                _stop(grading)
                raise


class Stopped(BaseException):
    """The grader was told to stop (SIGTERM): the grading in hand ends unrecorded, and is graded again later."""


def _stop(grading: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the grading's process group, a bounded wait for it to end, then SIGKILL to what is left."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(grading.pid, sent)
        try:
            grading.wait(STOP_WAIT)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(grading.pid, signal.SIGKILL)  # what the grading left in its group


COLD = ColdGradings()


def _pidfds() -> bool:
    """Whether this kernel gives process descriptors (Linux 5.3 and later)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def _startup(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that change how Python starts."""
    return {name: value for name, value in env.items() if name.startswith("PYTHON")}


class WarmGradings:
    """The server, from ``with WarmGradings() as gradings:`` to its end; :meth:`run` is safe from many threads."""

    def __init__(self, *, own_session: bool = False) -> None:
        """``own_session``: the server and its gradings in a session of their own, out of reach of the terminal's
        Ctrl-C (the caller stops them itself, once)."""
        self.own_session = own_session
        self._socket: socket.socket | None = None
        self._server: subprocess.Popen[bytes] | None = None
        self._startup = _startup(os.environ)

    @property
    def server_pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    def __enter__(self) -> WarmGradings:
        if not _pidfds():
            return self  # every grading cold: a watcher could not stop its grading
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._server = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=self.own_session,
            )  # fmt: skip
        self._socket = ours
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._socket is not None:
            self._socket.close()  # the server's loop ends
        if self._server is not None:
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        output: Path,
        timeout: float,
        started: Callable[[int], None] | None = None,
    ) -> int:
        """As :class:`Gradings`; ``started`` is told the grading's pid as soon as it is forked (a grading run
        cold is not forked here: it is not told)."""
        warm = self._socket and _startup(env) == self._startup
        said = self._ask(args, cwd, env, output, timeout, started) if warm else None
        if said is None:
            return COLD.run(args, cwd=cwd, env=env, output=output, timeout=timeout)
        lines = said.splitlines()
        if len(lines) != 2:
            raise OSError(f"the grading (pid {lines[0]}) ended without its exit status")
        status, _, why = lines[1].partition(" ")
        if why == TIMED_OUT:
            raise subprocess.TimeoutExpired(["pytest", *args], timeout)
        return int(status)

    def _ask(
        self,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        output: Path,
        timeout: float,
        started: Callable[[int], None] | None = None,
    ) -> str | None:
        """The watcher's reply (the grading's pid, then its exit status); None if the server did not fork it:
        it is gone, or the request is too long."""
        assert self._socket is not None
        request = json.dumps({"args": list(args), "cwd": str(cwd), "env": dict(env), "timeout": timeout}).encode()
        reply, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with reply, open(output, "w") as out:
            try:
                with theirs:
                    socket.send_fds(self._socket, [request], [out.fileno(), theirs.fileno()])
            except OSError:
                return None
            return _read_all(reply, timeout + SERVER_START, started) or None


def _read_all(reply: socket.socket, timeout: float, started: Callable[[int], None] | None = None) -> str:
    """The watcher's whole reply; ``started`` is told its first line, the grading's pid, as soon as it comes."""
    reply.settimeout(timeout)
    chunks = []
    while chunk := reply.recv(4096):
        chunks.append(chunk)
        told = b"".join(chunks)
        if started is not None and b"\n" in told:
            started(int(told.split(b"\n", 1)[0]))
            started = None
    return b"".join(chunks).decode().strip()


# -- the server's side -------------------------------------------------------------------------------


def _preload() -> None:
    """What every grading imports and takes longest: pytest, this plugin and the kubernetes client. Other
    plugins are left to pytest, which would warn that it cannot rewrite their asserts (this package's
    docstring says PYTEST_DONT_REWRITE, so it is not warned of; its asserts are invariants)."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # a module that cannot load here loads, or fails, in the grading itself
            continue


def serve(server: socket.socket) -> tuple[dict[str, Any], int] | None:
    """Fork a watcher for each request until the socket closes; in a grading's process, its request and output."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the watchers
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the gradings, which end as interrupted
    while True:
        message, fds, _, _ = socket.recv_fds(server, MAX_MESSAGE, 2)
        if not message:
            return None
        if os.fork() == 0:
            server.close()
            return _watch(json.loads(message), *fds)
        for fd in fds:
            os.close(fd)


def _watch(request: dict[str, Any], output: int, reply: int) -> tuple[dict[str, Any], int]:
    """In the watcher: fork the grading and report its exit status; only the grading returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        os.close(reply)
        return request, output
    try:
        os.close(output)
        os.write(reply, f"{pid}\n".encode())
        pidfd = os.pidfd_open(pid)
        ended, _, _ = select.select([pidfd, reply], [], [], request["timeout"])
        timed_out = not ended
        if pidfd not in ended:  # out of time, or the caller stopped waiting
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.write(reply, f"{status} {TIMED_OUT if timed_out else ''}".encode())
    finally:
        os._exit(0)


def grade(request: dict[str, Any], output: int) -> int:
    """In the grading's process: what ``python -m pytest`` would have done, from the request's directory."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd in (1, 2):
        os.dup2(output, fd)
    os.close(devnull)
    os.close(output)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # as ``python -m`` puts the working directory first
    import pytest

    return int(pytest.main(request["args"]))


def main(fd: int) -> int:
    server = socket.socket(fileno=fd)
    _preload()
    forked = serve(server)
    if forked is None:
        return 0
    return grade(*forked)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
