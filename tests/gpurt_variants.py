"""Variants of the gpurt reference solution: traps that must fail exactly one step, forms that must pass."""

from __future__ import annotations

import shutil

from variants import Variant, combine, replace, sub, write

CROSSCHECK = "bin/rc-crosscheck.sh"
OVERHEAD = "k8s/overhead.yaml"
V3 = "etc/config-v3.toml"
FIXTURE = "fixtures/dump-node1.toml"
CDI_AND_TYPO = (
    '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi]\n  runtime_type = "io.containerd.runc.v2"\n'
    '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidai]\n  runtime_type = "io.containerd.runc.v2"\n'
)
# A crosscheck in another style: handlers with jq, runtimes from the dump's table headers with sed.
SED_CROSSCHECK = r"""#!/bin/sh
set -u
if [ $# -ge 1 ]; then dump=$(cat "$1") || exit 2; else dump=$(containerd config dump) || exit 2; fi
loaded=$(printf '%s\n' "$dump" | sed -n "s/^ *\[plugins\.[\"']io\.containerd\.\(grpc\.v1\.cri\|cri\.v1\.runtime\)[\"']\.containerd\.runtimes\.[\"']\{0,1\}\([^]\"'.]*\)[\"']\{0,1\}\]$/\2/p")
missing=0
for handler in $(kubectl get runtimeclass -o json | jq -r '.items[].handler' | sort -u); do
  if ! printf '%s\n' "$loaded" | grep -qxF "$handler"; then echo "MISSING=$handler"; missing=1; fi
done
[ "$missing" -eq 0 ] && echo OK
exit "$missing"
"""
PYTHON_CROSSCHECK = """#!/usr/bin/env python3
import json, subprocess, sys, tomllib
text = open(sys.argv[1]).read() if len(sys.argv) > 1 else subprocess.run(["containerd", "config", "dump"], capture_output=True, text=True, check=True).stdout
plugins = tomllib.loads(text).get("plugins", {})
loaded = {name for plugin in ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
          for name in plugins.get(plugin, {}).get("containerd", {}).get("runtimes", {})}
classes = json.loads(subprocess.run(["kubectl", "get", "runtimeclass", "-o", "json"], capture_output=True, text=True, check=True).stdout)
missing = sorted({rc["handler"] for rc in classes["items"]} - loaded)
print("\\n".join(f"MISSING={h}" for h in missing) or "OK")
sys.exit(1 if missing else 0)
"""

TRAPS = [
    Variant(
        "runtimeclass-cdi-handler-wrong",
        replace("k8s/runtimeclasses.yaml", "handler: nvidia-cdi", "handler: nvidia"),
        1,
        ('handler should be "nvidia-cdi"',),
    ),
    Variant(
        "typo-handler-is-loaded",
        replace("k8s/runtimeclass-typo.yaml", "handler: nvidai", "handler: nvidia"),
        2,
        ("is one the nodes load", "handler no node has"),
    ),
    Variant(
        "fails-at-scheduling",
        sub("out/unvalidated.txt", r"^FAILS_AT=.*$", "FAILS_AT=scheduling"),
        2,
        ("FAILS_AT should be", "accepted and scheduled"),
    ),
    Variant(
        "api-validates-yes",
        sub("out/unvalidated.txt", r"^API_VALIDATES_HANDLER=.*$", "API_VALIDATES_HANDLER=yes"),
        2,
        ("API_VALIDATES_HANDLER should be no",),
    ),
    Variant(
        "pods-pinned-with-node-name",
        combine(
            replace(
                OVERHEAD, "  nodeSelector:\n    kubernetes.io/hostname: gpu-tight-a\n", "  nodeName: gpu-tight-a\n"
            ),
            replace(
                OVERHEAD, "  nodeSelector:\n    kubernetes.io/hostname: gpu-tight-b\n", "  nodeName: gpu-tight-b\n"
            ),
        ),
        3,
        ("sets spec.nodeName", "without the scheduler"),
    ),
    Variant(
        "overhead-cpu-wrong",
        replace(OVERHEAD, "cpu: 250m", "cpu: 100m"),
        3,
        ("overhead.podFixed should be cpu 250m, memory 128Mi",),
    ),
    Variant(
        "tight-node-without-kwok-annotation",
        replace("k8s/node-tight.yaml", "kwok.x-k8s.io/node: fake", "example.com/owner: lab", 1),
        3,
        ("kwok manages only nodes",),
    ),
    Variant(
        "imports-glob-matches-the-dropin",
        replace("etc/config.toml", "conf.d/*.conf", "conf.d/*.toml"),
        4,
        ("does match", "misses the file's name"),
    ),
    Variant(
        "imports-report-matched-wrong",
        sub("out/imports.txt", r"^MATCHED=.*$", "MATCHED=1"),
        4,
        ("MATCHED should be 0",),
    ),
    Variant(
        "imports-report-glob-retyped",
        sub("out/imports.txt", r"^GLOB=.*$", "GLOB=conf.d/*.conf"),
        4,
        ("GLOB should be the glob exactly",),
    ),
    Variant(
        "v3-runtime-settings-under-grpc",
        replace(
            V3,
            '[plugins."io.containerd.grpc.v1.cri"]\n  stream_server_address = "127.0.0.1"\n',
            '[plugins."io.containerd.grpc.v1.cri"]\n  stream_server_address = "127.0.0.1"\n\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n',
        ),
        5,
        ("which version 3 silently ignores", "keeps only server settings"),
    ),
    Variant("v3-version-string", replace(V3, "version = 3", 'version = "3"'), 5, ("a string, not an integer",)),
    Variant(
        "v3-old-plugin-name",
        replace(V3, "io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"),
        5,
        ("io.containerd.cri.v1.runtime",),
    ),
    Variant(
        "crosscheck-reads-the-config-file",
        replace(CROSSCHECK, 'dump=$(cat "$1")', 'dump=$(cat "$(dirname "$0")/../etc/config.toml")'),
        6,
        ("it should print OK and exit 0",),
    ),
    Variant(
        "crosscheck-reads-only-version-2",
        replace(
            CROSSCHECK,
            'for plugin in ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"):',
            'for plugin in ("io.containerd.grpc.v1.cri",):',
        ),
        6,
        ("Given a version-3 dump",),
    ),
    Variant(
        "crosscheck-prints-a-fixed-answer",
        write(CROSSCHECK, "#!/bin/sh\necho MISSING=nvidai\necho MISSING=nvidia-cdi\nexit 1\n", 0o755),
        6,
        ("it should print OK and exit 0",),
    ),
    Variant(
        "crosscheck-uses-runtimeclass-names",
        replace(
            CROSSCHECK,
            "handlers=$(kubectl get runtimeclass -o jsonpath='{range .items[*]}{.handler}{\"\\n\"}{end}')",
            "handlers=$(kubectl get runtimeclass -o name | sed 's|.*/||')",
        ),
        6,
        ("it should print OK and exit 0",),
    ),
    Variant(
        "affected-gpu",
        sub("out/blast.txt", r"^AFFECTED=.*$", "AFFECTED=gpu"),
        7,
        ("AFFECTED should be all", "GPU or not"),
    ),
    Variant(
        "blast-radius-pod",
        sub("out/blast.txt", r"^BLAST_RADIUS=.*$", "BLAST_RADIUS=pod"),
        7,
        ("BLAST_RADIUS should be node",),
    ),
    Variant(
        "default-dropin-runc", replace("etc/conf.d/50-default.toml", '"nvidia"', '"runc"'), 7, ('should be "nvidia"',)
    ),
    Variant(
        "fixture-with-nothing-missing",
        combine(
            lambda root: (root / FIXTURE).write_text((root / FIXTURE).read_text() + CDI_AND_TYPO),
            write("out/crosscheck.txt", "OK\n"),
        ),
        8,
        ("no mismatch to find",),
    ),
    Variant(
        "fixture-with-everything-missing",
        combine(
            lambda root: (root / FIXTURE).write_text(
                (root / FIXTURE)
                .read_text()
                .split('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]')[0]
            ),
            write("out/crosscheck.txt", "MISSING=nvidai\nMISSING=nvidia\nMISSING=nvidia-cdi\n"),
        ),
        8,
        ("loads none of the handlers",),
    ),
    Variant(
        "crosscheck-output-disagrees",
        write("out/crosscheck.txt", "MISSING=nvidia-cdi\n"),
        8,
        ("should hold exactly MISSING=nvidai and MISSING=nvidia-cdi",),
    ),
]


def jq_available() -> bool:
    return shutil.which("jq") is not None


FORMS = [
    Variant("crosscheck-in-python", write(CROSSCHECK, PYTHON_CROSSCHECK, 0o755)),
    Variant("crosscheck-with-sed-and-jq", write(CROSSCHECK, SED_CROSSCHECK, 0o755)),
    Variant(
        "unvalidated-other-words",
        write(
            "out/unvalidated.txt", "api_validates_handler: false\nFAILS_AT = ContainerCreating\nVISIBLE_TO=kubelet\n"
        ),
    ),
    Variant(
        "blast-other-words",
        write(
            "out/blast.txt",
            'DEFAULT_RUNTIME="nvidia"\r\nAFFECTED=all-pods\r\nNEEDS_RUNTIMECLASS=false\r\nBLAST_RADIUS=whole-node\r\n',
        ),
    ),
    Variant(
        "imports-relative-glob",
        combine(
            replace("etc/config.toml", '"/etc/containerd/conf.d/*.conf"', '"conf.d/*.conf"'),
            sub("out/imports.txt", r"^GLOB=.*$", 'GLOB="conf.d/*.conf"'),
        ),
    ),
    Variant(
        "pods-pinned-by-affinity",
        replace(
            OVERHEAD,
            "  nodeSelector:\n    kubernetes.io/hostname: gpu-tight-b\n",
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
            "          - matchExpressions:\n              - {key: kubernetes.io/hostname, operator: In, values: [gpu-tight-b]}\n",
        ),
    ),
    Variant(
        "crosscheck-output-reordered-crlf", write("out/crosscheck.txt", "MISSING=nvidia-cdi\r\n\r\nMISSING=nvidai\r\n")
    ),
    Variant(
        "v3-with-inline-tables",
        write(
            V3,
            "version = 3\nimports = ['conf.d/*.toml']\n"
            "[plugins.'io.containerd.cri.v1.runtime'.containerd]\ndefault_runtime_name = 'runc'\n"
            "runtimes.runc = { runtime_type = 'io.containerd.runc.v2' }\n"
            "runtimes.nvidia = { runtime_type = 'io.containerd.runc.v2', options = { BinaryName = '/usr/bin/nvidia-container-runtime' } }\n",
        ),
    ),
    Variant(
        "fixture-in-version-3",
        write(
            FIXTURE,
            "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\nruntime_type = 'io.containerd.runc.v2'\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\nruntime_type = 'io.containerd.runc.v2'\n",
        ),
    ),
]
