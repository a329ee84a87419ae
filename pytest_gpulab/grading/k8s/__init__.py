"""The Kubernetes kit: reading the cluster and the learner's manifests as an operator does.

Example::

    from pytest_gpulab.grading import k8s

    k8s.pods_of(live, deployment)           # a workload's Pods, any kind; none fails the check
    k8s.written_and_applied(file, live, "Pod", "team-a/trainer", check)

Workloads: :func:`pods_of` (DaemonSet, Deployment, Job, ReplicaSet, StatefulSet), :func:`revisions_of`,
:class:`Rollout`, :func:`image_and_memory`, :func:`misread_numbers` (a DaemonSet number read from another field).
Pods and their specs: :func:`containers`, :func:`request`, :func:`effective_request`, :func:`condition`,
:func:`unschedulable_because`, :func:`where_it_is`, :func:`added_by_runtimeclass`, :func:`names_for_handlers`, :func:`pins_to`, :func:`selects`, :func:`tolerates`, :func:`tolerations`.
Nodes: :func:`lab_nodes`, :func:`name_of`, :func:`is_ready`, :func:`is_cordoned`, :func:`taints`,
:func:`is_custom`, :func:`labels_match`, :func:`daemonset_owner`, :func:`coverage_gaps`, :data:`HOSTNAME_LABEL`,
:data:`SYSTEM_TAINT_PREFIX`; what nodes advertise: :func:`advertised`, :func:`expect_advertises`,
:func:`expect_advertises_none`.
RuntimeClasses: :func:`check_runtimeclass`, :func:`handlers_of`, :func:`required_handlers`.
The learner's manifests: :func:`written_and_applied`, :func:`not_applied`, :func:`yaml_in`, :func:`misplaced_key` (a key
written in another place of the object).
"""

from __future__ import annotations

from ...labs.labfile import HOSTNAME_LABEL
from ..parsing import yaml_in
from .kube import (
    Rollout,
    advertised,
    check_runtimeclass,
    condition,
    containers,
    effective_request,
    expect_advertises,
    expect_advertises_none,
    handlers_of,
    image_and_memory,
    pins_to,
    request,
    required_handlers,
    selects,
    unschedulable_because,
    where_it_is,
)
from .manifests import misplaced_key, not_applied, written_and_applied
from .nodes import (
    SYSTEM_TAINT_PREFIX,
    added_by_runtimeclass,
    coverage_gaps,
    daemonset_owner,
    is_cordoned,
    is_custom,
    is_ready,
    lab_nodes,
    labels_match,
    name_of,
    names_for_handlers,
    taints,
    tolerates,
    tolerations,
)
from .workloads import misread_numbers, pods_of, revisions_of

__all__ = [
    "HOSTNAME_LABEL",
    "SYSTEM_TAINT_PREFIX",
    "Rollout",
    "added_by_runtimeclass",
    "advertised",
    "check_runtimeclass",
    "condition",
    "containers",
    "coverage_gaps",
    "daemonset_owner",
    "effective_request",
    "expect_advertises",
    "expect_advertises_none",
    "handlers_of",
    "image_and_memory",
    "is_cordoned",
    "is_custom",
    "is_ready",
    "lab_nodes",
    "labels_match",
    "misplaced_key",
    "misread_numbers",
    "name_of",
    "names_for_handlers",
    "not_applied",
    "pins_to",
    "pods_of",
    "request",
    "required_handlers",
    "revisions_of",
    "selects",
    "taints",
    "tolerates",
    "tolerations",
    "unschedulable_because",
    "where_it_is",
    "written_and_applied",
    "yaml_in",
]
