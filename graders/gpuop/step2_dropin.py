"""Step 2: the drop-in the toolkit drops off."""

import pytest

from pytest_gpulab.grading import containerd, dig, expect, expect_value, listed, shown

pytestmark = pytest.mark.step(2, "nvidia runtime drop-in", points=10)

DROPIN = "etc/containerd/conf.d/99-nvidia.toml"
MAIN = "etc/containerd/config.toml"
NVIDIA = f'plugins."{containerd.CRI_V2}".containerd.runtimes.nvidia'
MERGE_HINT = "The drop-in declares one more runtime, nvidia, and nothing else: the rest stays the main file's."
BINARY_HINT = "The BinaryName is what makes this runtime a GPU runtime: the wrapper injects the devices before the container starts."


@pytest.fixture(scope="module")
def dropin(learner):
    return learner.file(DROPIN).toml()


@pytest.fixture(scope="module")
def nvidia(dropin):
    return containerd.runtime_table(dropin, DROPIN, "nvidia")


def test_nvidia_runtime(nvidia):
    runtime_type = containerd.runtime_key(nvidia, "runtime_type", DROPIN, NVIDIA)
    expect_value(runtime_type, "io.containerd.runc.v2", f"{DROPIN}: runtime_type", detail=nvidia)
    binary = containerd.runtime_option(nvidia, "BinaryName", DROPIN, NVIDIA)
    expect_value(
        binary,
        "/usr/bin/nvidia-container-runtime",
        f"{DROPIN}: options.BinaryName",
        hint=BINARY_HINT if binary is None else None,
        detail=nvidia,
    )
    systemd = containerd.runtime_option(nvidia, "SystemdCgroup", DROPIN, NVIDIA)
    expect_value(
        systemd,
        True,
        f"{DROPIN}: options.SystemdCgroup of the nvidia runtime",
        hint="Write SystemdCgroup = true without quotes." if isinstance(systemd, str) else None,
        detail=nvidia,
    )


def test_plugin_names_match_the_version(dropin):
    """A drop-in that states no version is read as its main file's: version 2, as the lab asks (step 1 grades that)."""
    containerd.expect_plugins_match_version(dropin, DROPIN, read_as=2, main=MAIN, imported=True)


def test_adds_only_the_nvidia_runtime(dropin, nvidia):
    """A drop-in merges over the main file: whatever else it sets replaces what the main file says."""
    others = sorted(containerd.defined_runtimes(dropin) - {"nvidia"})
    expect(
        not others,
        f"{DROPIN} also defines the runtime {listed(others)}, which replaces the main file's for the whole node.",
        hint=MERGE_HINT,
    )
    default = dig(dropin, "plugins", containerd.CRI_V2, "containerd", "default_runtime_name")
    expect(
        default is None,
        f"{DROPIN} sets default_runtime_name = {shown(default)}, which replaces the main file's runc for every Pod on the node.",
        hint=MERGE_HINT,
    )


def test_cgroup_driver_agrees(learner, nvidia):
    """The main file is step 1's: only a readable one is compared."""
    main = learner.file(MAIN).toml_or_none()
    main_systemd = dig(main, "plugins", containerd.CRI_V2, "containerd", "runtimes", "runc", "options", "SystemdCgroup")
    systemd = dig(nvidia, "options", "SystemdCgroup")
    if isinstance(main_systemd, bool) and isinstance(systemd, bool):
        expect(
            main_systemd == systemd,
            f"The cgroup driver disagrees: SystemdCgroup is {shown(systemd)} here but {shown(main_systemd)} for runc in {MAIN}.",
            hint="Both runtimes of one node must use the same cgroup driver.",
        )


def test_imported_by_the_main_file(learner):
    main = learner.file(MAIN).toml_or_none()
    if main is None:
        return  # step 1 grades the main file
    expect(learner.file(DROPIN).exists(), f"{DROPIN} does not exist; create it as the step asks.")
    globs = containerd.imports_of(main)
    matched = learner.catches(globs, DROPIN, config="etc/containerd")
    expect(
        matched,
        f"{MAIN}'s imports {shown(globs)} do not match {DROPIN}, so containerd would never read this drop-in.",
        detail={"imports": globs},
    )
