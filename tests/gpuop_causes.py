"""Traps found by trying learner work the first traps did not have: each message must name the cause
the learner's work actually has (and, where a wrong cause was once given, not that one)."""

from __future__ import annotations

from gpuop_variants import CRI, DROPIN, MAIN, PYTHON_CHECKER, Variant, replace, write

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
