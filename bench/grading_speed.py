"""How fast a learner's "check" is, on a warm cluster solved with the reference, for each lab.

    .venv/bin/python bench/grading_speed.py [RUNS] [--nodes N] [--pods P] [--before OTHER/.venv/bin] [LAB ...]

Phase 1, side by side in turn: the grader's whole process (`pytest --lab LAB`) and the same checks
as a Killercoda/Instruqt-style verify script (bench/verify/LAB.sh: one kubectl, python3 or
learner-script process per check). Phase 2, side by side in turn: the grader on that cluster and on
a second one, solved the same way, then crowded with N extra nodes and P extra Pods
(pytest_gpulab.cluster.crowd; 1,000 and 10,000 by default; none at all skips phase 2). With ``--before``,
another checkout's grader (its virtualenv's bin) runs in turn with this one's in phase 1, on the same cluster.
Prints medians and the pairwise ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchkit import figure, grader, ratio, side_by_side, solved_cluster

from pytest_gpulab.cluster.crowd import add_crowd
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.grading.k8s.nodes import daemonset_owner, name_of
from pytest_gpulab.sandbox.clusterview import DoctoredView
from pytest_gpulab.sandbox.containerd import FakeContainerd, generate_dump

VERIFY = Path(__file__).parent / "verify"
# gpunode's preflight gate blocks on any custom taint, so its crowd is untainted (its DaemonSets select
# GPU labels); the other labs' Pods and DaemonSets would land on untainted crowd nodes.
TAINTED = {"gpuop": True, "gpurt": True, "gpunode": False}


def prepare(lab: str, fakes: Path, kubeconfig: Path, stack: contextlib.ExitStack) -> None:
    """What the verify script needs that the grader makes itself: fake containerds, dumps, a doctored view."""
    for dump in ("v2-runc-nvidia", "v2-accident-imported-not-loaded", "v2-runc-gpu-handler"):
        FakeContainerd(fakes / dump).serve_dump(dump)
    (dumps := fakes / "dumps").mkdir()
    wanted = {"runc", "nvidia", "nvidia-cdi", "nvidai"}
    for name, missing in {"all": set(), "some": {"nvidia-cdi"}}.items():
        for version in (2, 3):
            left = missing | ({"nvidai"} if name == "some" and version == 3 else set())
            (dumps / f"{name}-v{version}.toml").write_text(generate_dump(wanted - left, version))
    FakeContainerd(fakes / "gpurt-no-argument").serve_text(generate_dump(wanted - {"nvidai"}, 2))
    if lab == "gpunode":
        from pytest_gpulab.grading.live import LiveCluster

        live = LiveCluster.from_kubeconfig(str(kubeconfig))
        pods = [pod for pod in live.list("Pod", "nvidia-gpu-operator") if daemonset_owner(pod)]
        hidden = {("nvidia-gpu-operator", name_of(pod)) for pod in pods if "lab-node-0" in str(pod["spec"])}
        view = stack.enter_context(DoctoredView(kubeconfig, hidden, fakes / "view"))
        door = stack.enter_context(view.door(tcp=True))  # the verify script runs without a sandbox
        assert door.kubeconfig is not None
        (fakes / "hidden-view.kubeconfig").symlink_to(door.kubeconfig)


def bench(lab: str, runs: int, nodes: int, pods: int, before: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        work = Path(scratch)
        cluster, root = stack.enter_context(solved_cluster(lab, work, f"bench-{lab}"))
        prepare(lab, fakes := work / "fakes", cluster.kubeconfig, stack)
        verify = ["bash", str(VERIFY / f"{lab}.sh"), str(root), str(fakes)]
        commands: dict[str, tuple[Sequence[str], KwokCluster, Path]] = {
            "grader": (grader(lab, root, cluster), cluster, root.parent),
            "verify": (verify, cluster, root.parent),
        }
        if before is not None:  # another checkout's grader, in turn with this one's
            commands["before"] = ([str(before / "pytest"), *grader(lab, root, cluster)[1:]], cluster, root.parent)
        first = side_by_side(commands, runs)
        print(f"{lab}: grader {figure(first['grader'])} s; verify script {figure(first['verify'])} s; "
              f"verify/grader {ratio(first['verify'], first['grader'])}")  # fmt: skip
        if before is not None:
            print(f"{lab}: the grader of {before}: {figure(first['before'])} s; before/grader "
                  f"{ratio(first['before'], first['grader'])}; verify/before {ratio(first['verify'], first['before'])}")  # fmt: skip
        if nodes == 0 and pods == 0:
            return
        crowded, crowded_root = stack.enter_context(solved_cluster(lab, work, f"bench-{lab}-crowded"))
        add_crowd(crowded, nodes, pods, taint=TAINTED[lab])
        second = side_by_side({"small": (grader(lab, root, cluster), cluster, root.parent),
                               "crowded": (grader(lab, crowded_root, crowded), crowded, crowded_root.parent)}, runs)  # fmt: skip
        print(f"{lab}: grader on the lab's cluster {figure(second['small'])} s; with {nodes} nodes and {pods} Pods "
              f"more {figure(second['crowded'])} s; crowded/small {ratio(second['crowded'], second['small'])}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=10)
    parser.add_argument("labs", nargs="*", default=sorted(TAINTED))
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--before", type=Path, help="another checkout's virtualenv bin, whose grader runs in turn")
    options = parser.parse_args()
    for name in options.labs:
        bench(name, options.runs, options.nodes, options.pods, options.before)
