"""The fake containerd: stand-in script, launcher, shipped dumps, generate_dump."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from pytest_gpulab.sandbox.containerd import (
    FakeContainerd,
    available_dumps,
    dump_path,
    generate_dump,
    shim_path,
    strip_global_flags,
)

V2_CRI = "io.containerd.grpc.v1.cri"
V3_RUNTIME = "io.containerd.cri.v1.runtime"

SHIPPED = {
    # name: (version line, runtimes it holds)
    "v2-runc-nvidia": (2, {"runc", "nvidia"}),
    "v2-runc-only": (2, {"runc"}),
    "v3-runc-nvidia": (3, {"runc", "nvidia"}),
    "v3-runc-only": (3, {"runc"}),
    "v2-partial-nvidia": (None, {"runc", "nvidia"}),
    "v2-partial-runc": (None, {"runc"}),
    # The accident: the drop-in is imported, yet only runc was loaded.
    "v2-accident-imported-not-loaded": (2, {"runc"}),
    # The nvidia binary registered under another handler name: no runtime named nvidia is loaded.
    "v2-runc-gpu-handler": (2, {"runc", "gpu"}),
}


def cri_containerd(data: dict) -> dict:
    """The table holding default_runtime_name and runtimes, by layout."""
    plugin = V3_RUNTIME if data.get("version") == 3 else V2_CRI
    return data["plugins"][plugin]["containerd"]


def runtimes(data: dict) -> dict:
    return cri_containerd(data)["runtimes"]


@pytest.fixture
def fake(tmp_path: Path) -> FakeContainerd:
    return FakeContainerd(tmp_path / "fake")


def run(fake: FakeContainerd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(fake.executable), *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )


# -- shipped dumps -----------------------------------------------------------


def test_shipped_dump_names():
    assert available_dumps() == sorted(SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_dump_parses_and_holds_its_runtimes(name):
    version, expected = SHIPPED[name]
    text = dump_path(name).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert data.get("version") == version
    found = runtimes(data)
    assert set(found) == expected
    for _handler, table in found.items():
        assert table["runtime_type"] == "io.containerd.runc.v2"
        assert table["options"]["SystemdCgroup"] is True
    if "nvidia" in expected:
        assert found["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
        assert "containerd.runtimes.nvidia" in text  # what the lab's check greps for
    elif name == "v2-runc-gpu-handler":
        assert found["gpu"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
        assert "containerd.runtimes.nvidia" not in text
    elif name.startswith("v2-accident"):
        assert tomllib.loads(text)["imports"] == ["/etc/containerd/conf.d/99-nvidia.toml"]
        assert "containerd.runtimes.nvidia" not in text
    else:
        assert "nvidia" not in text.lower()


@pytest.mark.parametrize("name", [n for n, (v, _) in SHIPPED.items() if v is not None])
def test_full_dumps_look_like_containerd(name):
    data = tomllib.loads(dump_path(name).read_text(encoding="utf-8"))
    assert data["root"] == "/var/lib/containerd"
    assert data["state"] == "/run/containerd"
    assert data["grpc"]["address"] == "/run/containerd/containerd.sock"
    assert cri_containerd(data)["default_runtime_name"] == "runc"
    cri = data["plugins"][V2_CRI]
    if data["version"] == 2:
        assert cri["sandbox_image"].startswith("registry.k8s.io/pause:")
        assert V3_RUNTIME not in data["plugins"]
    else:
        # version 3: the grpc CRI plugin keeps only server settings
        assert "containerd" not in cri
        assert "default_runtime_name" not in cri
        assert cri["stream_server_address"] == "127.0.0.1"
        images = data["plugins"]["io.containerd.cri.v1.images"]
        assert images["pinned_images"]["sandbox"].startswith("registry.k8s.io/pause:")


# -- the stand-in script -----------------------------------------------------


def test_launcher_layout(fake, tmp_path):
    launcher = fake.bin_dir / "containerd"
    assert launcher == fake.executable
    assert os.access(launcher, os.X_OK)
    assert launcher.read_text().startswith("#!/bin/sh\n")
    assert fake.state_dir.is_dir()
    assert shim_path().is_file()


def test_config_dump_prints_the_chosen_dump(fake):
    assert fake.serve_dump("v2-runc-nvidia") == fake.dump_file
    result = run(fake, "config", "dump")
    assert result.returncode == 0, result.stderr
    assert result.stdout == dump_path("v2-runc-nvidia").read_bytes()
    fake.serve_dump("v3-runc-only.toml")  # a file name works as well as a stem
    assert run(fake, "config", "dump").stdout == dump_path("v3-runc-only").read_bytes()


def test_serve_dump_rejects_unknown_names(fake):
    fake.serve_text("version = 2\n")
    for name in ["no-such-dump", "v2-runc-nvidai", "version = 2\n"]:
        with pytest.raises(KeyError) as info:
            fake.serve_dump(name)
        message = info.value.args[0]
        assert repr(name) in message
        for available in available_dumps():
            assert available in message
    # Nothing was served in its place.
    assert fake.dump_file.read_text() == "version = 2\n"


def test_serve_text_and_path(fake, tmp_path):
    assert fake.serve_text("version = 2\n# custom\n") == fake.dump_file
    assert run(fake, "config", "dump").stdout == b"version = 2\n# custom\n"
    # Text that happens to be a dump's name is served as text.
    fake.serve_text("v2-runc-nvidia")
    assert run(fake, "config", "dump").stdout == b"v2-runc-nvidia"
    other = tmp_path / "mine.toml"
    other.write_bytes(b"version = 3\n")
    assert fake.serve_path(other) == fake.dump_file
    assert run(fake, "config", "dump").stdout == b"version = 3\n"


def test_no_dump_chosen_fails(fake):
    result = run(fake, "config", "dump")
    assert result.returncode == 1
    assert result.stdout == b""
    assert b"no loaded configuration to dump" in result.stderr


@pytest.mark.parametrize("flag", [["--version"], ["-v"], ["version"], ["-l", "debug", "--version"]])
def test_version(fake, flag):
    result = run(fake, *flag)
    assert result.returncode == 0
    assert result.stdout.decode().startswith("containerd github.com/containerd/containerd/v2 v2.")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["config", "default"],
        ["config"],
        ["dump"],
        ["config", "migrate"],
        ["ctr", "version"],
        ["--help"],
        ["--config"],  # flag without its value
        ["-c", "x", "config"],
        ["/etc/containerd/config.toml"],
    ],
)
def test_other_commands_are_rejected(fake, argv):
    fake.serve_dump("v2-runc-nvidia")
    result = run(fake, *argv)
    assert result.returncode == 2
    assert result.stdout == b""
    message = result.stderr.decode()
    assert message.count("\n") == 1  # one line
    assert "config dump" in message
    assert "--version" in message
    assert not fake.asked_for_config_dump()


@pytest.mark.parametrize(
    "globals_",
    [
        ["--config", "/etc/containerd/config.toml"],
        ["-c", "/nonexistent/config.toml"],
        ["--config=/etc/containerd/config.toml"],
        ["-a", "/run/containerd/containerd.sock", "-l", "debug"],
        ["--address=/run/x.sock", "--log-level=info", "-c", "x"],
        ["--root", "/var/lib/containerd", "--state=/run/containerd"],
    ],
)
def test_global_flags_are_accepted_and_ignored(fake, globals_):
    fake.serve_dump("v2-runc-only")
    result = run(fake, *globals_, "config", "dump")
    assert result.returncode == 0, result.stderr
    assert result.stdout == dump_path("v2-runc-only").read_bytes()
    assert fake.calls() == [[*globals_, "config", "dump"]]
    assert fake.asked_for_config_dump()


def test_every_call_is_recorded(fake):
    fake.serve_dump("v2-runc-nvidia")
    run(fake)
    run(fake, "--version")
    run(fake, "config", "default")
    run(fake, "-c", "/x", "config", "dump")
    run(fake, "arg with space", "ünïcode")
    assert fake.calls() == [
        [],
        ["--version"],
        ["config", "default"],
        ["-c", "/x", "config", "dump"],
        ["arg with space", "ünïcode"],
    ]
    assert fake.asked_for_config_dump()
    fake.reset_calls()
    assert fake.calls() == []
    assert not fake.asked_for_config_dump()


def test_calls_skips_garbage_lines(fake):
    fake.calls_file.write_text('{"argv": ["config", "dump"]}\nnot json\n{"argv": 3}\n[]\n')
    assert fake.calls() == [["config", "dump"]]


def test_shim_and_library_agree_on_global_flags():
    loader = importlib.machinery.SourceFileLoader("gpulab_fake_shim", str(shim_path()))
    spec = importlib.util.spec_from_loader("gpulab_fake_shim", loader)
    assert spec is not None
    shim = importlib.util.module_from_spec(spec)
    loader.exec_module(shim)
    cases = [
        [],
        ["config", "dump"],
        ["-c", "x", "config", "dump"],
        ["--config=x", "-l", "debug", "config", "dump", "extra"],
        ["--config"],
        ["-a"],
        ["--version"],
        ["--bogus", "config", "dump"],
    ]
    for argv in cases:
        assert shim.strip_global_flags(list(argv)) == strip_global_flags(argv), argv


def test_launcher_from_bash_script_on_path(tmp_path):
    # Awkward characters in the directory check the launcher's quoting.
    fake = FakeContainerd(tmp_path / "we ird 'dir' $x")
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/bash\ncontainerd config dump | grep -q 'containerd.runtimes.nvidia' && exit 0\nexit 1\n")
    script.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake.bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.pop("GPULAB_FAKE_CONTAINERD_STATE", None)

    def check() -> int:
        return subprocess.run(
            [str(script)],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
        ).returncode

    for name, expected in [
        ("v2-runc-nvidia", 0),
        ("v2-runc-only", 1),
        ("v3-runc-nvidia", 0),
        ("v3-runc-only", 1),
        ("v2-partial-nvidia", 0),
        ("v2-partial-runc", 1),
    ]:
        fake.serve_dump(name)
        assert check() == expected, name
    assert fake.calls() == [["config", "dump"]] * 6
    assert fake.asked_for_config_dump()


def test_learner_cannot_redirect_the_state(tmp_path, fake):
    fake.serve_dump("v2-runc-nvidia")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, GPULAB_FAKE_CONTAINERD_STATE=str(elsewhere))
    result = subprocess.run([str(fake.executable), "config", "dump"], env=env, capture_output=True, timeout=20)
    assert result.returncode == 0
    assert fake.asked_for_config_dump()
    assert not (elsewhere / "calls.jsonl").exists()


# -- generate_dump -----------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3])
def test_generate_dump_holds_exactly_the_handlers(version):
    handlers = ["runc", "nvidia", "nvidia-cdi", "kata_qemu", "nvidia"]
    text = generate_dump(handlers, version=version)
    data = tomllib.loads(text)
    assert data["version"] == version
    found = runtimes(data)
    assert set(found) == {"runc", "nvidia", "nvidia-cdi", "kata_qemu"}
    assert cri_containerd(data)["default_runtime_name"] == "runc"
    assert found["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert found["nvidia-cdi"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime.cdi"
    assert found["runc"]["options"]["BinaryName"] == ""
    assert found["kata_qemu"]["options"]["BinaryName"] == ""
    for table in found.values():
        assert table["runtime_type"] == "io.containerd.runc.v2"
        assert table["options"]["SystemdCgroup"] is True
    if version == 3:
        assert "containerd" not in data["plugins"][V2_CRI]
    else:
        assert V3_RUNTIME not in data["plugins"]


@pytest.mark.parametrize("version", [2, 3])
def test_generate_dump_default_runtime_and_subset(version):
    data = tomllib.loads(generate_dump({"nvidia"}, version=version, default_runtime="nvidia"))
    assert set(runtimes(data)) == {"nvidia"}
    assert cri_containerd(data)["default_runtime_name"] == "nvidia"
    data = tomllib.loads(generate_dump([], version=version))
    assert runtimes(data) == {}


@pytest.mark.parametrize("version", [2, 3])
def test_generate_dump_quotes_odd_names(version):
    odd = ["nvidia.typo", "with space", "quote'd", 'dq"x', "back\\slash", "ünï"]
    text = generate_dump(["runc", *odd], version=version)
    data = tomllib.loads(text)
    assert set(runtimes(data)) == {"runc", *odd}
    plugin = V3_RUNTIME if version == 3 else V2_CRI
    q = "'" if version == 3 else '"'
    assert f"[plugins.{q}{plugin}{q}.containerd.runtimes.runc]" in text
    assert f"containerd.runtimes.{q}nvidia.typo{q}]" in text
    assert "containerd.runtimes.nvidia.typo]" not in text


def test_generate_dump_rejects_bad_version():
    with pytest.raises(ValueError, match="must be 2 or 3, not 1"):
        generate_dump(["runc"], version=1)
