"""The variants.toml format (pytest_gpulab/variants.py) and how `gpulab selftest` judges a row from a grading
report (pytest_gpulab/selftest_judge.py), without a cluster."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pytest_gpulab.selftest.judge import REFERENCE, START, Row, judge, matrix
from pytest_gpulab.selftest.variants import EditFailed, VariantsError, load_variants

CHECKOUT = Path(__file__).resolve().parent.parent

EVERY_EDIT = r"""
[[form]]
name = "every-edit"
note = "a note"
grader_args = ["--script-timeout", "2"]
requires = ["bash"]
[[form.edit]]
replace = "a.txt"
old = "one"
new = "1"
count = 1
[[form.edit]]
sub = "a.txt"
pattern = '^two (\w+)$'
new = '\1 2'
[[form.edit]]
append = "a.txt"
text = "end\n"
[[form.edit]]
prepend = "a.txt"
text = "# start\n"
[[form.edit]]
write = "bin/run.sh"
mode = 0o755
text = '''
#!/bin/sh
echo "hi"
'''
[[form.edit]]
write = "garbage.bin"
hex = "ff fe 00 9c"
[[form.edit]]
chmod = "b.txt"
mode = 0o600
[[form.edit]]
remove = "c.txt"
[[form.edit]]
mkdir = "c.txt"

[[trap]]
name = "a-cluster-trap"
step = 5
says = ["dropped"]
says_not = ["crash"]
blocks = [6]
blocked_says = ["missing"]
solve_steps = [1, 2]
shell = "kubectl get nodes"
"""


def lab_with(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "variants.toml").write_text(text)
    return folder


def test_every_edit_changes_the_lab_root_as_written(tmp_path):
    form, trap = load_variants(lab_with(tmp_path, EVERY_EDIT))
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("one one\ntwo words\n")
    (root / "b.txt").write_text("b")
    (root / "c.txt").write_text("c")
    form.apply_edits(root)
    assert (root / "a.txt").read_text() == "# start\n1 one\nwords 2\nend\n"
    assert (root / "bin/run.sh").read_text() == '#!/bin/sh\necho "hi"\n'
    assert stat.S_IMODE((root / "bin/run.sh").stat().st_mode) == 0o755
    assert (root / "garbage.bin").read_bytes() == b"\xff\xfe\x00\x9c"
    assert stat.S_IMODE((root / "b.txt").stat().st_mode) == 0o600
    assert (root / "c.txt").is_dir()
    assert (form.kind, form.note, form.grader_args, form.requires, form.own_cluster) == (
        "form", "a note", ("--script-timeout", "2"), ("bash",), False,
    )  # fmt: skip
    assert (trap.step, trap.says, trap.says_not, trap.blocks, trap.blocked_says) == (
        5, ("dropped",), ("crash",), (6,), ("missing",),
    )  # fmt: skip
    assert (trap.solve_steps, trap.shell, trap.own_cluster) == ((1, 2), "kubectl get nodes", True)


def test_an_edit_that_changes_nothing_or_misses_its_file_says_so(tmp_path):
    (form,) = load_variants(
        lab_with(tmp_path, '[[form]]\nname = "f"\n[[form.edit]]\nreplace = "a"\nold = "x"\nnew = "y"\n')
    )
    with pytest.raises(EditFailed, match="replace a: No such file"):
        form.apply_edits(tmp_path)
    (tmp_path / "a").write_text("z")
    with pytest.raises(EditFailed, match="replace a changed nothing: the reference's file is not as it expects"):
        form.apply_edits(tmp_path)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[[form]]\nname = "f"\ncolour = 1\n', "form 'f': unknown key 'colour'"),
        ('[[trap]]\nname = "t"\n[[trap.edit]]\nremove = "a"\n', "trap 't': step is required"),
        ('[[trap]]\nname = "t"\nstep = "1"\nshell = "true"\n', "step should be an integer, found '1'"),
        ('[[form]]\nname = "f"\n', "form 'f': it changes nothing"),
        ('[[form]]\nname = "f"\n[[form.edit]]\nremove = "../x"\n', "'../x' should be a path inside the lab root"),
        ('[[form]]\nname = "f"\n[[form.edit]]\nsub = "a"\npattern = "("\nnew = ""\n', "the pattern does not compile"),
        ('[[form]]\nname = "f"\n[[form.edit]]\nremove = "a"\nchmod = "a"\n', "should name one action"),
        ('[[form]]\nname = "f"\n[[form.edit]]\nwrite = "a"\nhex = "zz"\n', "hex should be pairs of hex digits"),
        ('[[form]]\nname = "f"\nshell = "true"\n[[form]]\nname = "f"\nshell = "true"\n', "two variants named 'f'"),
        ('[[trap]]\nname = "t"\nstep = 2\nblocks = [2]\nshell = "true"\n', "blocks lists its own step 2"),
        ('[[mistake]]\nname = "m"\n', "unknown table 'mistake'"),
        (
            '[[trap]]\nname = "t"\n[[trap.edit]]\nremove = "a"\nstep = 1\n',
            "edit 1 (remove): unknown key 'step' (it takes: remove; a variant's own keys go before its first",
        ),
    ],
)
def test_a_mistake_in_the_file_is_named_with_its_variant_and_key(tmp_path, text, error):
    with pytest.raises(VariantsError, match=None) as raised:
        load_variants(lab_with(tmp_path, text))
    assert error in str(raised.value)
    assert str(tmp_path / "lab" / "variants.toml") in str(raised.value)


def test_the_labs_keep_every_variant_they_had_in_python():
    """153 Python variants were moved (tests/gpu*_variants.py, gpuop_traps.py, gpuop_causes.py), each making the
    same change; 5 cluster-state tests became traps with a shell snippet."""
    counts = {}
    for lab in ("gpuop", "gpurt", "gpunode"):
        variants = load_variants(CHECKOUT / "graders" / lab)
        files = [variant for variant in variants if not variant.own_cluster]
        counts[lab] = (sum(v.kind == "form" for v in files), sum(v.kind == "trap" for v in files), len(variants))
    moved = {"gpuop": (27, 62, 93), "gpurt": (9, 23, 32), "gpunode": (7, 25, 33)}  # later issues add more
    assert all(a >= b for lab in moved for a, b in zip(counts[lab], moved[lab], strict=True)), counts
    example = load_variants(CHECKOUT / "tests" / "examples" / "gpuquota")
    kinds = {v.name: (v.kind, v.own_cluster) for v in example}
    assert kinds["gpu-limit-quoted"] == ("form", False)
    assert kinds["free-gpus-is-the-quota"] == ("trap", False)
    assert kinds["trainer-without-toleration"] == ("trap", True)


def step(number: int, outcome: str, message: str = "", blocked_by: tuple[int, ...] = (), notes=()) -> dict:
    check = {"id": f"lab.{number}.x", "outcome": outcome, "message": message, "hint": None, "notes": list(notes)}
    return {"number": number, "title": "T", "points": 5, "outcome": outcome, "message": message or None,
            "hint": None, "blocked_by": list(blocked_by), "checks": [check]}  # fmt: skip


def test_a_trap_is_judged_on_its_step_its_words_and_every_other_step(tmp_path):
    text = '[[trap]]\nname = "t"\nstep = 1\nsays = ["wrong"]\nsays_not = ["KeyError"]\nblocks = [2]\nshell = "true"\n'
    (trap,) = load_variants(lab_with(tmp_path, text))
    blocked = "Blocked by step 1: gone. Because step 1 failed: wrong."
    right = Row("trap", trap)
    judge(
        right,
        {"steps": [step(1, "failed", "It is wrong."), step(2, "blocked", blocked, (1,)), step(3, "passed")]},
        "lab",
    )
    assert right.problems == []
    assert right.verdict == "ok"
    wrong = Row("trap", trap)
    judge(wrong, {"steps": [step(1, "failed", "KeyError: 'x'"), step(2, "passed"), step(3, "error", "Broke.")]}, "lab")
    assert wrong.problems == [
        "step 1's message lacks 'wrong': \"KeyError: 'x'\"",
        "step 1's message holds 'KeyError', which it must not: \"KeyError: 'x'\"",
        "step 1's message shows a crash: \"KeyError: 'x'\"",
        "step 2 passed, it should be blocked by step 1",
        "step 3 error, it should pass: 'Broke.'",
    ]
    assert matrix("lab", [right, wrong])[1:] == ["trap t (fails 1)  F B P  ok", "trap t (fails 1)  F P E  DISAGREES"]


def test_the_reference_form_and_start_rows_are_judged_as_declared(tmp_path):
    (form,) = load_variants(lab_with(tmp_path, '[[form]]\nname = "f"\nnote = "exec bit"\nshell = "true"\n'))
    noted = Row("form", form)
    judge(noted, {"steps": [step(1, "passed", notes=["no exec bit: ran with bash"])]}, "lab")
    assert noted.problems == []
    silent = Row("form", form)
    judge(silent, {"steps": [step(1, "passed")]}, "lab")
    assert silent.problems == ["no feedback note holds 'exec bit'; the notes: []"]
    start = Row(START)
    judge(
        start,
        {"steps": [step(1, "failed", "Missing."), step(2, "blocked", "Blocked.", (1,)), step(3, "passed")]},
        "lab",
    )
    assert start.problems == [
        "step 2 is blocked without naming step 1 and what it said: 'Blocked.'",
        "step 3 passed, it should fail or be blocked: ''",
        "step 3 fails without a sentence",
    ]
    reference = Row(REFERENCE)
    judge(reference, {"steps": [step(1, "passed"), step(2, "failed", "No.")]}, "other")
    assert reference.problems == [
        "step 2 failed, it should pass: 'No.'",
        "step 1's check lab.1.x is not named other.1.NAME",
        "step 2's check lab.2.x is not named other.2.NAME",
    ]
