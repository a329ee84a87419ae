"""Step 5: the MachineConfigPool resource, and a worker pool stuck updating since the reservation."""

from datetime import datetime

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, fail, k8s

pytestmark = pytest.mark.step(5, "The MachineConfigPool and its update stuck since the reservation", points=10)

CRD_FILE = "k8s/mcp-crd.yaml"
POOL_FILE = "k8s/mcp-worker.yaml"
CRD = "machineconfigpools.machineconfiguration.openshift.io"
GROUP = "machineconfiguration.openshift.io"
SINCE = "2024-10-29T09:00:00Z"
COUNTS = {"machineCount": 3, "readyMachineCount": 2, "updatedMachineCount": 2}
CONDITIONS = {"Updated": "False", "Updating": "True"}
CREATE_TIME_HINT = (
    "With the status subresource, the API server drops status from a create or a plain apply: "
    "set it with kubectl patch machineconfigpool worker --subresource=status --type=merge -p '{\"status\": ...}'."
)


def served_v1(crd):
    versions = dig(crd, "spec", "versions") or []
    return next((v for v in versions if isinstance(v, dict) and v.get("name") == "v1"), None)


def keeps_status(schema):
    """Whether a structural schema keeps unknown fields under status (at the root or under status)."""
    preserve = "x-kubernetes-preserve-unknown-fields"
    return dig(schema, preserve) is True or dig(schema, "properties", "status", preserve) is True


def check_crd(crd):
    expect_value(dig(crd, "spec", "group"), GROUP, "spec.group")
    expect_value(dig(crd, "spec", "names", "kind"), "MachineConfigPool", "spec.names.kind")
    expect_value(dig(crd, "spec", "scope"), "Cluster", "spec.scope", why="a pool spans nodes, not a namespace")
    version = served_v1(crd)
    expect(version and version.get("served") is True, "The CRD should serve the version v1 (served: true).")
    expect(
        isinstance(dig(version, "subresources", "status"), dict),
        "Version v1 should have the status subresource (subresources: {status: {}}).",
    )
    expect(
        keeps_status(dig(version, "schema", "openAPIV3Schema")),
        "The v1 schema should preserve unknown fields (x-kubernetes-preserve-unknown-fields: true), "
        "or the API server prunes the pool's status.",
    )


def check_pool(pool):
    expect_value(pool.get("apiVersion"), f"{GROUP}/v1", "the pool's apiVersion")


def test_custom_resource_definition(learner, live):
    k8s.written_and_applied(learner.file(CRD_FILE), live, "CustomResourceDefinition", CRD, check_crd)


def test_worker_pool(learner, live):
    k8s.written_and_applied(learner.file(POOL_FILE), live, "MachineConfigPool", "worker", check_pool)


def same_time(found, expected=SINCE):
    try:
        return datetime.fromisoformat(str(found).replace("Z", "+00:00")) == datetime.fromisoformat(
            expected.replace("Z", "+00:00")
        )
    except ValueError:
        return False


STUCK = {f"status.{key}": answers.exactly(count) for key, count in COUNTS.items()} | {
    f"The {kind} condition's {field}": answer
    for kind, status in CONDITIONS.items()
    for field, answer in (
        ("status", answers.exactly(status)),
        ("lastTransitionTime", answers.Answer(Words(SINCE), same_time)),
    )
}


def stuck_status_of(pool):
    """The pool's status as :data:`STUCK` names its parts."""
    found = {f"status.{key}": dig(pool, "status", key) for key in COUNTS}
    for kind in CONDITIONS:
        found |= {
            f"The {kind} condition's {field}": k8s.condition(pool, kind).get(field)
            for field in ("status", "lastTransitionTime")
        }
    return found


def test_stuck_status(learner, live):
    pool = live.get("MachineConfigPool", "worker")
    expect(pool, f"The MachineConfigPool worker is not in the cluster; apply {POOL_FILE}.")
    if not pool.get("status"):
        written = any(obj.get("status") for obj in learner.file(POOL_FILE).objects())
        fail(
            f"{POOL_FILE} writes the pool's status, but in the cluster the pool worker has none: it was dropped at create time."
            if written
            else "The pool worker has no status in the cluster.",
            hint=CREATE_TIME_HINT,
        )
    present = [kind for kind in CONDITIONS if k8s.condition(pool, kind)]
    if len(present) == 1:
        fail(
            f"In the cluster, the pool worker has only the {present[0]} condition, not both Updated and Updating: a "
            "merge patch replaces the whole conditions list, so the second patch dropped the first one's condition.",
            hint="Set both conditions in one patch: kubectl patch --subresource=status --type=merge with a conditions "
            "list that holds Updated and Updating.",
            detail=pool.get("status"),
        )
    answers.expect_all("In the cluster, the pool worker", stuck_status_of(pool), STUCK, detail=pool.get("status"))
