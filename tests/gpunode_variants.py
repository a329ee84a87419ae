"""Variants of the gpunode reference solution: traps that must fail exactly one step, forms that must pass."""

from __future__ import annotations

from variants import Variant, combine, replace, sub, write

GFD = "k8s/gfd-ds.yaml"
JOB = "k8s/a100-job.yaml"
CRD = "k8s/mcp-crd.yaml"
COVERAGE = "bin/ds-coverage.sh"
STALE = "bin/mcp-stale.sh"
PREFLIGHT = "bin/preflight.sh"
TEMPLATE_SPEC = "    spec:\n      nodeSelector:\n"


def tolerating(toleration: str):
    return replace(GFD, TEMPLATE_SPEC, f"    spec:\n      tolerations:\n{toleration}      nodeSelector:\n")


def script(text: str) -> str:
    return "#!/usr/bin/env bash\n" + text.lstrip()


# Trusts the status: DESIRED against CURRENT in kubectl's table, the number that hid the gap.
STATUS_COVERAGE = script("""
ns=$1; bad=0
while read -r name desired current rest; do
  if [ "$desired" != "$current" ]; then echo "MISSING=$name/unknown"; bad=1; fi
done < <(kubectl get ds -n "$ns" --no-headers 2>/dev/null)
[ $bad -eq 0 ] && echo OK
exit $bad
""")
DESIRED_COVERAGE = script("""
ns=$1
for ds in $(kubectl get ds -n "$ns" -o name); do
  d=$(kubectl get "$ds" -n "$ns" -o jsonpath='{.status.desiredNumberScheduled}')
  r=$(kubectl get "$ds" -n "$ns" -o jsonpath='{.status.numberReady}')
  [ "$d" = "$r" ] || { echo "MISSING=${ds#*/}/?"; exit 1; }
done
echo OK
""")
ANSWER_COVERAGE = script("""
echo MISSING=gpu-feature-discovery/lab-node-2
echo MISSING=nvidia-device-plugin-daemonset/lab-node-2
exit 1
""")
PYTHON_COVERAGE = """#!/usr/bin/env python3
import json, subprocess, sys

def get(*args):
    return json.loads(subprocess.run(["kubectl", "get", *args, "-o", "json"], check=True, capture_output=True, text=True).stdout)["items"]

ns = sys.argv[1]
nodes, pods = get("nodes"), get("pods", "-n", ns)
found = []
for ds in get("daemonsets", "-n", ns):
    selector = ds["spec"]["template"]["spec"].get("nodeSelector", {})
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        if all(labels.get(k) == v for k, v in selector.items()):
            if not any(p["spec"].get("nodeName") == node["metadata"]["name"]
                       and any(o["kind"] == "DaemonSet" and o["name"] == ds["metadata"]["name"] for o in p["metadata"].get("ownerReferences", []))
                       for p in pods):
                found.append(f"MISSING={ds['metadata']['name']}/{node['metadata']['name']}")
print("\\n".join(found) if found else "OK")
sys.exit(1 if found else 0)
"""
ALWAYS_STALE = script("kubectl get mcp >/dev/null; echo STALE=worker; exit 1\n")
PINNED_DATE_STALE = script("""
t=${1:-30}
age=$(( ($(date +%s) - $(date -d 2024-10-29T09:00:00Z +%s)) / 60 ))
if [ "$age" -gt "$t" ]; then echo STALE=worker; exit 1; fi
echo OK
""")
PINNED_NOW_STALE = script("""
t=${1:-30}
since=$(kubectl get mcp worker -o jsonpath='{.status.conditions[?(@.type=="Updating")].lastTransitionTime}')
age=$(( ($(date -d 2024-11-19T12:00:00Z +%s) - $(date -d "$since" +%s)) / 60 ))
if [ "$age" -gt "$t" ]; then echo STALE=worker; exit 1; fi
echo OK
""")
PYTHON_STALE = """#!/usr/bin/env python3
import json, subprocess, sys
from datetime import datetime, timezone
minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 30
pools = json.loads(subprocess.check_output(["kubectl", "get", "machineconfigpools", "-o", "json"]))["items"]
stale = []
for pool in pools:
    for c in pool.get("status", {}).get("conditions", []):
        if c["type"] == "Updating" and c["status"] == "True":
            since = datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
            if (datetime.now(timezone.utc) - since).total_seconds() / 60 > minutes:
                stale.append(pool["metadata"]["name"])
for name in stale:
    print(f"STALE={name}")
print("OK") if not stale else None
sys.exit(1 if stale else 0)
"""

TRAPS = [
    Variant("blanket-toleration", tolerating("        - operator: Exists\n"), 1, ("tolerates every taint", "no key")),
    Variant(
        "reservation-toleration",
        tolerating("        - key: ai4dd-a100-reserved\n          operator: Exists\n"),
        1,
        ("tolerates the custom taint ai4dd-a100-reserved",),
    ),
    Variant(
        "selector-unquoted-true",
        replace(GFD, 'gpu-feature-discovery: "true"', "gpu-feature-discovery: true"),
        1,
        ("quote it",),
    ),
    Variant("desired-as-expected", sub("out/ds-gap.txt", r"^DESIRED=.*$", "DESIRED=3"), 2, ("DESIRED drops",)),
    Variant(
        "status-called-unhealthy",
        sub("out/ds-gap.txt", r"^STATUS_LOOKS_HEALTHY=.*$", "STATUS_LOOKS_HEALTHY=no"),
        2,
        ("STATUS_LOOKS_HEALTHY should be yes",),
    ),
    Variant("missing-node-wrong", sub("out/ds-gap.txt", r"^MISSING_NODE=.*$", "MISSING_NODE=lab-node-1"), 2),
    Variant(
        "labeled-nodes-short-of-one",
        sub("out/ds-gap.txt", r"^LABELED_NODES=.*$", "LABELED_NODES=lab-node-0,lab-node-1"),
        2,
        ("LABELED_NODES should be 3",),
    ),
    Variant(
        "job-pinned-with-node-name",
        replace(JOB, "  nodeSelector:\n    kubernetes.io/hostname: lab-node-2\n", "  nodeName: lab-node-2\n"),
        3,
        ("sets spec.nodeName", "without the scheduler"),
    ),
    Variant(
        "job-without-toleration",
        sub(JOB, r"  tolerations:\n(    .*\n|      .*\n)+", ""),
        3,
        ("does not tolerate the reservation taint",),
    ),
    Variant("job-two-gpus", replace(JOB, "nvidia.com/gpu: 4", "nvidia.com/gpu: 2"), 3, ("limits nvidia.com/gpu",)),
    Variant(
        "allocatable-four", sub("out/alloc.txt", r"^ALLOCATABLE=.*$", "ALLOCATABLE=4"), 3, ("ALLOCATABLE should be 0",)
    ),
    Variant(
        "reason-is-the-taint",
        sub("out/alloc.txt", r"^REASON=.*$", "REASON=0/3 nodes are available: 1 node(s) had untolerated taint(s)."),
        3,
        ("REASON should be", "tolerate the reservation taint"),
    ),
    Variant("coverage-reads-desired", write(COVERAGE, DESIRED_COVERAGE, 0o755), 4, ("desiredNumberScheduled",)),
    Variant(
        "coverage-trusts-status-columns", write(COVERAGE, STATUS_COVERAGE, 0o755), 4, ("it should print MISSING=",)
    ),
    Variant(
        "coverage-prints-the-answer", write(COVERAGE, ANSWER_COVERAGE, 0o755), 4, ("it should print OK and exit 0",)
    ),
    Variant("coverage-saved-ok", write("out/coverage.txt", "OK\n"), 4, ("should hold exactly",)),
    Variant("crd-namespaced", replace(CRD, "scope: Cluster", "scope: Namespaced"), 5, ("spec.scope should be",)),
    Variant(
        "crd-without-status-subresource",
        replace(CRD, "      subresources:\n        status: {}\n", ""),
        5,
        ("status subresource",),
    ),
    Variant("stale-ignores-threshold", write(STALE, ALWAYS_STALE, 0o755), 6, ("it should print OK and exit 0",)),
    Variant("stale-pins-the-date", write(STALE, PINNED_DATE_STALE, 0o755), 6, ("hard-codes the reservation's date",)),
    Variant("stale-pins-now", write(STALE, PINNED_NOW_STALE, 0o755), 6, ("it should print STALE=worker",)),
    Variant(
        "preflight-reports-the-cordon-taint",
        replace(PREFLIGHT, " && $key != node.kubernetes.io/*", ""),
        7,
        ("taint/lab-node-2/node.kubernetes.io/unschedulable", "the cluster's own"),
    ),
    Variant(
        "preflight-saved-at-the-end",
        write("out/preflight.txt", "BLOCKED=mcp/worker\nBLOCKED=node/lab-node-2\n"),
        7,
        ("before the taint is removed",),
    ),
    Variant(
        "impact-lists-daemonset-pods",
        sub(
            "out/impact.txt",
            r"^USER_PODS=.*$",
            "USER_PODS=research/a100-job,nvidia-gpu-operator/gpu-feature-discovery-x1",
        ),
        8,
        ("A drain skips DaemonSet Pods",),
    ),
    Variant("impact-ds-ready-two", sub("out/impact.txt", r"^DS_READY=.*$", "DS_READY=2"), 8, ("DS_READY should be 3",)),
]

FORMS = [
    Variant(
        "reports-in-other-forms",
        combine(
            write(
                "out/ds-gap.txt",
                'labeled_nodes: 3\r\ndesired = "2"\r\nREADY=2\r\n\r\nmissing_node=lab-node-2\r\nSTATUS_LOOKS_HEALTHY=true',
            ),
            write("out/impact.txt", "NODE=lab-node-2\nUNSCHEDULABLE=true\nDS_READY=3\nUSER_PODS= research/a100-job \n"),
            write(
                "out/coverage.txt",
                "MISSING=nvidia-device-plugin-daemonset/lab-node-2\n\nMISSING=gpu-feature-discovery/lab-node-2\n",
            ),
        ),
    ),
    Variant(
        "labeled-nodes-as-the-list",
        sub("out/ds-gap.txt", r"^LABELED_NODES=.*$", "LABELED_NODES=lab-node-2, lab-node-0 lab-node-1"),
    ),
    Variant("coverage-in-python", write(COVERAGE, PYTHON_COVERAGE, 0o755)),
    Variant("stale-in-python", write(STALE, PYTHON_STALE, 0o755)),
    Variant(
        "job-by-affinity-tolerating-by-key",
        combine(
            replace(
                JOB,
                "  nodeSelector:\n    kubernetes.io/hostname: lab-node-2\n",
                "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                "        nodeSelectorTerms:\n          - matchExpressions:\n"
                "              - {key: kubernetes.io/hostname, operator: In, values: [lab-node-2]}\n",
            ),
            replace(JOB, '      operator: Equal\n      value: "true"\n', "      operator: Exists\n"),
        ),
    ),
    Variant(
        "agents-tolerate-the-clusters-own-taints",
        tolerating("        - key: node.kubernetes.io/not-ready\n          operator: Exists\n"),
    ),
    Variant(
        "crd-preserving-status-only",
        replace(
            CRD,
            "          x-kubernetes-preserve-unknown-fields: true\n",
            "          properties:\n            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}\n"
            "            status: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
        ),
    ),
]
