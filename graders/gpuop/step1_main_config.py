"""Step 1: the accident node's main containerd configuration."""

import pytest

from pytest_gpulab.grading import Words, containerd, expect, expect_value, should_be

pytestmark = pytest.mark.step(1, "Main containerd configuration", points=10)

CONFIG = "etc/containerd/config.toml"
RUNC = f'plugins."{containerd.CRI_V2}".containerd.runtimes.runc'


@pytest.fixture(scope="module")
def config(learner):
    return learner.file(CONFIG).toml()


def test_version(config):
    version = containerd.top_level(config, "version", CONFIG)
    expect_value(
        version,
        2,
        f"{CONFIG}: version at the top level",
        hint="version is the integer 2: write version = 2 without quotes." if isinstance(version, str) else None,
        detail=config,
    )


def test_imports(config):
    imports = containerd.top_level(config, "imports", CONFIG)
    expect(
        isinstance(imports, list),
        should_be(f"{CONFIG}: imports", Words("a top-level array"), imports),
        hint='Write it in brackets: imports = ["/etc/containerd/conf.d/*.toml"].',
        detail=config,
    )
    expect(
        any(isinstance(entry, str) and entry.endswith("conf.d/*.toml") for entry in imports),
        should_be(f"{CONFIG}: imports", Words("an array with one entry ending conf.d/*.toml"), imports),
        detail=config,
    )


def test_plugin_names_match_the_version(config):
    containerd.expect_plugins_match_version(config, CONFIG, read_as=2)


def test_default_runtime(config):
    default = containerd.cri_containerd(config, CONFIG).get("default_runtime_name")
    expect_value(
        default,
        "runc",
        f'{CONFIG}: default_runtime_name under [plugins."{containerd.CRI_V2}".containerd]',
        hint=containerd.misplaced_table(config, "plugins", containerd.CRI_V2, "containerd", "default_runtime_name"),
        detail=config,
    )


def test_runc_runtime(config):
    runc = containerd.runtime_table(config, CONFIG, "runc")
    expect_value(
        containerd.runtime_key(runc, "runtime_type", CONFIG, RUNC),
        "io.containerd.runc.v2",
        f"{CONFIG}: runtime_type in [{RUNC}]",
        detail=config,
    )
    systemd = containerd.runtime_option(runc, "SystemdCgroup", CONFIG, RUNC)
    expect_value(
        systemd,
        True,
        f"{CONFIG}: options.SystemdCgroup of the runc runtime",
        hint="Write SystemdCgroup = true without quotes; a quoted value is a string and containerd rejects it."
        if isinstance(systemd, str)
        else None,
        detail=config,
    )
