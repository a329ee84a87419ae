"""The lab root's files, watched with inotify in a thread of its own: each change reported as its path.

Every folder under the root is watched (links are not followed; ``.git`` and ``__pycache__`` are left out,
and at most ``FOLDER_LIMIT`` folders), and an editor's own files (vim's swap files, emacs's locks and backups)
are no change: vim rewrites its swap file every few seconds while a file is open. A root that does not exist yet is waited for from the nearest folder
above it that does. A queue overflow is reported as an unknown change, which touches every step.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from . import inotify
from .changes import FILE, UNKNOWN, Change, Report

SKIPPED = frozenset({".git", "__pycache__"})
EDITORS_OWN = (".swp", ".swx", ".swo", "~")  # and names starting ".#", and vim's "4913" probe


def editors_own(name: str) -> bool:
    return name.endswith(EDITORS_OWN) or name.startswith(".#") or name == "4913"


FOLDER_LIMIT = 4096
READ_TIMEOUT = 0.25  # how soon the thread notices a stop


class TreeWatch:
    def __init__(self, root: Path, report: Report) -> None:
        self.root = root
        self.report = report
        self.problems: list[str] = []  # what could not be watched, for the view
        self._folders: dict[int, Path] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpulab-watch-files", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)  # the first watches are in place before the first grading starts

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            with inotify.Inotify() as notify:
                self._watch_root(notify)
                self._ready.set()
                while not self._stop.is_set():
                    for event in notify.read(READ_TIMEOUT):
                        self._handle(notify, event)
        except OSError as error:
            self.problems.append(f"the lab root's files are not watched ({error})")
        finally:
            self._ready.set()

    def _watch_root(self, notify: inotify.Inotify) -> None:
        self._folders.clear()
        if self.root.is_dir():
            self._add_tree(notify, self.root)
            return
        above = next((path for path in self.root.parents if path.is_dir()), Path("/"))
        self._folders[notify.add(above, inotify.CREATE | inotify.MOVED_TO)] = above

    def _add_tree(self, notify: inotify.Inotify, top: Path) -> None:
        for folder, names, _ in os.walk(top):
            names[:] = [name for name in names if name not in SKIPPED]
            if len(self._folders) >= FOLDER_LIMIT:
                self.problems.append(f"only {FOLDER_LIMIT} folders of {self.root} are watched")
                return
            try:
                self._folders[notify.add(Path(folder), inotify.CHANGES | inotify.ONLYDIR)] = Path(folder)
            except inotify.InotifyError as error:
                self.problems.append(f"{folder} is not watched ({error.strerror})")

    def _handle(self, notify: inotify.Inotify, event: inotify.Event) -> None:
        if event.mask & inotify.Q_OVERFLOW:
            self.report(Change(UNKNOWN, ""))
            return
        if event.mask & inotify.IGNORED:
            self._folders.pop(event.wd, None)
            return
        folder = self._folders.get(event.wd)
        if folder is None:
            return
        path = folder / event.name if event.name else folder
        if not self._under_root(folder):  # waiting for the root: only its own making matters
            if path == self.root or path in self.root.parents:
                self._rewatch(notify)
            return
        if event.mask & (inotify.DELETE_SELF | inotify.MOVE_SELF) and folder == self.root:
            self._rewatch(notify)
            return
        if event.name in SKIPPED or any(part in SKIPPED for part in path.relative_to(self.root).parts):
            return
        if event.is_dir and event.mask & (inotify.CREATE | inotify.MOVED_TO):
            self._add_tree(notify, path)
        if event.name and not editors_own(event.name):  # a folder's own events come again as its parent's
            self.report(Change(FILE, path.relative_to(self.root).as_posix()))

    def _under_root(self, folder: Path) -> bool:
        return folder == self.root or self.root in folder.parents

    def _rewatch(self, notify: inotify.Inotify) -> None:
        """The root appeared, went or moved: watch it anew, and report every step touched."""
        for wd in list(self._folders):
            notify.remove(wd)
        self._watch_root(notify)
        self.report(Change(UNKNOWN, ""))
