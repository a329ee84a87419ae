"""The sandbox and learner scripts: a learner's script run by bubblewrap with nothing but its own
snapshot of the lab root, the tools on PATH, the fake containerd and a read-only view of its cluster.

``confine`` decides the sandbox (root, user namespace or none) and ``bwrap`` builds its command;
``runner`` runs a script in it; ``clusterview`` and ``doctor`` serve the read-only view, reached
inside through ``forward``; ``containerd`` controls the fake containerd the scripts call.
"""
