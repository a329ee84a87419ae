"""Step 1: the accident node's main containerd configuration."""

import pytest

from pytest_gpulab.containerd_toml import CRI_V2, cri_containerd, find_key
from pytest_gpulab.feedback import expect, fail, shown
from pytest_gpulab.parsing import dig, load_toml

pytestmark = pytest.mark.step(1, "Main containerd configuration", points=10)

RUNC_TABLE = f'[plugins."{CRI_V2}".containerd.runtimes.runc]'


def test_main_containerd_config(lab_root):
    display = "etc/containerd/config.toml"
    config = load_toml(lab_root / display, display)

    version = config.get("version")
    if version == "2":
        fail(f"{display} has version = \"2\", a string.", hint="version is the integer 2: write version = 2 without quotes.")
    expect(type(version) is int and version == 2, f"{display} should have version = 2 at the top level, found {shown(version)}.", detail=config)

    imports = config.get("imports")
    if imports is None:
        stranded = find_key(config, "imports")
        if stranded:
            table = ".".join(f'"{p}"' if "." in p else p for p in stranded[0][0])
            fail(
                f"{display} has imports inside the [{table}] table, not at the top level.",
                hint="Every key after a [table] header belongs to that table: put imports above the first table header.",
                detail=config,
            )
        fail(f"{display} has no top-level imports array.", detail=config)
    expect(
        isinstance(imports, list),
        f"{display}: imports should be an array, found {shown(imports)}.",
        hint='Write it in brackets: imports = ["/etc/containerd/conf.d/*.toml"].',
    )
    expect(
        any(isinstance(entry, str) and entry.endswith("conf.d/*.toml") for entry in imports),
        f"{display}: one entry of imports should end with conf.d/*.toml, found {shown(imports)}.",
        detail=config,
    )

    containerd = cri_containerd(config, display)
    default = containerd.get("default_runtime_name")
    expect(default == "runc", f'{display}: default_runtime_name under [plugins."{CRI_V2}".containerd] should be "runc", found {shown(default)}.', detail=config)

    runc = dig(containerd, "runtimes", "runc")
    expect(isinstance(runc, dict), f"{display} has no {RUNC_TABLE} table.", detail=config)
    runtime_type = runc.get("runtime_type")
    expect(runtime_type == "io.containerd.runc.v2", f'{display}: runtime_type in {RUNC_TABLE} should be "io.containerd.runc.v2", found {shown(runtime_type)}.', detail=config)

    systemd = dig(runc, "options", "SystemdCgroup")
    if isinstance(systemd, str):
        fail(
            f'{display}: SystemdCgroup is the string {shown(systemd)}, not a boolean.',
            hint="Write SystemdCgroup = true without quotes; a quoted value is a string and containerd rejects it.",
            detail=config,
        )
    expect(systemd is True, f"{display}: options.SystemdCgroup of the runc runtime should be true, found {shown(systemd)}.", detail=config)
