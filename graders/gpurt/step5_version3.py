"""Step 5: the same configuration in containerd 2.x's version 3, under the renamed plugin."""

import pytest

from pytest_gpulab.grading import Words, containerd, expect, expect_value, should_be, shown

pytestmark = pytest.mark.step(5, "The version 3 configuration", points=10)

V3 = "etc/config-v3.toml"
DROPIN = "etc/conf.d/99-nvidia.toml"
NVIDIA = containerd.table_name(("plugins", containerd.CRI_V3_RUNTIME, "containerd", "runtimes", "nvidia"))


@pytest.fixture(scope="module")
def config(learner):
    return learner.file(V3).toml()


def test_version_3(config):
    expect_value(containerd.top_level(config, "version", V3), 3, f"{V3}: version at the top level")


def test_runtimes_under_the_renamed_plugin(config):
    expect_value(
        containerd.cri_containerd(config, V3, containerd.CRI_V3_RUNTIME).get("default_runtime_name"),
        "runc",
        f'{V3}: default_runtime_name under [plugins."{containerd.CRI_V3_RUNTIME}".containerd]',
    )
    containerd.runtime_table(config, V3, "runc", containerd.CRI_V3_RUNTIME)
    binary = containerd.runtime_option(
        containerd.runtime_table(config, V3, "nvidia", containerd.CRI_V3_RUNTIME), "BinaryName", V3, NVIDIA
    )
    expect(
        isinstance(binary, str) and binary,
        should_be(f"{V3}: options.BinaryName of the nvidia runtime", Words("the nvidia runtime's path"), binary),
    )


def test_plugin_names_match_the_version(config):
    containerd.expect_plugins_match_version(config, V3, read_as=3)


def test_imports_the_dropin(learner, config):
    containerd.top_level(config, "imports", V3)
    expect(
        not isinstance(config.get("imports"), str),
        f"{V3}: imports is the string {shown(config.get('imports'))}; containerd reads imports as a list of globs and "
        "refuses to start on a string.",
        hint='Write it as a list, even of one glob: imports = ["/etc/containerd/conf.d/*.toml"].',
    )
    globs = containerd.imports_of(config)
    expect(
        learner.catches(globs, DROPIN, config="etc"),
        f"{V3}'s imports {shown(globs)} should catch {DROPIN} this time.",
    )
