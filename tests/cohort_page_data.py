"""The synthetic cohort behind the cohort page's tests, and the numbers its reports must show.

Four steps, twelve graded learners and two bundles not graded; ``build_results`` writes their
RESULTS/ folder as a batch grading leaves it (an outcome.json per learner, a report.json if graded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpulab.cohort.regrade import Outcome
from pytest_gpulab.reports.report_file import write_atomically

# The cohort: four steps, twelve graded learners (P passed, F failed, B blocked, E error, N not graded),
# one bundle refused and one whose grading failed.
STEPS = {
    1: ("Load the driver", 10),
    2: ("Label the GPU nodes", 20),
    3: ("Deploy the operator", 30),
    4: ("Run a CUDA job", 40),
}
OUTCOMES = {"P": "passed", "F": "failed", "B": "blocked", "E": "error", "N": "not graded"}
COHORT = {
    "ada": "PPPP", "bob": "PPPF", "cy": "PPFB", "dee": "PFBB", "eve": "FBBB", "fay": "PPPP",
    "gus": "PPPF", "hal": "PPFN", "ivy": "PEPP", "jo": "PPPF", "kim": "PPFF", "lu": "PFPP",
}  # fmt: skip
PARTIAL = {("jo", 4): 39}  # points earned on a failed step: jo has 99 of 100
SCRIPT = '<script>alert("pwned")</script> & "CrashLoopBackOff"'
NO_LABEL = "gpu-node-1 has no nvidia.com/gpu.present label"
EXITED = "the job exited 1"
NO_GPU = "the pod asks for no nvidia.com/gpu"
FAILING: dict[tuple[str, int], list[tuple[str, str, str | None]]] = {  # (learner, step): failed (id, message, hint)
    ("eve", 1): [("driver-loaded", "the nvidia module is not loaded", "run modprobe nvidia")],
    ("dee", 2): [("node-labelled", NO_LABEL, None), ("label-value", "the label’s value is “yes”, not “true”", None)],
    ("lu", 2): [("node-labelled", NO_LABEL, None)],
    ("cy", 3): [("operator-ready", SCRIPT, None)],
    ("hal", 3): [("operator-ready", "the operator pod is Pending", "look at its events"),
                 ("crd-installed", "the ClusterPolicy CRD is missing", None)],
    ("kim", 3): [("operator-ready", SCRIPT, None)],
    ("bob", 4): [("job-succeeded", EXITED, "check the CUDA image tag")],
    ("gus", 4): [("job-succeeded", EXITED, "check the CUDA image tag")],
    ("jo", 4): [("job-succeeded", EXITED, None), ("gpu-requested", NO_GPU, None)],
    ("kim", 4): [("job-succeeded", "no job named cuda-vectoradd", None), ("gpu-requested", NO_GPU, None)],
}  # fmt: skip
NOT_GRADED = {
    "mallory": ("refused", "not a gpulab bundle: bad gzip header"),
    "nat": ("error", "grading crashed: KeyError('<nodes>') & the cluster was gone"),
}

# What the reports must say, worked out by hand from the cohort above.
EARNED = {"ada": 100, "bob": 60, "cy": 30, "dee": 10, "eve": 0, "fay": 100,
          "gus": 60, "hal": 30, "ivy": 80, "jo": 99, "kim": 30, "lu": 80}  # fmt: skip
PASS_RATES = {1: 11 / 12, 2: 8 / 12, 3: 7 / 12, 4: 4 / 11}  # step 4: hal was not graded on it
PERCENTS = {1: "92%", 2: "67%", 3: "58%", 4: "36%"}
STEP_OUTCOMES = {
    1: {"passed": 11, "failed": 1},
    2: {"passed": 8, "failed": 2, "blocked": 1, "error": 1},
    3: {"passed": 7, "failed": 3, "blocked": 2},
    4: {"passed": 4, "failed": 4, "blocked": 3, "not graded": 1},
}
DISTRIBUTION = {"0-9%": 1, "10-19%": 1, "20-29%": 0, "30-39%": 3, "40-49%": 0, "50-59%": 0,
                "60-69%": 2, "70-79%": 0, "80-89%": 2, "90-99%": 1, "100%": 2}  # fmt: skip
FAILED_CHECKS = {  # step: [(check, {learner text: learners})], most frequent first
    1: [("driver-loaded", {"the nvidia module is not loaded Hint: run modprobe nvidia": 1})],
    2: [("node-labelled", {NO_LABEL: 2}), ("label-value", {"the label’s value is “yes”, not “true”": 1})],
    3: [("operator-ready", {SCRIPT: 2, "the operator pod is Pending Hint: look at its events": 1}),
        ("crd-installed", {"the ClusterPolicy CRD is missing": 1})],
    4: [("job-succeeded", {f"{EXITED} Hint: check the CUDA image tag": 2, EXITED: 1, "no job named cuda-vectoradd": 1}),
        ("gpu-requested", {NO_GPU: 2})],
}  # fmt: skip
SUMMARY = "14 bundles, 12 graded; mean 57%, median 60%. Lab gpuop, rubric 1.2."


# Building RESULTS/ ---------------------------------------------------------------------------------


def step_checks(learner: str, number: int, outcome: str) -> list[dict[str, Any]]:
    ran = [{"id": f"step-{number}-started", "outcome": "passed", "message": "ok", "hint": None}]
    failed = [{"id": c, "outcome": "failed", "message": m, "hint": h} for c, m, h in FAILING.get((learner, number), [])]
    errored = [{"id": "api-reachable", "outcome": "error", "message": "the API timed out", "hint": None}]
    return {"passed": ran, "failed": ran + failed, "error": errored}.get(outcome, [])


def grading_report(learner: str, codes: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for (number, (title, points)), code in zip(STEPS.items(), codes, strict=True):
        outcome = OUTCOMES[code]
        earned = points if outcome == "passed" else PARTIAL.get((learner, number), 0)
        steps.append({"number": number, "title": title, "outcome": outcome, "earned": earned, "points": points,
                      "checks": step_checks(learner, number, outcome)})  # fmt: skip
    total = sum(step["earned"] for step in steps)
    return {"lab": "gpuop", "rubric_version": "1.2", "earned": total, "possible": 100, "steps": steps}


def write_learner(results: Path, outcome: Outcome, report: dict[str, Any] | None) -> None:
    folder = results / outcome.learner
    folder.mkdir()
    write_atomically(folder / "outcome.json", outcome.as_dict())
    if report is not None:
        write_atomically(folder / "report.json", report)  # as the grading writes it


def build_results(results: Path) -> None:
    results.mkdir()
    for learner, codes in COHORT.items():
        report = grading_report(learner, codes)
        outcome = Outcome(learner, f"{learner}.gpulab.tar.gz", "0" * 64, "graded", None, "gpuop", "1.2", "1.2", 7,
                          report["earned"], 100, [], {"grade": 3.0})  # fmt: skip
        write_learner(results, outcome, report)
    for learner, (status, reason) in NOT_GRADED.items():
        write_learner(results, Outcome(learner, f"{learner}.gpulab.tar.gz", "0" * 64, status, reason), None)
    # A report left by a grading that then failed counts nowhere.
    write_atomically(results / "nat" / "report.json", grading_report("nat", "PPPP"))
