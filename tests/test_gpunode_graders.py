"""The gpunode graders, proven against the reference solution on real lab clusters.

Every test that was here moved to ``gpulab selftest gpunode`` (tests/test_selftest.py), whose rows are
declared in graders/gpunode/variants.toml:

- the reference passes every step, grading changing no learner file and no cluster object: its row
  ``reference``;
- each trap fails exactly its step with its hint, each form passes (tests/gpunode_variants.py's): a
  ``[[trap]]`` or ``[[form]]`` each;
- the untouched start fails every step cleanly: its row ``untouched start``;
- a pool whose status was written into its manifest fails step 5 (dropped at create time) and blocks
  step 6 naming why: the trap ``pool-status-at-create-time``.
"""
