"""The gpuquota lab's own helpers: what only this lab needs stays in its folder, imported by its steps."""

from pytest_gpulab.grading import dig, k8s


def free_gpus(live):
    """The team's GPU quota less what its Pods ask for, as the scheduler counts it (a whole number)."""
    quota = int(dig(live.get("ConfigMap", "team-a/quota"), "data", "gpus"))
    asked = sum(k8s.effective_request(pod, "nvidia.com/gpu") or 0 for pod in live.list("Pod", "team-a"))
    return int(quota - asked)
