"""A real node's configuration, without starting one (tests/test_real_node.py starts one): each NodeOptions
choice reaches the file that carries it, and every path the node writes is below its own folder."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_gpulab import cli
from pytest_gpulab.node import NodeError, NodeOptions, RealNode
from pytest_gpulab.node.configs import INSIDE, NodePaths, cni_config, containerd_config, kubelet_config
from pytest_gpulab.node.leftovers import leftovers
from pytest_gpulab.node.lifecycle import _bridge_name

INSIDE_PATHS = NodePaths(INSIDE)


@pytest.mark.parametrize("restrict", [True, False])
def test_containerd_gets_the_oom_score_choice_and_keeps_its_state_in_the_node(restrict):
    text = containerd_config(INSIDE_PATHS, NodeOptions(restrict_oom_score_adj=restrict), Path("/b"), Path("/cni"))
    config = tomllib.loads(text)
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is restrict
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == "/b/runc"
    paths = [config["root"], config["state"], config["plugins"]["io.containerd.server.v1.grpc"]["address"],
             runtime["cni"]["conf_dir"], config["plugins"]["io.containerd.internal.v1.opt"]["path"]]  # fmt: skip
    assert all(path.startswith(f"{INSIDE}/") for path in paths), paths


@pytest.mark.parametrize(("option", "expected"), [(True, True), (False, False)])
def test_the_kubelet_gets_fail_cgroup_v1_as_told(option, expected):
    config = kubelet_config(INSIDE_PATHS, NodeOptions(fail_cgroup_v1=option), "/gpulab-node-a")
    assert config["failCgroupV1"] is expected
    assert config["cgroupRoot"] == "/gpulab-node-a"
    assert config["enableServer"] is False  # nothing reaches a Pod through the node
    assert config["containerRuntimeEndpoint"] == f"unix://{INSIDE}/containerd.sock"


def test_fail_cgroup_v1_follows_the_machine_when_not_told():
    v1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists()
    assert NodeOptions().fails_on_cgroup_v1() is (not v1)


def test_two_nodes_get_their_own_bridge_and_subnet():
    first, second = _bridge_name("real-1"), _bridge_name("real-2")
    assert first != second and len(first) <= 15 and len(second) <= 15  # Linux's limit on a device's name
    subnets = {cni_config(INSIDE_PATHS, NodeOptions(), bridge)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"]
               for bridge in (first, second)}  # fmt: skip
    assert len(subnets) == 2
    assert cni_config(INSIDE_PATHS, NodeOptions(pod_subnet="10.1.2.0/24"), first)["plugins"][0]["ipam"]["ranges"] == [
        [{"subnet": "10.1.2.0/24"}]
    ]


@pytest.mark.parametrize("name", ["Real", "real_1", "-real", "a" * 43, ""])
def test_a_node_name_the_cluster_would_refuse_is_refused_first(name, tmp_path):
    with pytest.raises(NodeError, match="is not a node name"):
        RealNode(name, tmp_path / "kubeconfig", tmp_path / "node", tmp_path, tmp_path / "kubectl")


def test_nothing_is_left_of_a_node_that_never_ran(tmp_path):
    assert leftovers("gpulab-node-never-ran", _bridge_name("never-ran"), tmp_path / "node") == []


def test_node_up_without_a_cluster_says_how_to_name_one(capsys):
    assert cli.main(["node", "up", "real-1"]) == 2
    assert "give the cluster with --lab LAB" in capsys.readouterr().err


def test_a_seccomp_profile_named_outside_the_kubelet_s_folder_is_refused(tmp_path, capsys):
    profile, kubeconfig = tmp_path / "p.json", tmp_path / "kubeconfig"
    profile.write_text("{}")
    kubeconfig.write_text("")
    arguments = ["node", "up", "real-1", f"--kubeconfig={kubeconfig}", f"--seccomp-profile=../p.json={profile}"]
    assert cli.main(arguments) == 1
    assert "NAME is a path inside the kubelet's seccomp folder" in capsys.readouterr().err


def test_node_down_of_a_node_never_up_says_so(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path))
    assert cli.main(["node", "down", "real-1"]) == 0
    assert "no node real-1 is up" in capsys.readouterr().err
