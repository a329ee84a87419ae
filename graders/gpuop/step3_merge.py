"""Step 3: judge whether the two files collide over the same table."""

import pytest

from pytest_gpulab.containerd_toml import CRI_V2, RUNTIMES_TABLE_V2, defined_runtimes, parse_key_path
from pytest_gpulab.feedback import StepFailed, expect, fail, shown
from pytest_gpulab.parsing import load_toml, parse_yes_no, read_key_values, split_list

pytestmark = pytest.mark.step(3, "Merge judgement", points=10)

KEYS = ("MAIN_RUNTIMES", "DROPIN_RUNTIMES", "CONFLICT", "CONFLICT_TABLE", "LOADED_RUNTIMES")
CONFLICT_PATH = ("plugins", CRI_V2, "containerd", "runtimes")


def _runtimes_in(lab_root, relative):
    """Runtimes a learner file defines, or None when the file does not parse (its own step says so)."""
    try:
        return defined_runtimes(load_toml(lab_root / relative))
    except StepFailed:
        return None


def expected_judgement(lab_root):
    """What the learner's own two files give; the lab's values where a file is broken or empty."""
    main = _runtimes_in(lab_root, "etc/containerd/config.toml") or {"runc"}
    dropin = _runtimes_in(lab_root, "etc/containerd/conf.d/99-nvidia.toml") or {"nvidia"}
    return main, dropin


def test_merge_judgement(lab_root):
    display = "out/merge.txt"
    values = read_key_values(lab_root / display, display, required=KEYS)
    main, dropin = expected_judgement(lab_root)
    detail = {"written": values, "computed": {"MAIN_RUNTIMES": sorted(main), "DROPIN_RUNTIMES": sorted(dropin)}}

    found_main = split_list(values["MAIN_RUNTIMES"])
    expect(found_main == main, f"MAIN_RUNTIMES should be {','.join(sorted(main))} (what the main file defines), found {shown(values['MAIN_RUNTIMES'])}.", detail=detail)
    found_dropin = split_list(values["DROPIN_RUNTIMES"])
    expect(found_dropin == dropin, f"DROPIN_RUNTIMES should be {','.join(sorted(dropin))} (what the drop-in defines), found {shown(values['DROPIN_RUNTIMES'])}.", detail=detail)

    conflict = parse_yes_no(values["CONFLICT"])
    expect(conflict is not None, f"CONFLICT should be yes or no, found {shown(values['CONFLICT'])}.")
    expect(conflict is True, "CONFLICT should be yes: both files define the same runtimes table.", detail=detail)

    table = values["CONFLICT_TABLE"]
    # A value read from KEY="..." lost its outer quotes: "plugins"."io..." comes back as plugins"."io...".
    path = parse_key_path(table) or parse_key_path(table.replace('\\"', '"')) or parse_key_path(f'"{table}"')
    if path == tuple("plugins.io.containerd.grpc.v1.cri.containerd.runtimes".split(".")):
        fail(
            f"CONFLICT_TABLE is {shown(table)}: without quotes that is a different table path.",
            hint=f'Quote the plugin name as TOML does: {RUNTIMES_TABLE_V2}.',
        )
    expect(path == CONFLICT_PATH, f"CONFLICT_TABLE should be {RUNTIMES_TABLE_V2}, found {shown(table)}.")

    loaded = split_list(values["LOADED_RUNTIMES"])
    if loaded >= {"runc", "nvidia"}:
        fail(
            f"LOADED_RUNTIMES is {shown(values['LOADED_RUNTIMES'])}: that is what the files promise, not what was loaded.",
            hint="This line is observed, not computed: on the day of the accident containerd config dump showed only runc.",
        )
    expect(loaded == {"runc"}, f"LOADED_RUNTIMES should be runc (observed with containerd config dump), found {shown(values['LOADED_RUNTIMES'])}.")
