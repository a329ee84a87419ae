"""Past one machine: the batch as a Kubernetes Indexed Job.

``gpulab job-manifest BUNDLES`` writes a Job with one completion index per bundle
(``completionMode: Indexed``). Every Pod mounts one shared volume holding
``bundles/`` and ``results/``; the Job controller gives Pod i ``JOB_COMPLETION_INDEX=i``,
and ``gpulab job-entry`` grades bundle i, in the order of ``batch.bundles_in``
(by file name), into ``results/<learner>/``, each in a lab cluster of its own
inside the Pod. Once the Job is complete, ``gpulab cohort-report results/`` writes
the cohort report. A failed index is retried alone (``backoffLimitPerIndex``).
The image is ``Containerfile`` at the top of the checkout.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from .batch import bundles_in, current_rubrics, finished, grade_safely, results_folders
from .regrade import ERROR
from .warm import Stopped

MOUNT = "/work"
STOPPED = 128 + signal.SIGTERM  # the exit status of a Pod stopped mid-grading: the Job runs its index again


# The least a Pod needs for the learner-script sandbox (bubblewrap in a user namespace) and the lab cluster's
# processes, as measured in an unprivileged container (scripts/measure-sandbox-context, docs/instructors.md, "Past one
# machine"): no root, no capability, no privilege escalation, a read-only image. Two loosenings remain:
# a user namespace of the Pod's own (hostUsers: false), which makes procMount: Unmasked safe and allowed,
# and Unmasked itself, without which the kernel refuses the sandbox a /proc of its own.
USER = 1000
CONTAINER_SECURITY = {
    "privileged": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "procMount": "Unmasked",
}


def pod_security(seccomp_profile: str | None) -> dict[str, Any]:
    """The Pod's own security context: a non-root user, and seccomp RuntimeDefault (which lets an unprivileged
    process make namespaces on CRI-O) or, where the runtime's default forbids it (containerd), a Localhost
    profile installed on the nodes (``scripts/measure-sandbox-context`` writes one, ``bwrap-localhost.json``)."""
    seccomp: dict[str, str] = {"type": "RuntimeDefault"}
    if seccomp_profile:
        seccomp = {"type": "Localhost", "localhostProfile": seccomp_profile}
    return {"runAsNonRoot": True, "runAsUser": USER, "runAsGroup": USER, "fsGroup": USER, "seccompProfile": seccomp}


def job_manifest(
    count: int,
    *,
    image: str,
    claim: str,
    name: str = "gpulab-grade",
    namespace: str = "default",
    parallelism: int = 4,
    seccomp_profile: str | None = None,
) -> dict[str, Any]:
    """The Indexed Job that grades ``count`` bundles from the volume claim ``claim``."""
    container = {
        "name": "grader",
        "image": image,
        "command": ["gpulab", "job-entry", "--bundles", f"{MOUNT}/bundles", "--out", f"{MOUNT}/results"],
        "securityContext": CONTAINER_SECURITY,
        "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
        "volumeMounts": [{"name": "work", "mountPath": MOUNT}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    volumes = [{"name": "work", "persistentVolumeClaim": {"claimName": claim}}, {"name": "tmp", "emptyDir": {}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "pytest-gpulab"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": min(parallelism, count),
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": count,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "pytest-gpulab"}},
                "spec": {
                    "restartPolicy": "Never",
                    "hostUsers": False,
                    "securityContext": pod_security(seccomp_profile),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


class EntryError(Exception):
    """The Pod cannot tell which bundle is its own."""


def own_bundle(bundles: Path, environment: dict[str, str]) -> Path:
    """Bundle ``JOB_COMPLETION_INDEX`` of the folder, by file name."""
    raw = environment.get("JOB_COMPLETION_INDEX")
    if raw is None or not raw.isdigit():
        raise EntryError(f"JOB_COMPLETION_INDEX is {raw!r}, not an index: run this as a Pod of an Indexed Job")
    found = bundles_in(bundles)
    if int(raw) >= len(found):
        raise EntryError(f"index {raw} has no bundle: {bundles} holds {len(found)} (the Job's completions must match)")
    return found[int(raw)]


def job_entry(bundles: Path, out: Path, environment: dict[str, str] | None = None) -> int:
    """Grade this Pod's bundle; 0 once its outcome is recorded (graded or refused), 1 to have the index retried (an
    error), STOPPED when SIGTERM stopped the grading (nothing recorded: the index is retried)."""
    environment = dict(os.environ) if environment is None else environment
    try:
        bundle = own_bundle(bundles, environment)
    except EntryError as error:
        print(f"gpulab job-entry: {error}", file=sys.stderr)
        return 2
    folders, refused = results_folders(bundles_in(bundles))
    if bundle in refused:
        print(f"{bundle.name}: refused: {refused[bundle]}", file=sys.stderr)
        return 0
    folder = out / folders[bundle]
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        outcome = finished(folder, bundle, current_rubrics()) or grade_safely(bundle, folder)
    except Stopped:
        print(f"{bundle.name}: stopped by SIGTERM before its grading ended; nothing recorded, to be graded again",
              file=sys.stderr)  # fmt: skip
        return STOPPED
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"{bundle.name}: {outcome.status} {outcome.earned}/{outcome.possible} {outcome.reason or ''}".rstrip())
    return 1 if outcome.status == ERROR else 0


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """The Pod is being deleted (the kubelet's SIGTERM, which the container's first process gets only through a
    handler): the grading stops, its scripts and cluster with it, and nothing of it is recorded as an outcome.
    A second SIGTERM while it stops is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped("SIGTERM")
