"""Variants of the gpuop reference solution: traps that must fail one step, forms that must pass.

Each variant edits a copy of the reference root; the live cluster stays the
reference's. A trap names the step it must fail and words its message must hold.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAIN = "etc/containerd/config.toml"
DROPIN = "etc/containerd/conf.d/99-nvidia.toml"
CRI = 'plugins."io.containerd.grpc.v1.cri"'


def edit(root: Path, relative: str, change: Callable[[str], str]) -> None:
    path = root / relative
    text = path.read_text()
    changed = change(text)
    assert changed != text, f"variant did not change {relative}"
    path.write_text(changed)


def replace(relative: str, old: str, new: str, count: int = -1) -> Callable[[Path], object]:
    return lambda root: edit(root, relative, lambda text: text.replace(old, new, count))


def sub(relative: str, pattern: str, new: str) -> Callable[[Path], object]:
    return lambda root: edit(root, relative, lambda text: re.sub(pattern, new, text, flags=re.M))


def write(relative: str, text: str, mode: int | None = None) -> Callable[[Path], object]:
    def apply(root: Path) -> None:
        path = root / relative
        path.write_text(text)
        if mode is not None:
            path.chmod(mode)

    return apply


def chmod(relative: str, mode: int) -> Callable[[Path], object]:
    return lambda root: (root / relative).chmod(mode)


def remove(relative: str) -> Callable[[Path], object]:
    return lambda root: (root / relative).unlink()


def combine(*changes: Callable[[Path], object]) -> Callable[[Path], object]:
    def apply(root: Path) -> None:
        for change in changes:
            change(root)

    return apply


@dataclass(frozen=True)
class Variant:
    name: str
    change: Callable[[Path], object]
    failing_step: int | None = None  # None: every step must pass
    says: tuple[str, ...] = ()  # fragments the failure message (or a note) must contain
    note: str | None = None  # fragment of a feedback note the passing step must carry
    grader_args: tuple[str, ...] = field(default=())


PYTHON_CHECKER = """#!/usr/bin/env python3
import subprocess, sys
dump = subprocess.run(["containerd", "config", "dump"], capture_output=True, text=True).stdout
sys.exit(0 if "containerd.runtimes.nvidia" in dump else 1)
"""

CRUN_TABLE = (
    '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\n  runtime_type = "io.containerd.runc.v2"\n'
)

TRAPS = [
    # Step 1 (and the lab's common mistake 1)
    Variant(
        "unquoted-table-name",
        replace(MAIN, CRI, "plugins.io.containerd.grpc.v1.cri"),
        1,
        ("nested tables", "must quote"),
    ),
    Variant(
        "imports-under-a-table",
        combine(
            replace(MAIN, 'imports = ["/etc/containerd/conf.d/*.toml"]\n', ""),
            replace(
                MAIN,
                '  default_runtime_name = "runc"\n',
                '  default_runtime_name = "runc"\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
            ),
        ),
        1,
        ("imports inside the", "above the first table header"),
    ),
    Variant(
        "systemdcgroup-string-in-main",
        replace(MAIN, "SystemdCgroup = true", 'SystemdCgroup = "true"'),
        1,
        ("not a boolean",),
    ),
    Variant("version-string", replace(MAIN, "version = 2", 'version = "2"'), 1, ("integer 2",)),
    # Step 2
    Variant(
        "dropin-cgroup-false",
        replace(DROPIN, "SystemdCgroup = true", "SystemdCgroup = false"),
        2,
        ("SystemdCgroup of the nvidia runtime should be true",),
    ),
    Variant("dropin-no-binaryname", sub(DROPIN, r"^\s*BinaryName.*\n", ""), 2, ("BinaryName", "injects the devices")),
    Variant("dropin-unquoted", replace(DROPIN, CRI, "plugins.io.containerd.grpc.v1.cri"), 2, ("must quote",)),
    # Step 3
    Variant(
        "conflict-table-unquoted",
        sub(
            "out/merge.txt",
            r"^CONFLICT_TABLE=.*$",
            "CONFLICT_TABLE=plugins.io.containerd.grpc.v1.cri.containerd.runtimes",
        ),
        3,
        ("different table path", 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes'),
    ),
    Variant(
        "loaded-runtimes-computed",
        sub("out/merge.txt", r"^LOADED_RUNTIMES=.*$", "LOADED_RUNTIMES=runc,nvidia"),
        3,
        ("observed, not computed",),
    ),
    Variant(
        "merge-disagrees-with-the-files",
        lambda root: (root / MAIN).write_text((root / MAIN).read_text() + CRUN_TABLE),
        3,
        ("MAIN_RUNTIMES should be crun,runc (what the main file defines)",),
    ),
    Variant(
        "main-runtimes-wrong",
        sub("out/merge.txt", r"^MAIN_RUNTIMES=.*$", "MAIN_RUNTIMES=runc,nvidia"),
        3,
        ("MAIN_RUNTIMES should be runc",),
    ),
    # Step 4
    Variant(
        "check-reads-the-file",
        write("bin/check-runtime.sh", "#!/bin/sh\ngrep -q 'runtimes.nvidia' /etc/containerd/config.toml\n", 0o755),
        4,
        ("names /etc/containerd/config.toml", "what was loaded"),
    ),
    Variant(
        "check-absolute-containerd",
        write(
            "bin/check-runtime.sh",
            "#!/bin/sh\n/usr/bin/containerd config dump | grep -q containerd.runtimes.nvidia\n",
            0o755,
        ),
        4,
        ("absolute path", "on PATH"),
    ),
    Variant(
        "python-checker-absolute-containerd",
        write("bin/check-runtime.sh", PYTHON_CHECKER.replace('["containerd"', '["/usr/bin/containerd"'), 0o755),
        4,
        ("absolute path",),
    ),
    Variant(
        "check-always-succeeds",
        write("bin/check-runtime.sh", "#!/bin/sh\ncontainerd config dump >/dev/null\nexit 0\n", 0o755),
        4,
        ("without runtimes.nvidia", "should exit non-zero"),
    ),
    Variant(
        "check-greps-any-nvidia",
        write("bin/check-runtime.sh", "#!/bin/sh\ncontainerd config dump | grep -q nvidia\n", 0o755),
        4,
        ("without runtimes.nvidia", "should exit non-zero"),
    ),
    Variant(
        "check-reads-the-imports-line",
        write(
            "bin/check-runtime.sh",
            "#!/bin/sh\ncontainerd config dump | grep -q '^imports = \\[\\]' && exit 1 || exit 0\n",
            0o755,
        ),
        4,
        ("without runtimes.nvidia",),
    ),
    Variant(
        "check-falls-back-to-the-drop-ins",
        write(
            "bin/check-runtime.sh",
            "#!/bin/sh\ncontainerd config dump | grep -q 'containerd.runtimes.nvidia' && exit 0\n"
            "grep -qs 'runtimes.nvidia' /etc/containerd/conf.d/*.toml\n",
            0o755,
        ),
        4,
        ("refers to the configuration files (conf.d)",),
    ),
    Variant(
        "check-builds-the-config-path",
        write(
            "bin/check-runtime.sh",
            '#!/bin/sh\ndir=/etc/containerd/\ncontainerd config dump >/dev/null\ngrep -q runtimes.nvidia "${dir}config.toml"\n',
            0o755,
        ),
        4,
        ("refers to the configuration files (config.toml)",),
    ),
    Variant(
        "check-hangs",
        write("bin/check-runtime.sh", "#!/bin/sh\ncontainerd config dump >/dev/null\nsleep 600\n", 0o755),
        4,
        ("timeout",),
        grader_args=("--script-timeout", "2"),
    ),
    Variant(
        "check-never-asks-containerd",
        write(
            "bin/check-runtime.sh",
            "#!/bin/sh\n# containerd config dump would be the right call\ncontainerd --version >/dev/null\nexit 1\n",
            0o755,
        ),
        4,
        ("should exit 0",),
    ),
    # Step 5
    Variant(
        "handler-under-spec",
        sub("k8s/runtimeclass.yaml", r"^handler: nvidia$", "spec:\n  handler: nvidia"),
        5,
        ("top-level field",),
    ),
    Variant(
        "unscheduled-reason-wrong",
        write("out/unscheduled.txt", "Pending\n0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n"),
        5,
        ("Unschedulable",),
    ),
    Variant("unscheduled-message-missing", write("out/unscheduled.txt", "Unschedulable\n"), 5, ("two lines",)),
    # Step 6
    Variant(
        "node-gpu-hedged-columns",
        write(
            "out/node-gpu.txt",
            "NAME CAPACITY ALLOCATABLE\nlab-node-0 4 0\nlab-node-1 <none> <none>\nlab-node-2 <none> 4\n",
        ),
        6,
        ("lab-node-0 should read 4, found 0",),
    ),
    Variant(
        "unscheduled-labels-swapped",
        write(
            "out/unscheduled.txt",
            "message: Unschedulable\nreason: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n",
        ),
        5,
        ("should be the reason Unschedulable",),
    ),
    Variant(
        "node-gpu-table-wrong",
        write("out/node-gpu.txt", "lab-node-0 1\nlab-node-1 <none>\nlab-node-2 <none>\n"),
        6,
        ("lab-node-0 should read 4",),
    ),
    # Step 7 (and the lab's common mistake 2)
    Variant(
        "data-any-mapping",
        sub("k8s/time-slicing.yaml", r"any: \|-\n", "any:\n"),
        7,
        ("YAML mapping", "block scalar"),
    ),
    Variant(
        "resources-at-the-top-of-data-any",
        lambda root: edit(
            root,
            "k8s/time-slicing.yaml",
            lambda text: text.replace(
                "        resources:\n          - name: nvidia.com/gpu\n            replicas: 5\n",
                "    resources:\n      - name: nvidia.com/gpu\n        replicas: 5\n",
            ),
        ),
        7,
        ("resources at the top level", "under sharing.timeSlicing"),
    ),
    Variant(
        "vram-divided",
        sub("out/slots.txt", r"^VRAM_GUARANTEED_PER_SLOT_GIB=.*$", "VRAM_GUARANTEED_PER_SLOT_GIB=8"),
        7,
        ("divides time, not memory",),
    ),
    Variant(
        "isolation-yes", sub("out/slots.txt", r"^ISOLATION=.*$", "ISOLATION=full"), 7, ("ISOLATION should be none",)
    ),
    # Bad input: a clear failure of that step, never a crash of the run
    Variant("main-broken-toml", replace(MAIN, "version = 2", "version = = 2"), 1, ("not valid TOML",)),
    Variant(
        "merge-garbage-bytes",
        lambda root: (root / "out/merge.txt").write_bytes(b"\xff\xfe\x00garbage\x9c"),
        3,
        ("not UTF-8",),
    ),
    Variant(
        "pod-broken-yaml", write("k8s/gpu-pod.yaml", "kind: Pod\nmetadata: {name: cuda-probe\n"), 5, ("not valid YAML",)
    ),
    Variant(
        "slots-is-a-directory",
        combine(remove("out/slots.txt"), lambda root: (root / "out/slots.txt").mkdir()),
        7,
        ("not a regular file",),
    ),
    Variant(
        "check-floods",
        write("bin/check-runtime.sh", "#!/bin/sh\ncontainerd config dump\nyes\n", 0o755),
        4,
        ("printed more than",),
    ),
    # Step 8
    Variant(
        "toolkit-ds-file-missing",
        lambda root: (root / "k8s/toolkit-ds.yaml").unlink(),
        8,
        ("k8s/toolkit-ds.yaml does not exist",),
    ),
    Variant(
        "toolkit-ds-file-max-unavailable",
        replace("k8s/toolkit-ds.yaml", "maxUnavailable: 1", "maxUnavailable: 3"),
        8,
        ("maxUnavailable should be 1",),
    ),
    Variant("rollout-ready-expected", sub("out/rollout.txt", r"^READY=.*$", "READY=3"), 8, ("READY should be 2",)),
    Variant(
        "rollout-blocker", sub("out/rollout.txt", r"^BLOCKER=.*$", "BLOCKER=image-pull"), 8, ("insufficient-memory",)
    ),
]


FORMS = [
    Variant(
        "extra-runtime-judged-from-the-files",
        combine(
            lambda root: (root / MAIN).write_text((root / MAIN).read_text() + CRUN_TABLE),
            sub("out/merge.txt", r"^MAIN_RUNTIMES=.*$", "MAIN_RUNTIMES=crun,runc"),
        ),
    ),
    Variant(
        "merge-loose-form",
        write(
            "out/merge.txt",
            '\r\n main_runtimes = "runc"\r\nDropin_Runtimes=nvidia\r\n\r\nconflict=TRUE\r\n'
            "CONFLICT_TABLE='plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes'\r\nLOADED_RUNTIMES= runc ",
        ),
    ),
    Variant("node-gpu-no-header-tabs", write("out/node-gpu.txt", "lab-node-0\t4\nlab-node-1\t0\nlab-node-2\t-\n")),
    Variant(
        "node-gpu-csv-after-step7", write("out/node-gpu.txt", "NAME,GPU\nlab-node-0,4\nlab-node-1,20\nlab-node-2,\n")
    ),
    Variant("relative-imports-glob", replace(MAIN, '"/etc/containerd/conf.d/*.toml"', '"conf.d/*.toml"')),
    Variant(
        "inline-and-dotted-keys",
        replace(
            MAIN,
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n',
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
            "  options = { SystemdCgroup = true }\n",
        ),
    ),
    Variant("python-checker", write("bin/check-runtime.sh", PYTHON_CHECKER, 0o755)),
    Variant("checker-without-exec-bit", chmod("bin/check-runtime.sh", 0o644), note="not executable"),
    Variant(
        "runtimeclass-with-namespace",
        replace("k8s/runtimeclass.yaml", "  name: nvidia\n", "  name: nvidia\n  namespace: gpu-lab\n"),
        note="cluster-scoped",
    ),
    Variant(
        "slots-with-units",
        write(
            "out/slots.txt",
            "physical_gpus=4\nREPLICAS = 5\nADVERTISED=20\nVRAM_PER_GPU_GIB=40GiB\n"
            'VRAM_GUARANTEED_PER_SLOT_GIB="0 GiB"\nVRAM_SHARED_PER_GPU_GIB=40 GiB\nISOLATION=no\n',
        ),
    ),
    Variant(
        "unscheduled-labelled",
        lambda root: (root / "out/unscheduled.txt").write_text(
            "".join(
                f"{label}: {line}"
                for label, line in zip(
                    ("reason", "message"), (root / "out/unscheduled.txt").read_text().splitlines(True), strict=False
                )
            )
        ),
    ),
    Variant("node-gpu-colons", write("out/node-gpu.txt", "lab-node-0: 4\nlab-node-1: 0\nlab-node-2: 0\n")),
    Variant(
        "conflict-table-escaped-quotes",
        sub(
            "out/merge.txt",
            r"^CONFLICT_TABLE=.*$",
            r'CONFLICT_TABLE="plugins.\\"io.containerd.grpc.v1.cri\\".containerd.runtimes"',
        ),
    ),
    Variant(
        "toolkit-ds-file-holds-the-first-spec",
        combine(replace("k8s/toolkit-ds.yaml", "v1.17.0", "v1.16.2"), replace("k8s/toolkit-ds.yaml", "64Gi", "128Mi")),
    ),
    Variant("rollout-inline-comments", sub("out/rollout.txt", r"^READY=2$", "READY=2  # one new Pod pending")),
    Variant(
        "slots-colons-and-comments",
        write(
            "out/slots.txt",
            "PHYSICAL_GPUS: 4\nREPLICAS: 5\nADVERTISED: 20  # 4 x 5\nVRAM_PER_GPU_GIB: 40\n"
            "VRAM_GUARANTEED_PER_SLOT_GIB: 0   # time-slicing shares memory\nVRAM_SHARED_PER_GPU_GIB: 40\nISOLATION: none\n",
        ),
    ),
    Variant(
        "node-gpu-markdown",
        write(
            "out/node-gpu.txt",
            "| NAME | GPU |\n|---|---|\n| lab-node-0 | 4 |\n| lab-node-1 | |\n| lab-node-2 | <none> |\n",
        ),
    ),
    Variant(
        "unscheduled-with-a-comment",
        lambda root: (root / "out/unscheduled.txt").write_text(
            "# PodScheduled of cuda-probe\n" + (root / "out/unscheduled.txt").read_text()
        ),
    ),
    Variant(
        "checker-without-shebang",
        lambda root: edit(root, "bin/check-runtime.sh", lambda text: text.split("\n", 1)[1]),
        note="no #! line",
    ),
    Variant(
        "checker-with-root-flag",
        replace(
            "bin/check-runtime.sh",
            "dump=$(containerd config dump)",
            "dump=$(containerd --root /var/lib/containerd config dump)",
        ),
    ),
    Variant(
        "checker-message-names-the-directory",
        replace(
            "bin/check-runtime.sh",
            'echo "nvidia runtime handler NOT loaded" >&2',
            'echo "nvidia runtime handler NOT loaded: a drop-in under /etc/containerd waits for a restart" >&2',
        ),
    ),
    Variant(
        "node-gpu-equals-and-names",
        write("out/node-gpu.txt", "node/lab-node-0=4\nnode/lab-node-1=0\nnode/lab-node-2=\n"),
    ),
    Variant(
        "unscheduled-space-label-and-comment",
        lambda root: (root / "out/unscheduled.txt").write_text(
            "reason Unschedulable   # PodScheduled\n" + (root / "out/unscheduled.txt").read_text().splitlines(True)[1]
        ),
    ),
    Variant(
        "conflict-table-every-part-quoted",
        sub(
            "out/merge.txt",
            r"^CONFLICT_TABLE=.*$",
            'CONFLICT_TABLE="plugins"."io.containerd.grpc.v1.cri"."containerd"."runtimes"',
        ),
    ),
    Variant("rollout-blocker-words", sub("out/rollout.txt", r"^BLOCKER=.*$", "BLOCKER=Insufficient memory")),
]


def copy_root(source: Path, target: Path) -> Path:
    """A copy keeping file modes (the exec bit matters to step 4)."""
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes())
            os.chmod(destination, path.stat().st_mode & 0o777)
    return target
