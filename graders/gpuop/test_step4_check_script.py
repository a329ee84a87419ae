"""Step 4: a check script that looks at the loaded configuration."""

import os
import re

import pytest

from pytest_gpulab.feedback import expect, fail
from pytest_gpulab.parsing import read_text

pytestmark = pytest.mark.step(4, "check-runtime.sh reads the loaded configuration", points=15)

SCRIPT = "bin/check-runtime.sh"
WITH_NVIDIA = "v2-runc-nvidia"
# The node of the accident: the drop-in is imported, only runc is loaded. A check that
# greps for "nvidia" or looks at the imports line says "loaded" here, and is wrong.
WITHOUT_NVIDIA = "v2-accident-imported-not-loaded"


def code_without_comments(text):
    """Shell text with comments removed (a # that starts a word starts a comment)."""
    kept = []
    for line in text.splitlines():
        kept.append(re.sub(r"(^|\s)#.*$", r"\1", line))
    return "\n".join(kept)


def check_statically(code):
    if "/etc/containerd/config.toml" in code:
        fail(
            f"{SCRIPT} names /etc/containerd/config.toml.",
            hint="The file is what was written, not what was loaded: judge by the output of `containerd config dump`.",
        )
    absolute = next(
        (
            match for match in re.finditer(r"(?<![\w.-])(/[\w./-]*/containerd)(?=[\s;|&)\]\"']|$)", code, re.M)
            # `--root /var/lib/containerd` names a directory, not the program
            if not re.search(r"(^|\s)-{1,2}[\w-]+[\s=]+$", code[: match.start()].rsplit("\n", 1)[-1])
        ),
        None,
    )
    if absolute:
        fail(
            f"{SCRIPT} calls containerd by an absolute path ({absolute.group(1)}).",
            hint="Call plain `containerd` so it is found on PATH, where the grader puts its fake daemon.",
        )
    expect(re.search(r"(?<![\w/.-])containerd(?![\w.-])", code), f"{SCRIPT} never calls containerd; it should run `containerd config dump`.")


def test_check_runtime_script(lab_root, learner_script, fake_containerd, feedback):
    path = lab_root / SCRIPT
    check_statically(code_without_comments(read_text(path, SCRIPT)))

    with_nvidia = learner_script.run(path, dump=WITH_NVIDIA)
    if with_nvidia.ran_with_bash:
        feedback.note(
            f"{SCRIPT} has no #! line, so the grader ran it with bash; start it with #!/usr/bin/env bash."
            if os.access(path, os.X_OK)
            else f"{SCRIPT} is not executable (chmod +x), so the grader ran it with bash."
        )
    runs = {"with_nvidia": with_nvidia.__dict__}
    expect(
        with_nvidia.exit_code == 0,
        f"Given a dump that has runtimes.nvidia, {SCRIPT} {with_nvidia.describe()}; it should exit 0.",
        detail=runs,
    )
    saw_dump = fake_containerd.asked_for_config_dump()

    fake_containerd.reset_calls()
    without_nvidia = learner_script.run(path, dump=WITHOUT_NVIDIA)
    runs["without_nvidia"] = without_nvidia.__dict__
    expect(
        not without_nvidia.timed_out and not without_nvidia.flooded and without_nvidia.exit_code not in (0, None),
        f"Given a dump without runtimes.nvidia, {SCRIPT} {without_nvidia.describe()}; it should exit non-zero so the check can fail.",
        hint=(
            "That dump is the accident's node: it imports 99-nvidia.toml yet loaded only runc. "
            "Look for containerd.runtimes.nvidia, not for the word nvidia."
        ) if without_nvidia.exit_code == 0 else None,
        detail=runs,
    )
    expect(
        saw_dump and fake_containerd.asked_for_config_dump(),
        f"{SCRIPT} did not run `containerd config dump`; it must judge by what the daemon loaded.",
        detail={"calls": fake_containerd.calls(), **runs},
    )
