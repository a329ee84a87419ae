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


FILES_HINT = "A file is what was written, not what was loaded: judge by the output of `containerd config dump` alone."


def check_statically(code):
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
    expect(re.search(r"(?<![\w/.-])containerd(?![\w.-])", code), f"{SCRIPT} never calls containerd; it should run `containerd config dump`.")


def said(result):
    """What the script printed on stderr, for the learner: its first line, if any."""
    first = next((line.strip() for line in result.stderr.splitlines() if line.strip()), "")
    return f" (it said: {first[:200]})" if first else ""


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
        f"Given a dump that has runtimes.nvidia, {SCRIPT} {with_nvidia.describe()}{said(with_nvidia)}; it should exit 0.",
        detail=runs,
    )
    saw_dump = fake_containerd.asked_for_config_dump()

    fake_containerd.reset_calls()
    without_nvidia = learner_script.run(path, dump=WITHOUT_NVIDIA)
    runs["without_nvidia"] = without_nvidia.__dict__
    expect(
        not without_nvidia.timed_out and not without_nvidia.flooded and without_nvidia.exit_code not in (0, None),
        f"Given a dump without runtimes.nvidia, {SCRIPT} {without_nvidia.describe()}{said(without_nvidia)}; it should exit non-zero so the check can fail.",
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
