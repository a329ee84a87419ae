"""gpunode's near misses earn their place: each object changes the output of at least one reading of a checker its
comment names, the right one (the expected output) or one of the ways to read less than the whole object
(tests/near_miss_readings.py); and every such wrong reading is told apart from the right one by the near misses.

The lab state is the reference solution's, read from a real lab cluster; the near misses are added as the copy adds
them (times relative to now, cluster/copy.py's ``dated``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from grading import solve
from near_miss_readings import OPERATOR, readings

from pytest_gpulab.cluster.copy import dated
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover
from pytest_gpulab.labs.nearmisses import NearMiss, near_misses_in

LAB = "gpunode"


@pytest.fixture(scope="module")
def lab_state(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The solved lab's nodes, pools, and the operator's DaemonSets and Pods, each with its kind."""
    with KwokCluster.for_lab(LAB, name="tests-near-misses") as cluster:
        solve(LAB, cluster, tmp_path_factory.mktemp("root"))
        found = []
        for kind, args in (
            ("Node", ("nodes",)),
            ("MachineConfigPool", ("machineconfigpools",)),
            ("DaemonSet", ("daemonsets", "-n", OPERATOR)),
            ("Pod", ("pods", "-n", OPERATOR)),
        ):
            found += [{**item, "kind": kind} for item in cluster.get_json(*args)["items"]]
    return found


@pytest.fixture(scope="module")
def near() -> list[NearMiss]:
    return near_misses_in(discover().get(LAB).near_misses)


def changed_readings(state: list[dict], near: list[NearMiss], miss: NearMiss, now: datetime) -> list[str]:
    """The readings of ``miss``'s steps whose output with every near miss differs from that without ``miss``."""
    objects = [dated(item.obj, now) for item in near]
    without = [dated(item.obj, now) for item in near if item is not miss]
    return [
        f"step {step}: {name}"
        for step in miss.steps
        for name, reading in readings(now).get(step, {}).items()
        if reading(state + objects) != reading(state + without)
    ]


def test_each_near_miss_names_the_steps_it_serves(near):
    assert near, "gpunode declares near misses"
    unnamed = [f"{item.kind}/{item.name}" for item in near if not item.steps]
    assert not unnamed, f"a near miss's comment names no step (write 'Step N: ...' above it): {unnamed}"
    assert all(step in (4, 6, 7) for item in near for step in item.steps), [(i.name, i.steps) for i in near]


def test_each_near_miss_changes_a_reading_of_a_checker_it_names(lab_state, near):
    now = datetime.now(UTC)
    idle = [f"{item.kind}/{item.name}" for item in near if not changed_readings(lab_state, near, item, now)]
    assert not idle, f"these near misses change no reading of the checkers they name: {idle}"


def test_every_wrong_reading_is_told_apart_by_the_near_misses_not_by_the_lab_alone(lab_state, near):
    """On the lab's own state a wrong reading may agree with the right one (so the lab alone does not tell them
    apart); with the near misses added, none does."""
    now = datetime.now(UTC)
    objects = lab_state + [dated(item.obj, now) for item in near]
    for step, ways in readings(now).items():
        right = ways["right"](objects)
        assert right, f"step {step}: the right reading finds nothing on the near misses"
        alike = [
            name for name, way in ways.items() if name != "right" and "may add" not in name and way(objects) == right
        ]
        assert not alike, f"step {step}: the near misses do not tell these readings from the right one: {alike}"


def test_the_lab_lists_its_near_misses(capsys):
    from pytest_gpulab.cli import main

    assert main(["labs", LAB]) == 0
    shown = capsys.readouterr().out
    assert "near misses" in shown
    assert "DaemonSet nvidia-dcgm-exporter (step 4)" in shown
    assert "MachineConfigPool gpu (steps 6, 7)" in shown


def test_a_time_relative_to_the_copy_stays_relative():
    now = datetime(2030, 1, 1, 12, tzinfo=UTC)
    pool = {"status": {"conditions": [{"lastTransitionTime": "${now-2h}"}, {"lastTransitionTime": "${now-10m}"}]}}
    times = [c["lastTransitionTime"] for c in dated(pool, now)["status"]["conditions"]]
    assert times == ["2030-01-01T10:00:00Z", "2030-01-01T11:50:00Z"]
    assert dated({"note": "since ${now-2h} ago"}, now) == {"note": "since ${now-2h} ago"}  # only a whole value


def test_the_objects_file_is_the_labs(near):
    assert {Path(p).name for p in discover().get(LAB).near_misses} == {"objects.yaml"}
    assert len(near) == 11
