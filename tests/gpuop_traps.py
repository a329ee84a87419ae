"""Traps of the gpuop lab: variants of the reference solution that must fail exactly one step, saying why."""

from __future__ import annotations

from gpuop_variants import (
    CRI,
    CRUN_TABLE,
    DROPIN,
    MAIN,
    PYTHON_CHECKER,
    Variant,
    combine,
    edit,
    remove,
    replace,
    sub,
    write,
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
