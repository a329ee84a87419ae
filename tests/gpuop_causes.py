"""Traps found by trying learner work the first traps did not have: each message must name the cause
the learner's work actually has (and, where a wrong cause was once given, not that one)."""

from __future__ import annotations

from gpuop_variants import CRI, DROPIN, MAIN, PYTHON_CHECKER, Variant, combine, replace, sub, write

RUNC_OPTIONS = f"\n[{CRI}.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
DROPIN_BINARY_BESIDE_OPTIONS = f"""[{CRI}.containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  BinaryName = "/usr/bin/nvidia-container-runtime"

[{CRI}.containerd.runtimes.nvidia.options]
  SystemdCgroup = true
"""

CAUSES = [
    Variant(
        "python-checker-without-exec-bit",
        write("bin/check-runtime.sh", PYTHON_CHECKER, 0o644),
        4,
        ("it is not executable, so the grader ran it with bash, not with python3: chmod +x it",),
    ),
    Variant("version-float", replace(MAIN, "version = 2", "version = 2.0"), 1, ("a float, not an integer",)),
    Variant(
        "systemdcgroup-beside-options",
        replace(MAIN, RUNC_OPTIONS, "  SystemdCgroup = true\n"),
        1,
        ("has SystemdCgroup in [", "only from the runtime's options table"),
    ),
    Variant(
        "binaryname-beside-options",
        write(DROPIN, DROPIN_BINARY_BESIDE_OPTIONS),
        2,
        ("has BinaryName in [", "options table"),
    ),
    Variant(
        "check-succeeds-without-containerd",
        write(
            "bin/check-runtime.sh",
            "#!/usr/bin/env bash\ndump=$(containerd config dump 2>/dev/null) || exit 0\ngrep -q 'containerd.runtimes.nvidia' <<<\"$dump\"\n",
            0o755,
        ),
        4,
        ("With no containerd on PATH", "should exit non-zero"),
    ),
    Variant(
        "check-never-exits-1",
        write(
            "bin/check-runtime.sh",
            "#!/bin/sh\ncontainerd config dump | grep -q 'containerd.runtimes.nvidia'\nexit 0\n",
            0o755,
        ),
        4,
        ("should exit non-zero", "even for a dump with no nvidia in it at all"),
        says_not=("not for the word nvidia",),
    ),
    Variant(
        "node-gpu-several-wrong-rows",
        write("out/node-gpu.txt", "NAME GPU\nlab-node-0 0\nlab-node-1 <none>\nlab-node-2 4\n"),
        6,
        ("lab-node-0 should read 4, found 0", "lab-node-2 should read none, found 4"),
    ),
    Variant(
        "replicas-string",
        replace("k8s/time-slicing.yaml", "replicas: 5", 'replicas: "5"'),
        7,
        ("a string, not an integer",),
    ),
    Variant(
        "slots-several-wrong",
        replace("out/slots.txt", "ADVERTISED=20", "ADVERTISED=4"),
        7,
        ('ADVERTISED should be 20, found "4"',),
    ),
]

# Found by a second red-team pass: wrong work that passed, now failing with its cause.
TOOLKIT = "k8s/toolkit-ds.yaml"
CAUSES += [
    Variant(
        "dropin-sets-the-default-runtime",
        lambda root: (root / DROPIN).write_text(
            (root / DROPIN).read_text() + f'\n[{CRI}.containerd]\n  default_runtime_name = "nvidia"\n'
        ),
        2,
        ("sets default_runtime_name", "replaces the main file's runc"),
    ),
    Variant(
        "dropin-redefines-runc",
        combine(
            lambda root: (root / DROPIN).write_text(
                (root / DROPIN).read_text()
                + f'\n[{CRI}.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
            ),
            sub(
                "out/merge.txt", r"^DROPIN_RUNTIMES=.*$", "DROPIN_RUNTIMES=nvidia,runc"
            ),  # judged from the files, as step 3 asks
        ),
        2,
        ("also defines the runtime runc",),
    ),
    Variant(
        "check-greps-the-nvidia-binary",
        write("bin/check-runtime.sh", "#!/bin/sh\ncontainerd config dump | grep -q nvidia-container-runtime\n", 0o755),
        4,
        ("GPU runtime is named gpu", "not for the nvidia binary"),
    ),
    Variant(
        "check-counts-runtimes",
        write(
            "bin/check-runtime.sh",
            "#!/bin/bash\nn=$(containerd config dump | grep -c 'runtime_type = ')\n[ \"$n\" -ge 2 ]\n",
            0o755,
        ),
        4,
        ("GPU runtime is named gpu",),
    ),
    Variant(
        "pod-with-node-name",
        replace("k8s/gpu-pod.yaml", "spec:\n", "spec:\n  nodeName: lab-node-0\n", 1),
        5,
        ("sets spec.nodeName",),
    ),
    Variant(
        "pod-with-a-second-gpu-container",
        lambda root: (root / "k8s/gpu-pod.yaml").write_text(
            (root / "k8s/gpu-pod.yaml").read_text()
            + "    - name: sidecar\n      image: busybox\n      resources:\n        limits:\n          nvidia.com/gpu: 1\n"
        ),
        5,
        ("should be 1, in one container",),
    ),
    Variant(
        "unscheduled-message-of-another-cluster",
        write(
            "out/unscheduled.txt",
            "Unschedulable\n0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint.\n",
        ),
        5,
        ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu",),
    ),
    Variant(
        "node-gpu-extra-node",
        lambda root: (root / "out/node-gpu.txt").write_text((root / "out/node-gpu.txt").read_text() + "lab-node-3 4\n"),
        6,
        ("lab-node-3 is not a node of this cluster",),
    ),
    Variant(
        "time-slicing-twice-in-one-file",
        lambda root: (root / "k8s/time-slicing.yaml").write_text(
            (root / "k8s/time-slicing.yaml").read_text()
            + "---\n"
            + (root / "k8s/time-slicing.yaml").read_text().replace("replicas: 5", "replicas: 4")
        ),
        7,
        ("more than once",),
    ),
    Variant(
        "time-slicing-renamed",
        replace("k8s/time-slicing.yaml", "      timeSlicing:\n", "      timeSlicing:\n        renameByDefault: true\n"),
        7,
        ("nvidia.com/gpu.shared",),
    ),
    Variant(
        "toolkit-ds-wrong-image",
        replace(TOOLKIT, "nvcr.io/nvidia/k8s/container-toolkit", "nvcr.io/nvidia/k8s-device-plugin"),
        8,
        ("should hold either the first spec",),
    ),
    Variant(
        "toolkit-ds-max-unavailable-string",
        replace(TOOLKIT, "maxUnavailable: 1", 'maxUnavailable: "1"'),
        8,
        ("a string, not an integer",),
    ),
    Variant(
        "toolkit-ds-on-delete",
        replace(TOOLKIT, "type: RollingUpdate", "type: OnDelete"),
        8,
        ('updateStrategy.type should be "RollingUpdate"',),
    ),
]
