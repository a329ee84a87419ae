"""Variants of the gpuop reference solution: traps that must fail one step, forms that must pass.

Each variant edits a copy of the reference root; the live cluster stays the
reference's. A trap names the step it must fail and words its message must hold.
"""

from __future__ import annotations

from variants import Variant, chmod, combine, edit, remove, replace, sub, write

__all__ = ["Variant", "chmod", "combine", "edit", "remove", "replace", "sub", "write"]

MAIN = "etc/containerd/config.toml"
DROPIN = "etc/containerd/conf.d/99-nvidia.toml"
CRI = 'plugins."io.containerd.grpc.v1.cri"'


PYTHON_CHECKER = """#!/usr/bin/env python3
import subprocess, sys
dump = subprocess.run(["containerd", "config", "dump"], capture_output=True, text=True).stdout
sys.exit(0 if "containerd.runtimes.nvidia" in dump else 1)
"""

CRUN_TABLE = (
    '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\n  runtime_type = "io.containerd.runc.v2"\n'
)

FORMS = [
    Variant(
        "checker-default-value-expansion",
        write(
            "bin/check-runtime.sh",
            '#!/bin/bash\nCONTAINERD=${CONTAINERD:-containerd}\ndump=$("$CONTAINERD" config dump) || exit 1\n'
            "[[ $dump == *containerd.runtimes.nvidia* ]]\n",
            0o755,
        ),
    ),
    Variant(
        "node-gpu-quoted-csv",
        write("out/node-gpu.txt", '"NAME","GPU"\n"lab-node-0","4"\n"lab-node-1","0"\n\'lab-node-2\',0\n'),
    ),
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
