"""The one door out of a sandboxed script's network namespace: loopback TCP to the cluster view's socket.

Run inside the sandbox, before the script, as ``python3 -I -S forward.py SOCKET PORT -- COMMAND...``
(standard library only, no site-packages). It listens on ``127.0.0.1:PORT`` of the sandbox's own
network namespace, starts COMMAND, and copies each connection's bytes to and from the Unix
``SOCKET``, which is the grader's read-only view of the lab cluster bind-mounted into the sandbox.
Nothing else is reachable from that namespace: it has only loopback, and the view refuses writes.
It exits with COMMAND's status (128 + the signal when a signal ended it, as a shell says).

Every run that reads the cluster starts one, so it imports only the interpreter's low-level modules
(``_socket``, ``_thread``, ``_signal``, which ``socket``, ``threading`` and ``signal`` wrap): importing
``socket``, ``subprocess`` and ``contextlib`` was half of its 20 ms; now it takes 10 ms (``bench/README.md``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C half: typeshed has no stub
import _socket
import _thread
import os
import sys

CHUNK = 65536
# What COMMAND starts with at their defaults: Python ignores SIGPIPE and SIGXFSZ.
DEFAULT_SIGNALS = (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGTERM)


def _shut(end: _socket.socket) -> None:
    try:
        end.shutdown(_socket.SHUT_RDWR)
    except OSError:
        return  # already gone


def _pump(source: _socket.socket, target: _socket.socket, finished: _thread.LockType | None = None) -> None:
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass  # either side went away: the connection is over
    finally:
        _shut(target)
        _shut(source)
        if finished is not None:
            finished.release()


def _serve_one(fd: int, path: str) -> None:
    client = _socket.socket(fileno=fd)
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    client.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    back = _thread.allocate_lock()
    back.acquire()
    _thread.start_new_thread(_pump, (upstream, client, back))
    _pump(client, upstream)
    back.acquire()  # the way back is done too
    client.close()
    upstream.close()


def _accept_forever(listener: _socket.socket, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # the descriptor: accept() wraps it
        except OSError:
            return
        _thread.start_new_thread(_serve_one, (fd, path))


def _exec(command: list[str]) -> None:
    """In the forked child: COMMAND, with the signals Python ignores back at their defaults, as subprocess does.
    (posix_spawn would leave glibc's two internal signals ignored in it.)"""
    try:
        for number in DEFAULT_SIGNALS:
            _signal.signal(number, _signal.SIG_DFL)
        os.execvp(command[0], command)
    except OSError as error:
        sys.stderr.write(f"forward.py: {command[0]}: {error.strerror}\n")
    os._exit(127)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: forward.py SOCKET PORT -- COMMAND...\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # COMMAND gets no descriptor but the standard three
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)  # open before the script starts; Python's descriptors are not inherited (PEP 446)
    child = os.fork()  # before any thread of ours, so the child only sets its signals and runs COMMAND
    if child == 0:
        _exec(command)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    _thread.start_new_thread(_accept_forever, (listener, path))
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
