"""Step 3: judge whether the two files collide over the same table."""

import pytest

from pytest_gpulab.grading import Words, answers, containerd, expect, fail, should_be, shown

pytestmark = pytest.mark.step(3, "Merge judgement", points=10)

MERGE = "out/merge.txt"
CONFLICT_PATH = ("plugins", containerd.CRI_V2, "containerd", "runtimes")


def defined_in(learner, relative, lab_value):
    """What a learner file defines; the lab's value when the file is broken or empty (its own step says so)."""
    document = learner.file(relative).toml_or_none()
    return (containerd.defined_runtimes(document) if document else set()) or {lab_value}


SWAPPED_HINT = (
    "MAIN_RUNTIMES and DROPIN_RUNTIMES are swapped: the main file is etc/containerd/config.toml, which imports the "
    "drop-in, whatever order the files were read in."
)


def swapped(learner, values):
    main = defined_in(learner, "etc/containerd/config.toml", "runc")
    dropin = defined_in(learner, "etc/containerd/conf.d/99-nvidia.toml", "nvidia")
    written = (answers.split_list(values["MAIN_RUNTIMES"]), answers.split_list(values["DROPIN_RUNTIMES"]))
    return main != dropin and written == (dropin, main)


def test_runtimes_as_the_files_define_them(learner):
    values = learner.file(MERGE).key_values("MAIN_RUNTIMES", "DROPIN_RUNTIMES")
    for key, relative, lab_value, side in (
        ("MAIN_RUNTIMES", "etc/containerd/config.toml", "runc", "the main file"),
        ("DROPIN_RUNTIMES", "etc/containerd/conf.d/99-nvidia.toml", "nvidia", "the drop-in"),
    ):
        defined = defined_in(learner, relative, lab_value)
        expect(
            answers.split_list(values[key]) == defined,
            f"{MERGE}: " + should_be(key, Words(",".join(sorted(defined))), values[key], why=f"what {side} defines"),
            hint=SWAPPED_HINT if swapped(learner, values) else None,
            detail={"written": values, "computed": sorted(defined)},
        )


def test_conflict(learner):
    values = learner.file(MERGE).key_values("CONFLICT", "CONFLICT_TABLE")
    conflict = answers.parse_yes_no(values["CONFLICT"])
    expect(conflict is not None, f"{MERGE}: " + should_be("CONFLICT", Words("yes or no"), values["CONFLICT"]))
    expect(conflict, f"{MERGE}: CONFLICT should be yes: both files define the same runtimes table.")
    table = values["CONFLICT_TABLE"]
    # A value read from KEY="..." lost its outer quotes: "plugins"."io..." comes back as plugins"."io...
    path = (
        containerd.parse_key_path(table)
        or containerd.parse_key_path(table.replace('\\"', '"'))
        or containerd.parse_key_path(f'"{table}"')
    )
    if path == tuple(["plugins", "io", "containerd", "grpc", "v1", "cri", "containerd", "runtimes"]):
        fail(
            f"{MERGE}: CONFLICT_TABLE is {shown(table)}: without quotes that is a different table path.",
            hint=f"Quote the plugin name as TOML does: {containerd.RUNTIMES_TABLE_V2}.",
        )
    expect(
        path == CONFLICT_PATH, f"{MERGE}: " + should_be("CONFLICT_TABLE", Words(containerd.RUNTIMES_TABLE_V2), table)
    )


def test_loaded_runtimes(learner):
    written = learner.file(MERGE).key_values("LOADED_RUNTIMES")["LOADED_RUNTIMES"]
    if answers.split_list(written) >= {"runc", "nvidia"}:
        fail(
            f"{MERGE}: LOADED_RUNTIMES is {shown(written)}: that is what the files promise, not what was loaded.",
            hint="This line is observed, not computed: on the day of the accident containerd config dump showed only runc.",
        )
    expect(
        answers.split_list(written) == {"runc"},
        f"{MERGE}: " + should_be("LOADED_RUNTIMES", Words("runc"), written, why="observed with containerd config dump"),
    )
