"""Step 4: a check script that looks at the loaded configuration."""

import re

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, expect, fail, scripts

pytestmark = pytest.mark.step(4, "check-runtime.sh reads the loaded configuration", points=15)

SCRIPT = "bin/check-runtime.sh"
WITH_NVIDIA = "v2-runc-nvidia"
# The node of the accident: the drop-in is imported, only runc is loaded. A check that
# greps for "nvidia" or looks at the imports line says "loaded" here, and is wrong.
WITHOUT_NVIDIA = "v2-accident-imported-not-loaded"
# The nvidia binary under another handler name: a check that greps the binary, counts runtimes or
# takes any runtime but runc for nvidia says "loaded", yet a RuntimeClass with handler nvidia fails.
OTHER_GPU_HANDLER = "v2-runc-gpu-handler"
NO_NVIDIA_AT_ALL = "v2-runc-only"
FILES_HINT = "A file is what was written, not what was loaded: judge by the output of `containerd config dump` alone."
CHECKER = Checker(SCRIPT, finding=None, reads_containerd=True)


@pytest.fixture(scope="module")
def runs(script_runner, learner):
    return script_runner.runs_of(learner.file(SCRIPT)).ahead(
        scripts.Run(dump=WITH_NVIDIA),
        scripts.Run(dump=WITHOUT_NVIDIA),
        scripts.Run(dump=OTHER_GPU_HANDLER),
        scripts.Run(containerd=False),
    )


@pytest.fixture(scope="module")
def checker_cases(runs):
    """The accident's node (runtimes.nvidia not loaded: non-zero) and a node that loaded it (exit 0)."""
    return Cases(
        runs,
        Case("Given the accident's dump (99-nvidia.toml imported, runtimes.nvidia not loaded)",
             options={"dump": WITHOUT_NVIDIA}, expected=frozenset({"not loaded"})),
        Case("Given a dump that has runtimes.nvidia", options={"dump": WITH_NVIDIA}),
    )  # fmt: skip


def test_reads_the_dump_not_the_files(learner):
    code = learner.file(SCRIPT).code()
    if "/etc/containerd/config.toml" in code:
        fail(f"{SCRIPT} names /etc/containerd/config.toml.", hint=FILES_HINT)
    # Built up in pieces (a variable, a path join) or through the drop-ins, it is the same reading.
    for name in ("config.toml", "conf.d"):
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", code):
            fail(f"{SCRIPT} refers to the configuration files ({name}).", hint=FILES_HINT)
    # A program lives in a bin directory; /etc/containerd or /run/containerd are not calls.
    absolute = re.search(r"(?<![\w.-])(/[\w./-]*\bs?bin/containerd)(?![\w.-])", code)
    if absolute:
        fail(
            f"{SCRIPT} calls containerd by an absolute path ({absolute.group(1)}).",
            hint="Call plain `containerd` so it is found on PATH, where the grader puts its fake daemon.",
        )
    # Whether it calls containerd at all is for the runs to show: the fake sees every call made through PATH.


def test_exits_0_when_nvidia_is_loaded(runs, learner, feedback):
    result = runs.run(dump=WITH_NVIDIA).result
    if result.ran_with_bash:
        feedback.note(
            f"{SCRIPT} has no #! line, so the grader ran it with bash; start it with #!/usr/bin/env bash."
            if learner.file(SCRIPT).executable
            else f"{SCRIPT} is not executable (chmod +x), so the grader ran it with bash."
        )
    expect(
        result.exit_code == 0,
        f"Given a dump that has runtimes.nvidia, {SCRIPT} {result.describe()}{scripts.said(result)}; it should exit 0.",
        hint=scripts.exit_diagnosis(result, should_succeed=True),
        detail=result.__dict__,
    )


def why_it_said_loaded(runs):
    """The cause, when the script exits 0 on the accident's dump: it never fails, or it reads the wrong thing."""
    if runs.run(dump=NO_NVIDIA_AT_ALL).result.exit_code == 0:
        return "It exits 0 even for a dump with no nvidia in it at all: end with exit 1 when containerd.runtimes.nvidia is not in the dump."
    return (
        "That dump is the accident's node: it imports 99-nvidia.toml yet loaded only runc. "
        "Look for containerd.runtimes.nvidia, not for the word nvidia."
    )


def test_exits_nonzero_when_nvidia_is_not_loaded(runs):
    result = runs.run(dump=WITHOUT_NVIDIA).result
    expect(
        not result.timed_out and not result.flooded and result.exit_code not in (0, None),
        f"Given a dump without runtimes.nvidia, {SCRIPT} {result.describe()}{scripts.said(result)}; it should exit non-zero so the check can fail.",
        hint=scripts.exit_diagnosis(result, should_succeed=False)
        or (why_it_said_loaded(runs) if result.exit_code == 0 else None),
        detail=result.__dict__,
    )


OTHER_NAME_HINT = (
    "Look for the runtime table containerd.runtimes.nvidia itself, not for the nvidia binary or a count of runtimes."
)


def test_exits_nonzero_when_the_gpu_runtime_has_another_name(runs):
    result = runs.run(dump=OTHER_GPU_HANDLER).result
    expect(
        not result.timed_out and not result.flooded and result.exit_code not in (0, None),
        f"Given a dump whose GPU runtime is named gpu, not nvidia, {SCRIPT} {result.describe()}{scripts.said(result)}; "
        "it should exit non-zero: a RuntimeClass with handler nvidia finds no runtime of that name.",
        hint=scripts.exit_diagnosis(result, should_succeed=False)
        or (OTHER_NAME_HINT if result.exit_code == 0 else None),
        detail=result.__dict__,
    )


def test_asks_containerd_config_dump(runs):
    asked = [runs.run(dump=dump) for dump in (WITH_NVIDIA, WITHOUT_NVIDIA)]
    expect(
        all(run.asked_for_config_dump() for run in asked),
        f"{SCRIPT} did not run `containerd config dump`{scripts.said(asked[0].result)}; it must judge by what the daemon loaded.",
        detail={"calls": [run.containerd.calls() for run in asked]},
    )
