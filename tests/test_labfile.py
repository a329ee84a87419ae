"""lab.toml: what a lab declares, and a clear error for every mistake an author can make in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulab.labs.labfile import LabFileError, load_lab

HEAD = 'name = "demo"\ntitle = "Demo"\ndefault_root = "~/demo"\nrubric_version = 3\n'


def lab_from(tmp_path: Path, text: str):
    (tmp_path / "lab.toml").write_text(HEAD + text)
    return load_lab(tmp_path)


def test_a_full_environment_reads_as_declared(tmp_path):
    (tmp_path / "objects").mkdir()
    (tmp_path / "objects" / "b.yaml").write_text("kind: Namespace\n")
    (tmp_path / "objects" / "a.yaml").write_text("kind: Namespace\n")
    lab = lab_from(
        tmp_path,
        '[environment]\nobjects = ["objects/b.yaml", "objects/*.yaml"]\n'
        '[[environment.nodes]]\nname = "gpu"\ncpu = 4\nresources = { "nvidia.com/gpu" = 8 }\nunschedulable = true\n'
        'labels = { a = "b" }\nannotations = { c = "d" }\ntaints = [{ key = "k", effect = "NoExecute" }]\n'
        '[[environment.nodes]]\nnames = ["w-0", "w-1"]\n',
    )
    assert lab.rubric_version == "3"
    assert lab.default_root == Path("~/demo").expanduser()
    assert [path.name for path in lab.environment.objects] == ["b.yaml", "a.yaml"]  # in the order written, once each
    gpu, worker, _ = lab.nodes
    manifest = gpu.manifest()
    assert manifest["status"]["capacity"] == {"cpu": "4", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "8"}
    assert manifest["spec"] == {"taints": [{"key": "k", "effect": "NoExecute"}], "unschedulable": True}
    assert manifest["metadata"]["labels"]["a"] == "b"
    assert manifest["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert worker.manifest()["spec"] == {}
    assert lab.environment.node_names == ("gpu", "w-0", "w-1")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[environment.nodes]]\nname = "n"\ntaint = []\n', "unknown key environment.nodes[0].taint"),
        (
            '[[environment.nodes]]\nname = "n"\ntaints = [{ key = "k", effect = "NoSchdule" }]\n',
            "effect is 'NoSchdule'; use one of NoSchedule",
        ),
        (
            '[[environment.nodes]]\nname = "n"\nmemory = "lots"\n',
            "memory is 'lots', which is not a Kubernetes quantity",
        ),
        ('[[environment.nodes]]\nname = "n"\n[[environment.nodes]]\nname = "n"\n', "the node n is declared twice"),
        ('[[environment.nodes]]\nname = "n"\nnames = ["m"]\n', "needs either name"),
        ('[[environment.nodes]]\nname = "Node_1"\n', "use lower-case letters"),
        ('[[environment.nodes]]\nname = "n"\nunschedulable = "yes"\n', "unschedulable should be a bool"),
        ('[[environment.nodes]]\nname = "n"\nlabels = { a = 1 }\n', "labels.a should be a string"),
        ('[environment]\nobjects = ["../elsewhere/*.yaml"]\n', "should be a path inside the lab folder"),
        ('[environment]\nobjects = ["objects/*.yaml"]\n', "matches no file"),
        ("extra = 1\n", "unknown key extra"),
    ],
)
def test_a_mistake_names_the_file_and_the_key(tmp_path, text, says):
    with pytest.raises(LabFileError, match=r"lab\.toml") as error:
        lab_from(tmp_path, text)
    assert says in str(error.value)


def test_required_keys_and_broken_toml(tmp_path):
    (tmp_path / "lab.toml").write_text('name = "demo"\n')
    with pytest.raises(LabFileError, match="title is missing"):
        load_lab(tmp_path)
    (tmp_path / "lab.toml").write_text("name = = 1\n")
    with pytest.raises(LabFileError, match="is not valid TOML"):
        load_lab(tmp_path)
    with pytest.raises(LabFileError, match="could not be read"):
        load_lab(tmp_path / "missing")
