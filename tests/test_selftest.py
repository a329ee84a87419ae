"""`gpulab selftest` proves each lab on real lab clusters: the three labs and the example lab pass their own
proof, and a wrong declaration, a stale edit and a broken shell snippet are each named.

The labs' reference, untouched-start, trap and form tests moved here from tests/test_gpuop_graders.py,
tests/test_gpurt_graders.py and tests/test_gpunode_graders.py (their docstrings say where each went);
their variants are declared in graders/<lab>/variants.toml.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpulab.selftest.variants import load_variants

CHECKOUT = Path(__file__).resolve().parent.parent
LAB_DIRS = {
    "gpuop": CHECKOUT / "graders",
    "gpurt": CHECKOUT / "graders",
    "gpunode": CHECKOUT / "graders",
    "gpuquota": CHECKOUT / "tests" / "examples",
}


def selftest(*args: str) -> subprocess.CompletedProcess[str]:
    """``gpulab selftest`` as a course's CI runs it."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("gpulab")), "selftest", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip


def verdicts(stdout: str) -> dict[str, tuple[str, str]]:
    """The matrix's rows: each label's marks and verdict."""
    rows = re.findall(
        r"^((?:reference|untouched start|form \S+|trap \S+ \(fails \d+\)))\s+([PFBE\- ]+?)  (.+)$", stdout, re.M
    )
    return {label: (marks, verdict) for label, marks, verdict in rows}


@pytest.mark.timeout(2400)  # every row graded live and from its bundle: a lab is some 100 to 220 gradings on 2 cores
@pytest.mark.parametrize("lab", LAB_DIRS)
def test_each_lab_proves_itself(lab):
    """The reference passes, the untouched start fails every step cleanly, every form passes and every trap
    fails exactly its step with its words: every row of the matrix as declared."""
    done = selftest("--lab-dir", str(LAB_DIRS[lab]), lab, "--jobs", "2")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    variants = load_variants(LAB_DIRS[lab] / lab)
    labels = {"reference", "untouched start"} | {
        variant.label + (f" (fails {variant.step})" if variant.step else "") for variant in variants
    }
    rows = verdicts(done.stdout)
    assert set(rows) == labels, done.stdout[-6000:]
    skipped = {label for label, (_, verdict) in rows.items() if verdict.startswith("skipped: ")}
    assert all(verdict == "ok" for label, (_, verdict) in rows.items() if label not in skipped), done.stdout
    assert skipped == ({"form crosscheck-with-sed-and-jq"} if lab == "gpurt" and not shutil.which("jq") else set())
    assert f"{lab}: {len(labels) - len(skipped)} of {len(labels)} rows as declared" in done.stdout


WRONG = """
[[form]]
name = "not-a-right-answer"
[[form.edit]]
write = "out/free.txt"
text = "FREE_GPUS=0\\n"

[[trap]]
name = "declared-on-the-wrong-step"
step = 1
says = ["FREE_GPUS"]
[[trap.edit]]
write = "out/free.txt"
text = "FREE_GPUS=7\\n"

[[trap]]
name = "stale-edit"
step = 2
[[trap.edit]]
replace = "out/free.txt"
old = "FREE_GPUS=9"
new = "FREE_GPUS=8"

[[trap]]
name = "broken-shell"
step = 1
shell = "kubectl get pod no-such-pod -n team-a"
"""


def test_each_disagreement_is_named_and_fails_the_run(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(LAB_DIRS["gpuquota"] / "gpuquota", course / "gpuquota")
    with open(course / "gpuquota" / "variants.toml", "a") as variants:
        variants.write(WRONG)
    only = ("not-a-right-answer", "declared-on-the-wrong-step", "stale-edit", "broken-shell", "gpu-limit-quoted")
    done = selftest("--lab-dir", str(course), "gpuquota", *(f"--only={name}" for name in only))
    assert done.returncode == 1, done.stdout + done.stderr
    rows = verdicts(done.stdout)
    assert rows == {
        "reference": ("P P", "ok"),
        "form gpu-limit-quoted": ("P P", "ok"),
        "form not-a-right-answer": ("P F", "DISAGREES"),
        "trap declared-on-the-wrong-step (fails 1)": ("P F", "DISAGREES"),
        "trap stale-edit (fails 2)": ("- -", "ERROR"),
        "trap broken-shell (fails 1)": ("- -", "ERROR"),
    }, done.stdout
    problems = done.stdout.split("Disagreements:", 1)[1]
    assert "form not-a-right-answer:\n  step 2 failed, it should pass: 'FREE_GPUS in out/free.txt should be" in problems
    assert "  step 1 passed, it should fail: ''" in problems
    assert "step 1's message lacks 'FREE_GPUS'" in problems
    assert "replace out/free.txt changed nothing" in problems
    assert "the shell snippet failed (exit 1)" in problems
    assert "no-such-pod" in problems
    assert (
        "gpuquota: 2 of 6 rows as declared; the lab is wrong in 4: form not-a-right-answer, trap declared-on"
        in done.stdout
    )


def test_a_mistake_in_variants_toml_is_named_before_any_cluster_starts(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(LAB_DIRS["gpuquota"] / "gpuquota", course / "gpuquota")
    (course / "gpuquota" / "variants.toml").write_text('[[trap]]\nname = "x"\nstep = 1\n[[trap.edit]]\nwrite = "a"\n')
    done = selftest("--lab-dir", str(course), "gpuquota")
    assert done.returncode == 1
    assert "variants.toml: trap 'x', edit 1: a write takes text or hex (the bytes), one of the two" in done.stderr
    assert "lab cluster" not in done.stdout + done.stderr  # the binaries were not even looked for
