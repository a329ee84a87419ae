"""``gpulab watch LAB`` and ``pytest --lab LAB --watch``: the lab graded again after every change, as a live table.

The watch itself is :mod:`pytest_gpulab.watch`; here its settings are read (as ``pytest --lab`` reads them), its
view chosen (a live table on a terminal, a line per change otherwise), and Ctrl-C or SIGTERM made to stop it
with everything it started.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest

from .labs.discovery import Lab
from .settings import effective_kubeconfig
from .watch.core import watch
from .watch.grading import Grader
from .watch.reads import static_reads
from .watch.view import LiveView, PlainView


def header(grader: Grader, lab: Lab, seed_source: str) -> list[str]:
    """As ``pytest --lab`` heads its run: the lab, the root, the cluster and the seed, with where each came from."""
    return [
        f"gpulab watch: lab {lab.name} (rubric {lab.rubric_version}): {lab.title}",
        f"gpulab: learner root {grader.lab_root}",
        f"gpulab: cluster {grader.kubeconfig or '~/.kube/config'}",
        f"gpulab: seed {grader.seed} [{seed_source}] (replay with --lab-seed={grader.seed})",
        "",
    ]


def run_watch(grader: Grader, lab: Lab, seed_source: str, out: TextIO | None = None) -> int:
    """Watch until Ctrl-C or SIGTERM; 0 once everything it started has ended."""
    out = out or sys.stdout
    view_type = LiveView if out.isatty() else PlainView
    view = view_type(out, header(grader, lab, seed_source))
    stopping = threading.Event()
    stop = lambda signum, frame: stopping.set()  # noqa: E731  (Ctrl-C and SIGTERM stop the watch, once or twice)
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        watch(grader, static_reads(lab), view, stopping.wait)
    finally:
        view.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("gpulab watch: stopped", file=sys.stderr, flush=True)
    return 0


def grader_for(
    lab: Lab, root: Path | None, kubeconfig: str | None, seed: int, lab_dirs: Sequence[Path], options: Sequence[str]
) -> Grader:
    """Paths made absolute: each grading runs in a folder of the watch's own, where a relative one means another."""
    kubeconfig = effective_kubeconfig(kubeconfig, lab)
    absolute = os.pathsep.join(str(Path(part).expanduser().absolute()) for part in (kubeconfig or "").split(os.pathsep))
    return Grader(
        lab.name, lab.learner_root(root).absolute(), absolute if kubeconfig else None, seed,
        tuple(path.expanduser().absolute() for path in lab_dirs), tuple(options),
    )  # fmt: skip


def cmd_watch(args: argparse.Namespace, lab: Lab) -> int:
    seed = args.lab_seed if args.lab_seed is not None else secrets.randbelow(10**9)
    source = "the option --lab-seed" if args.lab_seed is not None else "a new one for this watch"
    options = [f"--script-timeout={args.script_timeout}"] if args.script_timeout else []
    root = Path(args.lab_root).expanduser() if args.lab_root else None
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG") or None
    return run_watch(grader_for(lab, root, kubeconfig, seed, args.lab_dirs, options), lab, source)


def add_watch_command(commands: Any, lab_dir: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        "watch", help="grade a lab now and again after every change, as a live table of its steps", parents=[lab_dir]
    )
    sub.add_argument("lab")
    sub.add_argument("--lab-root", metavar="PATH", help="the learner's lab directory (default: the lab's own)")
    sub.add_argument("--kubeconfig", metavar="PATH", help="the lab cluster's (default: KUBECONFIG, else gpulab up's)")
    sub.add_argument("--lab-seed", type=int, metavar="N", help="the seed of every grading (default: a new one)")
    sub.add_argument("--script-timeout", type=float, metavar="SECONDS", help="as pytest's --script-timeout")
    return sub


def watch_from_pytest(config: pytest.Config, lab: Lab | None) -> int:
    """``pytest --lab LAB --watch``: the run's settings, as the plugin resolved them, for every grading."""
    from .settings import lab_dirs_from, resolve

    settings = resolve(config, (lab, None) if lab is not None else None)
    if settings.lab is None:
        raise pytest.UsageError("--watch watches a lab: give it, e.g. `pytest --lab gpuop --watch`.")
    if settings.lab_cluster != "existing":
        raise pytest.UsageError("--watch grades the cluster you work on: it takes no --lab-cluster ephemeral.")
    options = (
        [] if settings.sources["script_timeout"] == "the default" else [f"--script-timeout={settings.script_timeout}"]
    )
    grader = grader_for(
        settings.lab, settings.lab_root, settings.kubeconfig, settings.seed, lab_dirs_from(config), options
    )
    return run_watch(grader, settings.lab, settings.sources["seed"])
