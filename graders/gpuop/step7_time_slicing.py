"""Step 7: read the time-slicing configuration and compute slots and memory."""

import pytest
import yaml

from pytest_gpulab.feedback import expect, fail, shown
from pytest_gpulab.parsing import dig, find_object, load_yaml_documents, parse_quantity_number, parse_yes_no, read_key_values

pytestmark = pytest.mark.step(7, "Time-slicing configuration and slot arithmetic", points=15)

FILE = "k8s/time-slicing.yaml"
SLOTS = "out/slots.txt"
EXPECTED_NUMBERS = {
    "PHYSICAL_GPUS": 4, "REPLICAS": 5, "ADVERTISED": 20, "VRAM_PER_GPU_GIB": 40,
    "VRAM_GUARANTEED_PER_SLOT_GIB": 0, "VRAM_SHARED_PER_GPU_GIB": 40,
}


def check_config_map(config_map, where):
    expect(config_map is not None, f"{where}: no ConfigMap time-slicing-config.")
    namespace = dig(config_map, "metadata", "namespace")
    expect(namespace == "gpu-operator", f"{where}: the ConfigMap's namespace should be gpu-operator, found {shown(namespace)}.")
    any_value = dig(config_map, "data", "any")
    if isinstance(any_value, (dict, list)):
        fail(
            f"{where}: data.any is a YAML mapping, not a string.",
            hint="ConfigMap data values must be strings: write the configuration as a block scalar, any: |-",
        )
    expect(isinstance(any_value, str), f"{where}: data.any should be a string holding the time-slicing configuration, found {shown(any_value)}.")
    try:
        sharing = yaml.safe_load(any_value)
    except yaml.YAMLError as error:
        fail(f"{where}: data.any is not valid YAML inside: {' '.join(str(error).split())}")
    time_slicing = dig(sharing, "sharing", "timeSlicing")
    fail_greater = dig(time_slicing, "failRequestsGreaterThanOne")
    expect(fail_greater is True, f"{where}: sharing.timeSlicing.failRequestsGreaterThanOne should be true, found {shown(fail_greater)}.", detail=sharing)
    resources = dig(time_slicing, "resources")
    if resources is None and dig(sharing, "resources") is not None:
        fail(
            f"{where}: data.any has resources at the top level, where the device plugin does not look.",
            hint="Put the resources array under sharing.timeSlicing, beside failRequestsGreaterThanOne.",
            detail=sharing,
        )
    first = dig(resources, 0)
    expect(isinstance(first, dict), f"{where}: data.any should have a resources array whose first item names nvidia.com/gpu.", detail=sharing)
    expect(first.get("name") == "nvidia.com/gpu", f"{where}: resources[0].name should be nvidia.com/gpu, found {shown(first.get('name'))}.")
    replicas = first.get("replicas")
    expect(type(replicas) is int and replicas == 5, f"{where}: resources[0].replicas should be the number 5, found {shown(replicas)}.")


def test_time_slicing(lab_root, live):
    check_config_map(find_object(load_yaml_documents(lab_root / FILE, FILE), "ConfigMap", "time-slicing-config"), FILE)
    live_map = live.get("/api/v1/namespaces/gpu-operator/configmaps/time-slicing-config")
    expect(live_map, f"The ConfigMap gpu-operator/time-slicing-config is not in the cluster; apply {FILE}.")
    check_config_map(live_map, "In the cluster")

    node = live.get("/api/v1/nodes/lab-node-1")
    expect(node, "The node lab-node-1 is not in the cluster.")
    capacity, allocatable = dig(node, "status", "capacity", "nvidia.com/gpu"), dig(node, "status", "allocatable", "nvidia.com/gpu")
    expect(
        capacity == "20" and allocatable == "20",
        f'lab-node-1 should advertise nvidia.com/gpu "20" in capacity and allocatable, found capacity {shown(capacity)}, allocatable {shown(allocatable)}.',
        hint="Patch the status subresource: kubectl patch node lab-node-1 --subresource=status." if capacity is None else None,
    )

    values = read_key_values(lab_root / SLOTS, SLOTS, required=[*EXPECTED_NUMBERS, "ISOLATION"])
    for key, expected in EXPECTED_NUMBERS.items():
        found = parse_quantity_number(values[key])
        if key == "VRAM_GUARANTEED_PER_SLOT_GIB" and found == 8:
            fail(
                f"{SLOTS}: VRAM_GUARANTEED_PER_SLOT_GIB is 8.",
                hint="Time-slicing divides time, not memory: no slot is guaranteed any VRAM, so it is 0.",
            )
        expect(found == expected, f"{SLOTS}: {key} should be {expected}, found {shown(values[key])}.")
    isolation = values["ISOLATION"].strip().lower()
    expect(
        isolation == "none" or parse_yes_no(isolation) is False,
        f"{SLOTS}: ISOLATION should be none (time-slicing gives no memory or fault isolation), found {shown(values['ISOLATION'])}.",
    )
