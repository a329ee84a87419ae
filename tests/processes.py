"""What is still running: the lab clusters' processes, found by their command lines."""

import os
import socket
from pathlib import Path


def running_commands() -> dict[int, str]:
    """pid -> command line of every process that can be read now."""
    commands = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            commands[int(cmdline.parent.name)] = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return commands


def processes_mentioning(text: str) -> set[str]:
    """Command lines of running processes that contain ``text`` (kwokctl itself left out)."""
    return {command for command in running_commands().values() if text in command and "kwokctl" not in command}


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        links = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for link in links:
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _address(field: str) -> tuple[str, int]:
    """``0100007F:F3A3`` (as /proc/net/tcp writes it: each 32-bit word in host order) -> ("127.0.0.1", 62371)."""
    host, port = field.split(":")
    words = [bytes.fromhex(host[index : index + 8])[::-1] for index in range(0, len(host), 8)]
    family = socket.AF_INET if len(words) == 1 else socket.AF_INET6
    return socket.inet_ntop(family, b"".join(words)), int(port, 16)


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """The TCP addresses the processes listen on, IPv4 and IPv6 (what ``ss -ltnp`` shows, without iproute2)."""
    inodes = set().union(*(_socket_inodes(pid) for pid in pids))
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[9]) in inodes:  # 0A: LISTEN
                found.add(_address(fields[1]))
    return found
