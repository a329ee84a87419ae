"""What is still running: the lab clusters' processes, found by their command lines."""

from pathlib import Path


def processes_mentioning(text: str) -> set[str]:
    """Command lines of running processes that contain ``text`` (kwokctl itself left out)."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command and "kwokctl" not in command:
            found.add(command)
    return found
