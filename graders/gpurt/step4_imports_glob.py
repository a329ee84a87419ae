"""Step 4: an imports glob that silently matches nothing."""

import pytest

from pytest_gpulab.grading import Words, answers, containerd, expect, expect_value, fail, should_be, shown

pytestmark = pytest.mark.step(4, "An imports glob that catches nothing", points=15)

MAIN = "etc/config.toml"
DROPIN = "etc/conf.d/99-nvidia.toml"
REPORT = "out/imports.txt"


def matched(learner, glob):
    """What a glob of etc/config.toml catches, resolved as containerd does: relative to etc/, with
    /etc/containerd standing for etc/ and the lab root wherever it stood for itself."""
    return learner.glob(glob, config="etc")


def test_main_config(learner):
    config = learner.file(MAIN).toml()
    expect_value(containerd.top_level(config, "version", MAIN), 2, f"{MAIN}: version at the top level")
    containerd.expect_plugins_match_version(config, MAIN, read_as=2)
    expect_value(
        containerd.cri_containerd(config, MAIN).get("default_runtime_name"), "runc", f"{MAIN}: default_runtime_name"
    )
    containerd.runtime_table(config, MAIN, "runc")


def test_dropin_defines_nvidia(learner):
    """The accident node's drop-in: one that states no version is read as its main file's, version 2."""
    dropin = learner.file(DROPIN).toml()
    containerd.expect_plugins_match_version(dropin, DROPIN, read_as=2, main=MAIN)
    containerd.runtime_table(dropin, DROPIN, "nvidia")


def test_glob_misses_the_dropin(learner):
    config = learner.file(MAIN).toml()
    imports = containerd.top_level(config, "imports", MAIN)
    globs = containerd.imports_of(config)
    expect(globs, should_be(f"{MAIN}: imports", Words("an array with a glob"), imports))
    catching = learner.catches(globs, DROPIN, config="etc")
    if catching:
        fail(
            f"{MAIN}'s imports glob {shown(catching[0])} does match {DROPIN}, so this node would load the drop-in.",
            hint="This step reproduces the accident: write a glob that misses the file's name, e.g. *.conf for a .toml drop-in.",
        )


NOTHING_COUNTED_AS_ONE = {
    1: "The glob catches no file, yet 1 was counted: ls's error line (ls: cannot access ...) counted by wc -l, or "
    "a for loop over a glob that matched nothing, which runs once on the pattern itself. Count files that exist."
}


def test_report(learner):
    values = learner.file(REPORT).key_values("GLOB", "MATCHED", "DROPIN_EXISTS", "LOADED_NVIDIA")
    globs = containerd.imports_of(learner.file(MAIN).toml())
    caught = len(matched(learner, values["GLOB"])) if values["GLOB"] in globs else 0
    asked = {
        "GLOB": answers.Answer(
            Words(f"the glob exactly as {MAIN} writes it ({', '.join(globs) or 'none'})"),
            lambda written: written in globs,
        ),
        "MATCHED": answers.number(caught, shown_as=f"{caught}, what the glob catches", hints=NOTHING_COUNTED_AS_ONE)
        if caught == 0
        else answers.number(caught, shown_as=f"{caught}, what the glob catches"),
        "DROPIN_EXISTS": answers.yes_no(True),
        "LOADED_NVIDIA": answers.yes_no(False, why="a drop-in nobody imports is never loaded"),
    }
    answers.expect_all(REPORT, values, asked, detail=values)
