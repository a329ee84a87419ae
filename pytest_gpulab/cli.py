"""``gpulab``: build the lab cluster's binaries, bring a lab's cluster up and down, run a demo grading.

    gpulab build            build kwok, etcd and Kubernetes from Go modules (cached)
    gpulab up gpuop         start the lab's cluster; prints the KUBECONFIG to export
    gpulab down gpuop       stop it and delete its state
    gpulab demo gpuop       grade the lab's reference solution on a fresh embedded cluster
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from . import toolchain
from .kwok import KwokCluster, KwokClusterError
from .labs import LABS, UnknownLab, gradable_labs
from .settings import gpulab_up_kubeconfig


def _lab_workdir(lab: str) -> Path:
    return toolchain.cache_root() / "clusters" / lab


def _lab_cluster(lab: str) -> KwokCluster:
    return KwokCluster.for_lab(lab, workdir=_lab_workdir(lab))


def cmd_build(args: argparse.Namespace) -> int:
    toolchain.build()
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    kubeconfig = gpulab_up_kubeconfig(args.lab)
    cluster = _lab_cluster(args.lab)
    if kubeconfig.exists():
        if not cluster.is_running():
            print(
                f"the {args.lab} lab cluster's state is in {_lab_workdir(args.lab)} but it does not answer "
                f"(stopped, or the machine restarted): run `gpulab down {args.lab}`, then `gpulab up {args.lab}`",
                file=sys.stderr,
            )
            return 1
        print(f"the {args.lab} lab cluster is already up (`gpulab down {args.lab}` to remove it)", file=sys.stderr)
    else:
        cluster.start()
        print(f"the {args.lab} lab cluster is up in {cluster.startup_seconds:.1f}s", file=sys.stderr)
    print(f"export KUBECONFIG={shlex.quote(str(kubeconfig))}")
    print(f"export PATH={shlex.quote(str(toolchain.bin_dir()))}:\"$PATH\"")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    workdir = _lab_workdir(args.lab)
    if not workdir.exists():
        print(f"no {args.lab} lab cluster is up", file=sys.stderr)
        return 0
    _lab_cluster(args.lab).stop()
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"the {args.lab} lab cluster is down", file=sys.stderr)
    return 0


def reference_script(lab: str) -> Path:
    return Path(str(resources.files("pytest_gpulab.reference") / lab / "solve.sh"))


def cmd_demo(args: argparse.Namespace) -> int:
    """Fresh cluster, reference solution into a temporary root, then `pytest --lab LAB` on both."""
    toolchain.build()
    with tempfile.TemporaryDirectory(prefix=f"gpulab-{args.lab}-demo-") as root, KwokCluster.for_lab(args.lab) as cluster:
        print(f"lab cluster ready in {cluster.startup_seconds:.1f}s; running the reference solution into {root}", flush=True)
        solved = subprocess.run(["bash", str(reference_script(args.lab)), root], env=cluster.environment(), stdin=subprocess.DEVNULL)
        if solved.returncode != 0:
            print(f"the reference solution failed (exit {solved.returncode})", file=sys.stderr)
            return solved.returncode
        command = [
            sys.executable, "-m", "pytest", "--lab", args.lab, "--lab-root", root,
            "--kubeconfig", str(cluster.kubeconfig), "-p", "no:cacheprovider", *args.pytest_args,
        ]
        print("$ " + " ".join(command), flush=True)
        return subprocess.run(command, env=cluster.environment(), cwd=root, stdin=subprocess.DEVNULL).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpulab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the lab cluster's binaries (cached)").set_defaults(run=cmd_build)
    for name, run, text in (("up", cmd_up, "start a lab's cluster"), ("down", cmd_down, "stop a lab's cluster")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("lab", choices=sorted(LABS))
        sub.set_defaults(run=run)
    demo = commands.add_parser("demo", help="grade the lab's reference solution on a fresh cluster")
    demo.add_argument("lab", choices=gradable_labs())
    demo.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    demo.set_defaults(run=cmd_demo)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (KwokClusterError, toolchain.ToolchainError, UnknownLab) as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
