"""The one door out of a sandboxed script's network namespace: loopback TCP to the cluster view's socket.

Run inside the sandbox, before the script, as ``python3 -I -S forward.py SOCKET PORT -- COMMAND...``
(standard library only, no site-packages). It listens on ``127.0.0.1:PORT`` of the sandbox's own
network namespace, starts COMMAND, and copies each connection's bytes to and from the Unix
``SOCKET``, which is the grader's read-only view of the lab cluster bind-mounted into the sandbox.
Nothing else is reachable from that namespace: it has only loopback, and the view refuses writes.
It exits with COMMAND's status (128 + the signal when a signal ended it, as a shell says).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass  # either side went away: the connection is over
    finally:
        for end in (target, source):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve_one(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept_forever(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve_one, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: forward.py SOCKET PORT -- COMMAND...\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_accept_forever, args=(listener, path), daemon=True).start()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    child = subprocess.Popen(command, close_fds=True)  # the listener is open before the script starts
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
