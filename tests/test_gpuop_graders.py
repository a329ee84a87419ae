"""The gpuop graders, proven against the reference solution on real lab clusters.

Every test that was here moved to ``gpulab selftest gpuop`` (tests/test_selftest.py), whose rows are
declared in graders/gpuop/variants.toml:

- the reference passes every step, grading changing no learner file and no cluster object: its row
  ``reference``;
- each trap fails exactly its step with its hint, each form passes: a ``[[trap]]`` or ``[[form]]`` each
  (the traps and causes of tests/gpuop_traps.py and tests/gpuop_causes.py, the forms of
  tests/gpuop_variants.py);
- the untouched start fails every step cleanly: its row ``untouched start``;
- the cluster mistakes of steps 6 and 8 (a plain patch of the node status; the new DaemonSet spec pushed
  before the Pods were Ready): the traps ``node-status-patched-without-subresource`` and
  ``toolkit-ds-pushed-before-ready``;
- a Pod the API server refused, and a DaemonSet changed in two edits, each named for what happened: the
  traps ``gpu-pod-refused-by-the-api-server`` and ``toolkit-ds-changed-in-two-edits``.

The cohort's cluster state with both mistakes of steps 6 and 8 stays in tests/gpuop_states.py.
"""
