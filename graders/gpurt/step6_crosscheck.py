"""Step 6: rc-crosscheck.sh, matching the handlers the cluster asks for against a loaded configuration.

The grader reads every live RuntimeClass's handler, generates dumps shaped like real `containerd
config dump` output (containerd 1.7 for version 2, 2.x for version 3) and runs the script on them:
all handlers loaded, a random subset missing (seeded: the detail says how to replay it), and once
with no argument, the fake containerd serving the dump.
"""

import pytest

from pytest_gpulab.containerd import generate_dump
from pytest_gpulab.feedback import blocked_unless, expect, listed
from pytest_gpulab.kube import handlers_of
from pytest_gpulab.verdicts import expect_verdict

pytestmark = pytest.mark.step(6, "rc-crosscheck.sh cross-checks the cluster and the dump", points=20, needs=1)

SCRIPT = "bin/rc-crosscheck.sh"


@pytest.fixture(scope="module")
def required(lab_cluster):
    """The handlers the cluster's RuntimeClasses ask for (step 1 creates them)."""
    handlers = handlers_of(lab_cluster.live_or_fail().list("RuntimeClass"))
    blocked_unless(handlers - {"runc"}, "a RuntimeClass to check against, which step 1 creates,")
    return handlers


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return tmp_path_factory.mktemp("dumps")


def run_on(script_runner, learner, dumps, loaded, version, *, as_argument=True):
    text = generate_dump(loaded, version)
    path = dumps / f"dump-v{version}-{len(list(dumps.iterdir()))}.toml"
    path.write_text(text)
    args = (str(path),) if as_argument else ()
    return script_runner.run(learner.file(SCRIPT), *args, dump_text=None if as_argument else text, cluster=True)


def expect_crosscheck(run, missing, version, detail):
    __tracebackhide__ = True
    given = f"Given a version-{version} dump missing {listed(sorted(missing)) or 'nothing'}"
    expected = {f"MISSING={handler}" for handler in missing}
    expect_verdict(run.result, SCRIPT, given, expected, prefix="MISSING", detail=detail)


@pytest.mark.parametrize("version", [2, 3])
def test_ok_when_every_handler_is_loaded(script_runner, learner, dumps, required, version):
    run = run_on(script_runner, learner, dumps, required | {"runc"}, version)
    expect_crosscheck(run, set(), version, {"required": sorted(required)})


@pytest.mark.parametrize("version", [2, 3])
def test_names_each_missing_handler(script_runner, learner, dumps, required, lab_random, version):
    candidates = sorted(required - {"runc"})
    missing = set(lab_random.sample(candidates, lab_random.randint(1, len(candidates))))
    run = run_on(script_runner, learner, dumps, (required - missing) | {"runc"}, version)
    expect_crosscheck(
        run, missing, version, {"required": sorted(required), "missing": sorted(missing), **lab_random.detail}
    )


def test_reads_containerd_config_dump_without_an_argument(script_runner, learner, dumps, required, lab_random):
    candidates = sorted(required - {"runc"})
    missing = {lab_random.choice(candidates)}
    version = lab_random.choice([2, 3])
    run = run_on(script_runner, learner, dumps, (required - missing) | {"runc"}, version, as_argument=False)
    expect_crosscheck(
        run, missing, version, {"required": sorted(required), "missing": sorted(missing), **lab_random.detail}
    )
    expect(
        run.asked_for_config_dump(),
        f"With no argument, {SCRIPT} should read `containerd config dump`; it never ran it.",
    )
