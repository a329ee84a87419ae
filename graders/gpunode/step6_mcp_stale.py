"""Step 6: mcp-stale.sh flags pools stuck updating for longer than a threshold, from their own timestamp.

The grader reads how long the pool worker has been Updating and runs the script with a threshold
below that age and one above it (random, seeded: the detail says how to replay them), and with
no argument (30 minutes); the rest of its contract (``CHECKER``: fails closed, only reads, uses its
argument, a second run) the plugin checks. The runs side by side.
"""

from datetime import UTC, datetime

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, blocked_unless, expect, k8s, scripts

pytestmark = pytest.mark.step(6, "mcp-stale.sh alerts on updates that never finish", points=10, needs=5)

SCRIPT = "bin/mcp-stale.sh"
CHECKER = Checker(SCRIPT, args=("[MINUTES]",), finding="STALE", reads_cluster=True)
DEFAULT_MINUTES = 30
MARGIN = 60  # minutes kept between a threshold and the pool's age, so the clock's drift never decides
HARD_CODED = ("2024-10-29", "1730192400")
AGE_HINT = "Compare the age of the Updating condition's lastTransitionTime with the threshold you were given."  # the reservation day, as a date or epoch seconds


def updating_since(pool):
    found = k8s.condition(pool, "Updating")
    if found.get("status") != "True":
        return None
    try:
        return datetime.fromisoformat(str(found.get("lastTransitionTime")).replace("Z", "+00:00"))
    except ValueError:
        return None


@pytest.fixture(scope="module")
def pools(lab_cluster):
    """Each pool's Updating-since time (None when it is not updating)."""
    live = lab_cluster.live_or_fail()
    found = {k8s.name_of(pool): updating_since(pool) for pool in live.list("MachineConfigPool")}
    blocked_unless(found.get("worker"), "an Updating status on the pool worker, which step 5 sets,")
    return found


def age_minutes(since):
    return int((datetime.now(UTC) - since).total_seconds() // 60)


def stale_at(pools, minutes):
    return {f"STALE={name}" for name, since in pools.items() if since and age_minutes(since) > minutes}


@pytest.fixture(scope="module")
def thresholds(pools, step_random):
    """A threshold below the pool's age and one above it, in minutes, drawn in this order."""
    age = age_minutes(pools["worker"])
    below = step_random.randint(max(1, age // 2), max(1, age - MARGIN))
    return {"below": below, "above": age + step_random.randint(MARGIN, 1_000_000)}


@pytest.fixture(scope="module")
def stale(script_runner, learner, thresholds):
    """The script's three runs, side by side: each threshold, and none (the default)."""
    runs = script_runner.runs_of(learner.file(SCRIPT))
    return runs.ahead(
        *(scripts.Run(str(minutes), cluster=True) for minutes in thresholds.values()), scripts.Run(cluster=True),
        *(scripts.Run(str(thresholds["below"]), cluster=True, api=fault) for fault in scripts.FAILING_API),
    )  # fmt: skip


@pytest.fixture(scope="module")
def near_view(near_miss_cluster, tmp_path_factory):
    """The copy with the lab's near misses: a pool gpu Updating, its conditions in another order, a pool canary
    Updating for two hours whose first condition is younger, and pools infra and degraded that are not updating."""
    with scripts.DoctoredView(near_miss_cluster.source, (), tmp_path_factory.mktemp("near")) as view:
        yield view


@pytest.fixture(scope="module")
def checker_cases(stale, lab, pools, thresholds, near_view, near_miss_cluster):
    """A threshold below the pool's age (STALE=worker) and one above it (OK); the near misses with the default."""
    age = age_minutes(pools["worker"])

    def case(name):
        given = f"With the threshold {thresholds[name]} minutes (the pool worker has been Updating for {age} minutes)"
        return Case(given, (str(thresholds[name]),), expected=frozenset(stale_at(pools, thresholds[name])))

    near = {k8s.name_of(pool): updating_since(pool) for pool in near_miss_cluster.list("MachineConfigPool")}
    given = (
        f"On the near-miss copy (gpulab labs gpunode lists its pools), with no threshold (the default, "
        f"{DEFAULT_MINUTES} minutes)"
    )
    expected = frozenset(stale_at(near, DEFAULT_MINUTES))
    nearby = Case(given, (), {"view": near_view}, expected, hint=scripts.near_miss_hint(lab.near_misses, expected))
    return Cases(stale, case("below"), case("above"), near_misses=nearby, changed=nearby)


def in_other_units(age, minutes, printed, expected):
    """The cause when the worker's verdict is the one its age in seconds (or in hours) would give."""
    worker = "STALE=worker"
    if worker in printed and worker not in expected and age * 60 > minutes:
        return (
            f"It flags a pool Updating for {age} minutes at a threshold of {minutes} minutes, as if the age were "
            "in seconds: divide the age in seconds by 60 before comparing it with the threshold in minutes."
        )
    if worker in expected and worker not in printed and age // 60 <= minutes:
        return (
            f"It passes a pool Updating for {age} minutes at a threshold of {minutes} minutes, as if the age were "
            "in hours: compare the age in minutes (seconds divided by 60) with the threshold."
        )
    return None


def run_with(stale, pools, minutes, detail, *args):
    __tracebackhide__ = True
    age = age_minutes(pools["worker"])
    given = f"With the threshold {minutes} minutes (the pool worker has been Updating for {age} minutes)"
    expected = stale_at(pools, minutes)
    scripts.expect_verdict(
        stale.run(*args, cluster=True).result, SCRIPT, given, expected, prefix="STALE",
        hint=lambda printed: in_other_units(age, minutes, printed, expected) or (
            AGE_HINT if printed ^ expected <= {f"STALE={name}" for name, since in pools.items() if since}
            and printed != expected else None),
        detail={"age_minutes": age, "threshold": minutes, **detail},
    )  # fmt: skip


def test_stale_below_its_age(stale, pools, thresholds, step_random):
    run_with(stale, pools, thresholds["below"], step_random.detail, str(thresholds["below"]))


def test_ok_above_its_age(stale, pools, thresholds, step_random):
    run_with(stale, pools, thresholds["above"], step_random.detail, str(thresholds["above"]))


def test_default_threshold_is_thirty_minutes(stale, pools):
    run_with(stale, pools, DEFAULT_MINUTES, {})


def test_computes_the_age(learner):
    code = learner.file(SCRIPT).code()
    written = [moment for moment in HARD_CODED if moment in code]
    expect(
        not written,
        f"{SCRIPT} hard-codes the reservation's date ({written[0] if written else ''}).",
        hint="Read the Updating condition's lastTransitionTime from the pool, and the current time from date.",
    )
