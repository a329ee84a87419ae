"""What one sandboxed learner-script run costs, as a whole process: RUNS runs of a one-line checker, with
or without the cluster (a `cluster=True` run reads the nodes through the grader's read-only view).

    .venv/bin/python bench/script_run_cost.py RUNS [--cluster KUBECONFIG]

It uses only the runner's API that every version since the sandbox has, so the same file measures an
older checkout side by side (PYTHONPATH=OLD_CHECKOUT); bench/README.md has the pairs and their ratios.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine as sandbox

PLAIN = "#!/bin/sh\ncontainerd config dump >/dev/null\necho OK\n"
CLUSTER = "#!/bin/sh\nkubectl get nodes -o name >/dev/null && echo OK\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=int)
    parser.add_argument("--cluster", metavar="KUBECONFIG")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        lab = Path(work) / "lab"
        (lab / "bin").mkdir(parents=True)
        script = lab / "bin" / "check.sh"
        script.write_text(CLUSTER if args.cluster else PLAIN)
        script.chmod(0o755)
        runner = ScriptRunner(Path(work) / "w", 20, lambda: args.cluster, lab_root=lab, sandbox=sandbox.probe())
        for _ in range(args.runs):
            result = runner.run(script, dump="v2-runc-nvidia", cluster=bool(args.cluster)).result
            assert result.stdout == "OK\n", result
        runner.close()


if __name__ == "__main__":
    main()
