"""``gpulab``: build the lab cluster's binaries, bring a lab's cluster up and down, run a demo grading.

    gpulab build            build kwok, etcd and Kubernetes from Go modules (cached); --node: the real node's too
    gpulab labs             list the labs found (installed, and --lab-dir folders)
    gpulab up gpuop         start the lab's cluster; prints the KUBECONFIG to export
    gpulab down gpuop       stop it and delete its state
    gpulab demo gpuop       grade the lab's reference solution on a fresh embedded cluster
    gpulab selftest gpuop   prove the lab: its reference, its untouched start, its variants.toml
    gpulab watch gpuop      grade the lab now and after every change, as a live table (cli_watch.py)
    gpulab explain REPORT CHECK   what a check of a grading report read: files, objects, script runs

Grading away from the learner's machine (``cli_cohort.py``): ``bundle``, ``grade``,
``grade-batch``, ``cohort-report``, ``job-manifest``, ``job-entry``, ``gradescope``; a real node for the
Job's Pods (``cli_node.py``): ``node up``, ``node down``.

Every lab command takes ``--lab-dir PATH`` (also GPULAB_LAB_DIR) for labs
outside the installed ones, as ``pytest --lab-dir`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import yaml

from .cli_cohort import add_commands
from .cli_node import NODE_ERRORS, add_node_commands
from .cli_watch import add_watch_command, cmd_watch
from .cluster import toolchain
from .cluster.kwok import KwokCluster, KwokClusterError
from .cluster.toolchain import up_kubeconfig, up_workdir
from .cohort.bundle import BundleError
from .contracts import checkers_of
from .labs.discovery import Lab, UnknownLab, discover
from .labs.nearmisses import near_misses_in
from .reports.explain import explain_lines, find_check
from .selftest.judge import Row, messages, report_selftest
from .selftest.prove import run_selftest
from .selftest.variants import VariantsError, load_variants


def _lab_dirs(args: argparse.Namespace) -> list[Path]:
    given = [Path(path) for path in args.lab_dir or []]
    return given or [Path(part) for part in os.environ.get("GPULAB_LAB_DIR", "").split(os.pathsep) if part]


def _lab(args: argparse.Namespace) -> Lab:
    return discover(_lab_dirs(args)).get(args.lab)


def _lab_cluster(lab: Lab) -> KwokCluster:
    return KwokCluster.for_lab(lab, workdir=up_workdir(lab.name), outlives_caller=True)


def cmd_build(args: argparse.Namespace) -> int:
    toolchain.build(node=args.node)
    return 0


def cmd_labs(args: argparse.Namespace) -> int:
    catalog = discover(_lab_dirs(args))
    if args.lab:
        lab = _lab(args)
        print(f"{lab.name}\t{lab.title}\t{lab.folder}")
        for step, checker in checkers_of(lab.folder):
            print(f"  step {step}: {checker.contract()}")
        _print_near_misses(lab)
        return 0
    for name in catalog.names:
        lab = catalog.labs[name]
        print(f"{name}\t{lab.title}\t{lab.folder}")
    for problem in catalog.problems:
        print(f"gpulab: {problem}", file=sys.stderr)
    return 0


def _print_near_misses(lab: Lab) -> None:
    """The objects a copy of the cluster adds for the checkers, and which step's checker each serves (by kind alone
    where the lab hides their names)."""
    try:
        found = near_misses_in(lab.near_misses)
    except (OSError, yaml.YAMLError) as error:
        print(f"gpulab: the near misses of {lab.name} cannot be read: {error}", file=sys.stderr)
        return
    if found:
        print("  near misses (added to a copy of the cluster at grading, for the checkers to tell apart):")
    for miss in found:
        steps = ", ".join(map(str, miss.steps)) or "no step named"
        print(
            f"    {miss.kind} {'(hidden)' if lab.near_misses_hidden else miss.name} (step{'s' if len(miss.steps) > 1 else ''} {steps}): {miss.note}"
        )


def cmd_up(args: argparse.Namespace) -> int:
    lab = _lab(args)
    kubeconfig = up_kubeconfig(lab.name)
    cluster = _lab_cluster(lab)
    if kubeconfig.exists():
        if not cluster.is_running():
            print(
                f"the {lab.name} lab cluster's state is in {up_workdir(lab.name)} but it does not answer "
                f"(stopped, or the machine restarted): run `gpulab down {lab.name}`, then `gpulab up {lab.name}`",
                file=sys.stderr,
            )
            return 1
        print(f"the {lab.name} lab cluster is already up (`gpulab down {lab.name}` to remove it)", file=sys.stderr)
    else:
        cluster.start()
        print(f"the {lab.name} lab cluster is up in {cluster.startup_seconds:.1f}s", file=sys.stderr)
    print(f"export KUBECONFIG={shlex.quote(str(kubeconfig))}")
    print(f'export PATH={shlex.quote(str(toolchain.bin_dir()))}:"$PATH"')
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    workdir = up_workdir(args.lab)
    if not workdir.exists():
        print(f"no {args.lab} lab cluster is up", file=sys.stderr)
        return 0
    KwokCluster(f"gpulab-{args.lab}", workdir=workdir).stop()
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"the {args.lab} lab cluster is down", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Fresh cluster, reference solution into a temporary root, then `pytest --lab LAB` on both."""
    lab = _lab(args)
    if not lab.reference.is_file():
        print(f"gpulab: lab {lab.name} has no reference solution ({lab.reference})", file=sys.stderr)
        return 1
    toolchain.build()
    with tempfile.TemporaryDirectory(prefix=f"gpulab-{lab.name}-demo-") as root, KwokCluster.for_lab(lab) as cluster:
        print(
            f"lab cluster ready in {cluster.startup_seconds:.1f}s; running the reference solution into {root}",
            flush=True,
        )
        solved = subprocess.run(["bash", str(lab.reference), root], env=cluster.environment(), stdin=subprocess.DEVNULL)
        if solved.returncode != 0:
            print(f"the reference solution failed (exit {solved.returncode})", file=sys.stderr)
            return solved.returncode
        command = [
            sys.executable,
            "-m",
            "pytest",
            # --option=value throughout: pytest reads a bare value as a path when it picks its rootdir.
            f"--lab={lab.name}",
            f"--lab-root={root}",
            f"--kubeconfig={cluster.kubeconfig}",
            "-p",
            "no:cacheprovider",
            *(f"--lab-dir={path}" for path in _lab_dirs(args)),
            *args.pytest_args,
        ]
        print("$ " + shlex.join(command), flush=True)
        return subprocess.run(command, env=cluster.environment(), cwd=root, stdin=subprocess.DEVNULL).returncode


def cmd_explain(args: argparse.Namespace) -> int:
    """A check's evidence from a grading report, as the learner may read it."""
    try:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"gpulab: the report {args.report} could not be read ({error})", file=sys.stderr)
        return 1
    check = find_check(report, args.check) if isinstance(report, dict) else None
    if check is None:
        print(f"gpulab: no check {args.check!r} in {args.report}; give its id, as the report names it", file=sys.stderr)
        return 1
    print("\n".join(explain_lines(check)))
    return 0


def _progress(row: Row, finished: int, total: int) -> None:
    print(f"[{finished}/{total}] {row.label}: {row.verdict} ({row.seconds:.1f}s)", file=sys.stderr, flush=True)


def cmd_selftest(args: argparse.Namespace) -> int:
    """The lab proven on fresh clusters (``selftest.py``): the matrix, and exit 1 on any disagreement."""
    lab = _lab(args)
    if not lab.reference.is_file():
        print(f"gpulab: lab {lab.name} has no reference solution ({lab.reference})", file=sys.stderr)
        return 1
    load_variants(lab.folder)  # a mistake in variants.toml is named before any cluster starts
    toolchain.build(say=lambda message: print(message, file=sys.stderr, flush=True))  # stdout: the matrix
    started = time.monotonic()
    rows = run_selftest(lab, jobs=args.jobs, only=args.only or (), progress=_progress, bundles=not args.live_only)
    if args.messages:
        Path(args.messages).write_text(messages(rows))
    return report_selftest(lab.name, rows, time.monotonic() - started, args.jobs, sys.stdout)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpulab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('pytest-gpulab')}")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the lab cluster's binaries (cached)")
    build.add_argument(
        "--node", action="store_true", help="also the real node's: kubelet, containerd 2.x and runc (gpulab node up)"
    )
    build.set_defaults(run=cmd_build)
    lab_dir = argparse.ArgumentParser(add_help=False)
    lab_dir.add_argument(
        "--lab-dir", action="append", metavar="PATH", help="a lab folder, or a folder of them (may be repeated)"
    )
    labs = commands.add_parser("labs", help="list the labs found; with LAB, each checker's contract", parents=[lab_dir])
    labs.add_argument("lab", nargs="?", help="a lab: show the contract each of its checker scripts is held to")
    labs.set_defaults(run=cmd_labs)
    for name, run, text in (("up", cmd_up, "start a lab's cluster"), ("down", cmd_down, "stop a lab's cluster")):
        sub = commands.add_parser(name, help=text, parents=[lab_dir])
        sub.add_argument("lab")
        sub.set_defaults(run=run)
    demo = commands.add_parser("demo", help="grade the lab's reference solution on a fresh cluster", parents=[lab_dir])
    demo.add_argument("lab")
    demo.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    demo.set_defaults(run=cmd_demo)
    selftest = commands.add_parser(
        "selftest", help="prove a lab: its reference, its untouched start and its variants", parents=[lab_dir]
    )
    selftest.add_argument("lab")
    selftest.add_argument("--jobs", type=int, default=1, help="gradings at once (a cluster each, or the reference's)")
    selftest.add_argument(
        "--only", action="append", metavar="NAME", help="only the reference and this variant (may be repeated)"
    )
    selftest.add_argument(
        "--live-only",
        action="store_true",
        help="grade each row live only (by default each is also graded from its bundle, and the two must agree)",
    )
    selftest.add_argument(
        "--messages", metavar="FILE", help="write every trap's message, as the learner reads it, to FILE (Markdown)"
    )
    selftest.set_defaults(run=cmd_selftest)
    add_watch_command(commands, lab_dir).set_defaults(run=lambda args: cmd_watch(args, _lab(args)))
    explain = commands.add_parser("explain", help="print what a check of a grading report read (its evidence)")
    explain.add_argument("report", help="the grading report (report.json, --gpulab-report)")
    explain.add_argument("check", help="the check's id (gpunode.4.finds-pods-that-are-gone), or its step and name")
    explain.set_defaults(run=cmd_explain)
    add_commands(commands, lab_dir)
    add_node_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.lab_dirs = _lab_dirs(args) if hasattr(args, "lab_dir") else []
    try:
        return int(args.run(args))
    except (KwokClusterError, toolchain.ToolchainError, UnknownLab, BundleError, VariantsError, *NODE_ERRORS) as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
