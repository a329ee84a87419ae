"""What is still running: the lab clusters' processes, found by their command lines."""

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
