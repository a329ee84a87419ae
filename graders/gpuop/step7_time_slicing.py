"""Step 7: read the time-slicing configuration and compute slots and memory."""

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, fail, k8s, should_be

pytestmark = pytest.mark.step(7, "Time-slicing configuration and slot arithmetic", points=15)

CONFIG_MAP = "k8s/time-slicing.yaml"
SLOTS = "out/slots.txt"
SLICED_NODE = "lab-node-1"
VRAM_HINT = "Time-slicing divides time, not memory: no slot is guaranteed any VRAM, so it is 0."


def amount(expected, hints=None):
    """A number, with or without its unit (40, 40GiB, 40 GiB); ``hints`` by the wrong number a known mistake writes."""
    return answers.Answer(
        Words(str(expected)),
        lambda written: answers.parse_quantity_number(written) == expected,
        hint=lambda written: (hints or {}).get(answers.parse_quantity_number(written)),
    )


ANSWERS = {
    "PHYSICAL_GPUS": amount(4),
    "REPLICAS": amount(5),
    "ADVERTISED": amount(20),
    "VRAM_PER_GPU_GIB": amount(40),
    "VRAM_GUARANTEED_PER_SLOT_GIB": amount(0, hints={8: VRAM_HINT}),
    "VRAM_SHARED_PER_GPU_GIB": amount(40),
    "ISOLATION": answers.word("none", "no", "n", "false", why="time-slicing gives no memory or fault isolation"),
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
    return k8s.yaml_in(any_value, "data.any")


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
        hint=k8s.misplaced_key(sharing, "sharing", "timeSlicing", "failRequestsGreaterThanOne"),
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
    k8s.written_and_applied(
        learner.file(CONFIG_MAP), live, "ConfigMap", "gpu-operator/time-slicing-config", check_config_map
    )


def test_node_advertises_slots(live, lab):
    others = [name for name in lab.environment.node_names if name != SLICED_NODE]
    k8s.expect_advertises(live, SLICED_NODE, "nvidia.com/gpu", "20", others=others)
    k8s.expect_advertises_none(live, others, "nvidia.com/gpu", "20")


def test_slot_arithmetic(learner):
    answers.expect_answers(learner.file(SLOTS), ANSWERS)
