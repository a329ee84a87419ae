"""The lab cluster: kwokctl's binary runtime (etcd, kube-apiserver, controller-manager, scheduler and
kwok) built from the pinned Go modules in ``gomod/`` and run on the lab's fake nodes.

``kwok.KwokCluster`` is the one class the rest of the package starts a cluster with. Nothing here
imports the sandbox, the grading helpers or the reports: it stands on ``pytest_gpulab.labs`` only.
"""
