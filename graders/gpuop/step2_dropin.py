"""Step 2: the drop-in the toolkit drops off."""

import pytest

from pytest_gpulab.containerd_toml import CRI_V2, cri_containerd, glob_matches, imports_of
from pytest_gpulab.feedback import StepFailed, expect, fail, shown
from pytest_gpulab.parsing import dig, load_toml

pytestmark = pytest.mark.step(2, "nvidia runtime drop-in", points=10)

NVIDIA_TABLE = f'[plugins."{CRI_V2}".containerd.runtimes.nvidia]'


def _main_config(lab_root):
    """The main file if it parses; step 1 grades it, so a broken one is not this step's failure."""
    try:
        return load_toml(lab_root / "etc/containerd/config.toml")
    except StepFailed:
        return None


def test_nvidia_dropin(lab_root):
    display = "etc/containerd/conf.d/99-nvidia.toml"
    dropin_path = lab_root / display
    dropin = load_toml(dropin_path, display)

    nvidia = dig(cri_containerd(dropin, display), "runtimes", "nvidia")
    expect(isinstance(nvidia, dict), f"{display} has no {NVIDIA_TABLE} table.", detail=dropin)
    runtime_type = nvidia.get("runtime_type")
    expect(runtime_type == "io.containerd.runc.v2", f'{display}: runtime_type should be "io.containerd.runc.v2", found {shown(runtime_type)}.', detail=dropin)
    binary = dig(nvidia, "options", "BinaryName")
    expect(
        binary == "/usr/bin/nvidia-container-runtime",
        f'{display}: options.BinaryName should be "/usr/bin/nvidia-container-runtime", found {shown(binary)}.',
        hint="The BinaryName is what makes this runtime a GPU runtime: the wrapper injects the devices before the container starts." if binary is None else None,
        detail=dropin,
    )
    systemd = dig(nvidia, "options", "SystemdCgroup")
    if isinstance(systemd, str):
        fail(f"{display}: SystemdCgroup is the string {shown(systemd)}, not a boolean.", hint="Write SystemdCgroup = true without quotes.", detail=dropin)
    expect(systemd is True, f"{display}: options.SystemdCgroup of the nvidia runtime should be true, found {shown(systemd)}.", detail=dropin)

    main = _main_config(lab_root)
    if main is None:
        return
    main_systemd = dig(main, "plugins", CRI_V2, "containerd", "runtimes", "runc", "options", "SystemdCgroup")
    if isinstance(main_systemd, bool):
        expect(
            main_systemd == systemd,
            f"The cgroup driver disagrees: SystemdCgroup is {shown(systemd)} here but {shown(main_systemd)} for runc in the main file.",
            hint="Both runtimes of one node must use the same cgroup driver.",
        )
    globs = imports_of(main)
    config_dir = lab_root / "etc/containerd"
    matched = [glob for glob in globs if dropin_path.resolve() in {p.resolve() for p in glob_matches(glob, config_dir)}]
    expect(
        matched,
        f"The main file's imports {shown(globs)} do not match {display}, so containerd would never read this drop-in.",
        detail={"imports": globs},
    )
