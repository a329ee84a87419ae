"""Step 6: rc-crosscheck.sh, matching the handlers the cluster asks for against a loaded configuration.

The grader reads every live RuntimeClass's handler, generates dumps shaped like real `containerd
config dump` output (containerd 1.7 for version 2, 2.x for version 3) and runs the script on them.
The known hard cases always run: a missing handler whose name begins another loaded one's
(`nvidia` beside `nvidia-cdi`), one loaded only as near-misses (in upper case, after another word, with a
space after it), a version-3 dump (which holds both plugin names, its runtimes under
io.containerd.cri.v1.runtime alone) missing one, every handler but runc missing at once. A random subset missing adds to them (seeded: the detail says how to replay it), with once
no argument, the fake containerd serving the dump; and the script must fail closed when the API
server answers 503 or not at all, and meet the rest of its declared contract (``CHECKER``). The runs start side by side.
"""

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, StepFailed, containerd, dig, expect, k8s, listed, scripts

pytestmark = pytest.mark.step(6, "rc-crosscheck.sh cross-checks the cluster and the dump", points=20, needs=1)

SCRIPT = "bin/rc-crosscheck.sh"
RUNTIMECLASSES = "k8s/runtimeclasses.yaml"
CHECKER = Checker(SCRIPT, args=("[DUMP]",), reads_cluster=True, reads_containerd=True, file_args=(0,))


@pytest.fixture(scope="module")
def known(required, learner, lab_cluster):
    """What each check's detail holds: the handlers the cluster asks for, its classes, and the handlers the
    learner's file names."""
    classes = [
        {"metadata": {"name": dig(rc, "metadata", "name")}, "handler": rc.get("handler")}
        for rc in lab_cluster.live_or_fail().list("RuntimeClass")
    ]
    try:
        written = {
            obj.get("handler") for obj in learner.file(RUNTIMECLASSES).objects() if obj.get("kind") == "RuntimeClass"
        }
    except StepFailed:  # step 1 grades the file
        written = set()
    return {
        "required": sorted(required),
        "written": sorted(h for h in written if isinstance(h, str)),
        "classes": classes,
    }


@pytest.fixture(scope="module")
def required(lab_cluster):
    return k8s.required_handlers(lab_cluster.live_or_fail(), made_by="step 1")


def prefix_case(required):
    """Each handler whose name begins another's, missing; the other loaded, with a decoy that begins
    with each missing name too (so the case stands even where no two names share a start)."""
    candidates = sorted(required - {"runc"})
    left_out = {name for name in candidates if any(o != name and o.startswith(name) for o in required)}
    left_out = left_out or set(candidates[:1])
    return left_out, {f"{name}-legacy" for name in left_out}


@pytest.fixture(scope="module")
def cases(required, step_random):
    """Each case: (missing handlers, dump version, loaded decoys).
    The hard cases are fixed; the random ones are drawn once in this order (``--lab-seed`` replays them)."""
    candidates = sorted(required - {"runc"})
    some = [set(step_random.sample(candidates, step_random.randint(1, len(candidates)))) for _ in (2, 3)]
    left_out, decoys = prefix_case(required)
    near = candidates[0]
    return {
        "near-misses": ({near}, 2, near_misses(near)),
        "all-2": (set(), 2, set()), "all-3": (set(), 3, set()),
        "prefix": (left_out, 3, decoys), "none-loaded": (set(candidates), 2, set()),
        "both-names": ({candidates[-1]}, 3, set()),
        "some-2": (some[0], 2, set()), "some-3": (some[1], 3, set()),
        "no-argument": ({step_random.choice(candidates)}, step_random.choice([2, 3]), set()),
    }  # fmt: skip


def near_misses(name):
    """Runtimes that are not ``name`` though a loose comparison takes them for it: in another case, with a
    word before it, and with a space after it (a quoted key). containerd compares names exactly."""
    return {name.upper(), f"legacy-{name}", f"{name} "}


def dump_of(required, case):
    left_out, version, decoys = case
    return containerd.generate_dump((required - left_out) | {"runc"} | decoys, version)


@pytest.fixture(scope="module")
def crosscheck(script_runner, learner, required, cases, tmp_path_factory):
    """The script's run on each case's dump, all started side by side: a path argument, or none
    (the fake containerd serves the dump); and the full dump on an API server that fails."""
    dumps, runs = tmp_path_factory.mktemp("dumps"), script_runner.runs_of(learner.file(SCRIPT))
    planned = {}
    for name, case in cases.items():
        text = dump_of(required, case)
        (path := dumps / f"{name}-v{case[1]}.toml").write_text(text)
        planned[name] = (
            scripts.Run(cluster=True, dump_text=text) if name == "no-argument" else scripts.Run(str(path), cluster=True)
        )
    planned |= {fault: scripts.Run(planned["some-3"].args[0], cluster=True, api=fault) for fault in scripts.FAILING_API}
    planned["no-containerd"] = scripts.Run(cluster=True, containerd=False)
    runs.ahead(*planned.values())
    return Crosscheck(runs, planned)


@dataclass(frozen=True)
class Crosscheck:
    """The script's planned runs by case name: ``crosscheck("prefix")`` is that case's run."""

    runs: Any
    planned: dict[str, scripts.Run]

    def __call__(self, name):
        return self.runs.run(*self.planned[name].args, **self.planned[name].options)


@pytest.fixture(scope="module")
def checker_cases(crosscheck, cases, required, known):
    """A version-3 dump missing some handlers, and one that loads them all."""
    missing, names = cases["some-3"][0], k8s.names_for_handlers(known["classes"])
    return Cases(
        crosscheck.runs,
        Case(f"Given a version-3 dump missing {listed(sorted(missing))}", crosscheck.planned["some-3"].args,
             expected=frozenset(f"MISSING={handler}" for handler in missing), hint=names),
        Case("Given a version-3 dump with every handler loaded", crosscheck.planned["all-3"].args, hint=names),
        near_misses=near_miss_case(crosscheck, cases),
    )  # fmt: skip


def near_miss_case(crosscheck, cases):
    left_out, _, decoys = cases["near-misses"]
    names = "its name" if len(left_out) == 1 else "their names"
    given = f"Given a dump missing {listed(sorted(left_out))} but loading near misses of {names}"
    expected = frozenset(f"MISSING={handler}" for handler in left_out)
    hint = (
        f"The dump loads {listed(sorted(repr(d) for d in decoys))}, near misses of those names: a handler is loaded "
        "when a runtime of exactly its name is. Compare whole names, in their case, as written."
    )
    took = lambda printed: hint if expected - printed else None  # noqa: E731 - it took a near miss for the handler
    return Case(given, crosscheck.planned["near-misses"].args, expected=expected, hint=took)


def expect_crosscheck(run, case, detail, given=None, argument=True, hint=None):
    __tracebackhide__ = True
    missing, version = case[0], case[1]
    expect(
        not argument or not run.asked_for_config_dump(),
        f"Given a dump file as its argument, {SCRIPT} ran `containerd config dump` instead of reading the file.",
        hint="Read the file named by the first argument when there is one; only without it ask containerd.",
    )
    given = given or f"Given a version-{version} dump missing {listed(sorted(missing)) or 'no handler'}"
    expected = {f"MISSING={handler}" for handler in missing}
    required = sorted(detail.get("required") or [])
    names = k8s.names_for_handlers(detail.get("classes") or [])
    scripts.expect_verdict(
        run.result, SCRIPT, given, expected, prefix="MISSING", detail=detail,
        hint=lambda printed: (hint(printed) if hint else None) or names(printed)
        or cut_at_a_dash(set(required) - missing, printed) or blind_to(version, set(required) - {"runc"} - missing, printed)
        or from_the_files(required, detail.get("written") or [], expected, printed),
    )  # fmt: skip


def cut_at_a_dash(loaded, printed):
    """The hint for a script that reports a loaded handler with a '-' in its name missing, while the part before the
    '-' is loaded: it read the dump's names cut at the '-' (a pattern of letters and digits leaves it out)."""
    cut = sorted(h for h in loaded if "-" in h and f"MISSING={h}" in printed and h.split("-")[0] in loaded)
    if not cut:
        return None
    return (
        f"The dump loads {listed(cut)}, yet it reports {'it' if len(cut) == 1 else 'them'} missing: it reads the "
        "runtime names cut at the '-' (a pattern such as [A-Za-z0-9_]+ leaves it out). Read whole names."
    )


def from_the_files(required, written, expected, printed):
    """The hint for a script that reads handlers from the learner's manifests: it reported every missing handler
    k8s/runtimeclasses.yaml names and none other, and left out those the cluster asks for and the file does not
    name (only then is that the cause)."""
    left_out = {line.partition("=")[2] for line in expected - printed}
    if not left_out or left_out & set(written) or printed != {f"MISSING={h}" for h in written} & expected:
        return None
    return (
        f"It left out {listed(sorted(left_out))}, which the cluster's RuntimeClasses ask for but {RUNTIMECLASSES} "
        f"does not name: read every handler from the cluster with kubectl ({listed(required)}), not from the files."
    )


def blind_to(version, loaded, printed):
    """The hint for a script that finds none of the runtimes a dump loads: it reads the other version's layout."""
    if not loaded or not {f"MISSING={handler}" for handler in loaded} <= printed:
        return None
    if version == 2:
        return (
            f"It found no runtime in this version-2 dump, which loads {listed(sorted(loaded))}: version 2 keeps them "
            f'under plugins."{containerd.CRI_V2}".containerd.runtimes. Read the runtimes of both layouts.'
        )
    return (
        f"It found no runtime in this version-3 dump, which loads {listed(sorted(loaded))}: containerd 2.x writes them "
        f"under plugins.'{containerd.CRI_V3_RUNTIME}'.containerd.runtimes, its table names in single quotes. Read the dump as "
        "TOML (python3's tomllib), or match both layouts and both quotings."
    )


@pytest.mark.parametrize("version", [2, 3])
def test_ok_when_every_handler_is_loaded(crosscheck, cases, required, version, known):
    expect_crosscheck(crosscheck(f"all-{version}"), cases[f"all-{version}"], known)


def test_a_name_that_begins_another_is_not_found_in_it(crosscheck, cases, required, known):
    left_out, _, decoys = cases["prefix"]
    given = (
        f"Given a dump missing {listed(sorted(left_out))} but loading {listed(sorted(decoys | (required - left_out)))}"
    )
    missing = {f"MISSING={handler}" for handler in left_out}
    hint = "A handler is loaded when a runtime of exactly its name is: compare whole names, not a part of one."
    expect_crosscheck(
        crosscheck("prefix"), cases["prefix"], known, given, hint=lambda printed: hint if missing - printed else None
    )


def test_reads_the_runtimes_of_a_dump_with_both_plugin_names(crosscheck, cases, required, known):
    left_out = cases["both-names"][0]
    given = (
        "Given a version-3 dump, which has both io.containerd.grpc.v1.cri (the CRI server's settings) and "
        f"io.containerd.cri.v1.runtime (the runtimes), missing {listed(sorted(left_out))}"
    )
    expect_crosscheck(crosscheck("both-names"), cases["both-names"], known, given)


def test_names_every_handler_when_only_runc_is_loaded(crosscheck, cases, required, known):
    given = f"Given a dump that loads runc alone, missing {listed(sorted(cases['none-loaded'][0]))}"
    expect_crosscheck(crosscheck("none-loaded"), cases["none-loaded"], known, given)


@pytest.mark.parametrize("version", [2, 3])
def test_names_each_missing_handler(crosscheck, required, cases, step_random, version, known):
    case = cases[f"some-{version}"]
    detail = {**known, "missing": sorted(case[0]), **step_random.detail}
    expect_crosscheck(crosscheck(f"some-{version}"), case, detail)


def test_reads_containerd_config_dump_without_an_argument(crosscheck, required, cases, step_random, known):
    case = cases["no-argument"]
    run = crosscheck("no-argument")
    detail = {**known, "missing": sorted(case[0]), **step_random.detail}
    given = (
        f"Run with no argument, containerd loading a version-{case[1]} configuration missing {listed(sorted(case[0]))}"
    )
    expect(
        run.asked_for_config_dump(),
        f"With no argument, {SCRIPT} should read `containerd config dump`; it never ran it{scripts.said(run.result)}.",
    )
    expect_crosscheck(run, case, detail, given, argument=False)
