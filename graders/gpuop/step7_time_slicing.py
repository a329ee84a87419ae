"""Step 7: read the time-slicing configuration and compute slots and memory."""

import pytest

from pytest_gpulab.grading import (
    StepFailed,
    Words,
    dig,
    expect,
    expect_advertises,
    expect_advertises_none,
    expect_value,
    fail,
    parse_quantity_number,
    parse_yes_no,
    should_be,
    written_and_applied,
    yaml_in,
)

pytestmark = pytest.mark.step(7, "Time-slicing configuration and slot arithmetic", points=15)

CONFIG_MAP = "k8s/time-slicing.yaml"
SLOTS = "out/slots.txt"
SLICED_NODE = "lab-node-1"
EXPECTED_NUMBERS = {
    "PHYSICAL_GPUS": 4,
    "REPLICAS": 5,
    "ADVERTISED": 20,
    "VRAM_PER_GPU_GIB": 40,
    "VRAM_GUARANTEED_PER_SLOT_GIB": 0,
    "VRAM_SHARED_PER_GPU_GIB": 40,
}
HINTS: dict[tuple[str, float | None], str] = {
    (
        "VRAM_GUARANTEED_PER_SLOT_GIB",
        8,
    ): "Time-slicing divides time, not memory: no slot is guaranteed any VRAM, so it is 0."
}


def sharing_of(config_map):
    """data.any parsed: the device plugin's configuration, which the ConfigMap must hold as a string."""
    any_value = dig(config_map, "data", "any")
    if isinstance(any_value, (dict, list)):
        fail(
            "data.any is a YAML mapping, not a string.",
            hint="ConfigMap data values must be strings: write the configuration as a block scalar, any: |-",
        )
    expect(
        isinstance(any_value, str),
        should_be("data.any", Words("a string holding the time-slicing configuration"), any_value),
    )
    return yaml_in(any_value, "data.any")


def check_config_map(config_map):
    expect_value(dig(config_map, "metadata", "namespace"), "gpu-operator", "the ConfigMap's namespace")
    sharing = sharing_of(config_map)
    time_slicing = dig(sharing, "sharing", "timeSlicing")
    expect(
        dig(time_slicing, "renameByDefault") is not True,
        "sharing.timeSlicing.renameByDefault is true, so the device plugin would advertise nvidia.com/gpu.shared, not nvidia.com/gpu.",
    )
    expect_value(
        dig(time_slicing, "failRequestsGreaterThanOne"),
        True,
        "sharing.timeSlicing.failRequestsGreaterThanOne",
        detail=sharing,
    )
    resources = dig(time_slicing, "resources")
    if resources is None and dig(sharing, "resources") is not None:
        fail(
            "data.any has resources at the top level, where the device plugin does not look.",
            hint="Put the resources array under sharing.timeSlicing, beside failRequestsGreaterThanOne.",
            detail=sharing,
        )
    first = dig(resources, 0)
    expect(
        isinstance(first, dict),
        "data.any should have a resources array whose first item names nvidia.com/gpu.",
        detail=sharing,
    )
    expect_value(first.get("name"), "nvidia.com/gpu", "resources[0].name")
    expect_value(first.get("replicas"), 5, "resources[0].replicas")


def test_time_slicing_config(learner, live):
    written_and_applied(
        learner.file(CONFIG_MAP), live, "ConfigMap", "gpu-operator/time-slicing-config", check_config_map
    )


def test_node_advertises_slots(live, lab):
    others = [name for name in lab.environment.node_names if name != SLICED_NODE]
    expect_advertises(live, SLICED_NODE, "nvidia.com/gpu", "20", others=others)
    expect_advertises_none(live, others, "nvidia.com/gpu", "20")


def number_problem(key, written):
    found = parse_quantity_number(written)
    if found == EXPECTED_NUMBERS[key]:
        return None
    return StepFailed(should_be(key, Words(str(EXPECTED_NUMBERS[key])), written), hint=HINTS.get((key, found)))


def test_slot_arithmetic(learner):
    values = learner.file(SLOTS).key_values(*EXPECTED_NUMBERS, "ISOLATION")
    problems = [problem for key in EXPECTED_NUMBERS if (problem := number_problem(key, values[key]))]
    isolation = values["ISOLATION"].strip().lower()
    if not (isolation == "none" or parse_yes_no(isolation) is False):
        problems.append(
            StepFailed(
                should_be(
                    "ISOLATION",
                    Words("none"),
                    values["ISOLATION"],
                    why="time-slicing gives no memory or fault isolation",
                )
            )
        )
    if problems:
        fail(
            f"{SLOTS}: " + " ".join(p.message for p in problems),
            hint=next((p.hint for p in problems if p.hint), None),
            detail=values,
        )
