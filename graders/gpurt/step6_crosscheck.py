"""Step 6: rc-crosscheck.sh, matching the handlers the cluster asks for against a loaded configuration.

The grader reads every live RuntimeClass's handler, generates dumps shaped like real `containerd
config dump` output (containerd 1.7 for version 2, 2.x for version 3) and runs the script on them:
all handlers loaded, a random subset missing (seeded: the detail says how to replay it), and once
with no argument, the fake containerd serving the dump. The five runs start side by side.
"""

import pytest

from pytest_gpulab.grading import Run, expect, expect_verdict, generate_dump, listed, required_handlers

pytestmark = pytest.mark.step(6, "rc-crosscheck.sh cross-checks the cluster and the dump", points=20, needs=1)

SCRIPT = "bin/rc-crosscheck.sh"


@pytest.fixture(scope="module")
def required(lab_cluster):
    return required_handlers(lab_cluster.live_or_fail(), made_by="step 1")


@pytest.fixture(scope="module")
def missing(required, step_random):
    """Each check's missing handlers and dump version, drawn once in this order (``--lab-seed`` replays them)."""
    candidates = sorted(required - {"runc"})
    some = [set(step_random.sample(candidates, step_random.randint(1, len(candidates)))) for _ in (2, 3)]
    return {
        "all-2": (set(), 2), "all-3": (set(), 3), "some-2": (some[0], 2), "some-3": (some[1], 3),
        "no-argument": ({step_random.choice(candidates)}, step_random.choice([2, 3])),
    }  # fmt: skip


@pytest.fixture(scope="module")
def crosscheck(script_runner, learner, required, missing, tmp_path_factory):
    """The script's run on each case's dump, all started side by side: a path argument, or none
    (the fake containerd serves the dump)."""
    dumps, runs = tmp_path_factory.mktemp("dumps"), script_runner.runs_of(learner.file(SCRIPT))
    planned = {}
    for case, (left_out, version) in missing.items():
        text = generate_dump((required - left_out) | {"runc"}, version)
        (path := dumps / f"{case}-v{version}.toml").write_text(text)
        planned[case] = Run(cluster=True, dump_text=text) if case == "no-argument" else Run(str(path), cluster=True)
    runs.ahead(*planned.values())
    return lambda case: runs.run(*planned[case].args, **planned[case].options)


def expect_crosscheck(run, missing, version, detail):
    __tracebackhide__ = True
    given = f"Given a version-{version} dump missing {listed(sorted(missing)) or 'nothing'}"
    expected = {f"MISSING={handler}" for handler in missing}
    expect_verdict(run.result, SCRIPT, given, expected, prefix="MISSING", detail=detail)


@pytest.mark.parametrize("version", [2, 3])
def test_ok_when_every_handler_is_loaded(crosscheck, required, version):
    expect_crosscheck(crosscheck(f"all-{version}"), set(), version, {"required": sorted(required)})


@pytest.mark.parametrize("version", [2, 3])
def test_names_each_missing_handler(crosscheck, required, missing, step_random, version):
    left_out, _ = missing[f"some-{version}"]
    detail = {"required": sorted(required), "missing": sorted(left_out), **step_random.detail}
    expect_crosscheck(crosscheck(f"some-{version}"), left_out, version, detail)


def test_reads_containerd_config_dump_without_an_argument(crosscheck, required, missing, step_random):
    left_out, version = missing["no-argument"]
    run = crosscheck("no-argument")
    detail = {"required": sorted(required), "missing": sorted(left_out), **step_random.detail}
    expect_crosscheck(run, left_out, version, detail)
    expect(
        run.asked_for_config_dump(),
        f"With no argument, {SCRIPT} should read `containerd config dump`; it never ran it.",
    )
