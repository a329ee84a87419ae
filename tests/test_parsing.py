"""Lenient on form, strict on meaning: the readers every grader uses."""

import os
import tomllib
from typing import Any

import pytest

from pytest_gpulab.grading.containerd.containerd_toml import (
    expect_plugins_match_version,
    imports_of,
    parse_key_path,
    top_level,
)
from pytest_gpulab.grading.feedback import StepFailed
from pytest_gpulab.grading.k8s.kube import effective_request
from pytest_gpulab.grading.learner import LearnerWork
from pytest_gpulab.grading.parsing import load_toml, load_yaml_documents, read_text, yaml_in
from pytest_gpulab.grading.values import (
    parse_key_values,
    parse_quantity_number,
    parse_yes_no,
    quantity_bytes,
    read_amount_table,
    read_key_values,
    split_list,
)


def test_key_values_ignore_case_whitespace_quotes_crlf_and_comments():
    text = '\r\n# judged\r\n main_runtimes = "runc"\r\nexport Conflict=yes  # both define it\r\nTABLE=a=b\r\nEMPTY=\r\n'
    assert parse_key_values(text) == {"MAIN_RUNTIMES": "runc", "CONFLICT": "yes", "TABLE": "a=b", "EMPTY": ""}


def test_key_values_also_read_colon_and_space_separated_lines():
    text = 'PHYSICAL_GPUS: 4\nREPLICAS 5\nCONFLICT_TABLE=plugins."io.containerd.grpc.v1.cri".containerd.runtimes\n'
    assert parse_key_values(text) == {
        "PHYSICAL_GPUS": "4",
        "REPLICAS": "5",
        "CONFLICT_TABLE": 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes',
    }


@pytest.mark.parametrize(
    "written", ["runc,nvidia", "nvidia, runc", "runc nvidia", "[runc, nvidia]", " nvidia ,runc ", "{'runc', 'nvidia'}"]
)
def test_lists_are_order_insensitive_with_commas_or_spaces(written):
    assert split_list(written) == {"runc", "nvidia"}


@pytest.mark.parametrize(
    ("written", "meaning"), [("yes", True), ("TRUE", True), ("no", False), ("False", False), ("maybe", None)]
)
def test_yes_no(written, meaning):
    assert parse_yes_no(written) is meaning


@pytest.mark.parametrize(
    ("written", "number"),
    [("40", 40), ("40GiB", 40), ("40 GiB", 40), ("40Gi", 40), ("0", 0), ("forty", None), ("40GB", None)],
)
def test_numbers_may_carry_a_gib_suffix(written, number):
    assert parse_quantity_number(written) == number


@pytest.mark.parametrize(
    "table",
    [
        "NAME         GPU\nlab-node-0   4\nlab-node-1   <none>\nlab-node-2   <none>\n",
        "lab-node-0\t4\nlab-node-1\t0\nlab-node-2\t-\n",
        "NODE,GPU\nlab-node-0,4\nlab-node-1,\nlab-node-2,0\n",
        "lab-node-0 4\r\n\r\nlab-node-1\r\nlab-node-2 <none>\r\n",
        "| NAME | GPU |\n|------|-----|\n| lab-node-0 | 4 |\n| lab-node-1 |  |\n| lab-node-2 | <none> |\n",
        "# GPUs at step 6\nlab-node-0 4\nlab-node-1 0\nlab-node-2 0\n",
        "lab-node-0=4\nlab-node-1=0\nlab-node-2=\n",
        "node/lab-node-0 4\nnode/lab-node-1 <none>\nnode/lab-node-2 <none>\n",
    ],
)
def test_amount_tables_accept_headers_separators_and_missing_amounts(tmp_path, table):
    path = tmp_path / "node-gpu.txt"
    path.write_text(table)
    assert read_amount_table(path) == {"lab-node-0": [4], "lab-node-1": [0], "lab-node-2": [0]}


def test_amount_table_keeps_an_unreadable_amount_as_text(tmp_path):
    path = tmp_path / "node-gpu.txt"
    path.write_text("lab-node-0 four\n")
    assert read_amount_table(path) == {"lab-node-0": ["four"]}


@pytest.mark.parametrize(
    ("written", "path"),
    [
        (
            'plugins."io.containerd.grpc.v1.cri".containerd.runtimes',
            ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes"),
        ),
        (
            "plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes",
            ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes"),
        ),
        (
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]',
            ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes"),
        ),
        (
            "plugins.io.containerd.grpc.v1.cri.containerd.runtimes",
            ("plugins", "io", "containerd", "grpc", "v1", "cri", "containerd", "runtimes"),
        ),
        ('plugins."io.containerd', None),
    ],
)
def test_table_paths_are_read_as_toml_reads_them(written, path):
    assert parse_key_path(written) == path


def test_imports_globs_resolve_like_containerd(tmp_path):
    learner = LearnerWork(tmp_path / "lab", homes=("/root/gpuop",))
    etc = learner.root / "etc/containerd"
    (etc / "conf.d/sub").mkdir(parents=True)
    dropin = etc / "conf.d/99-nvidia.toml"
    dropin.write_text("")
    (etc / "conf.d/sub/deeper.toml").write_text("")

    def glob(written):
        return learner.glob(written, config="etc/containerd")

    assert glob("conf.d/*.toml") == [dropin]
    assert glob("/etc/containerd/conf.d/*.toml") == [dropin]
    assert glob(f"{etc}/conf.d/*.toml") == [dropin]
    assert glob("/root/gpuop/etc/containerd/conf.d/*.toml") == [dropin]  # where the root stood, as written
    assert glob("/etc/containerd/conf.d/*.conf") == []
    assert glob("/**/*.toml") == []  # never a walk of the whole filesystem
    assert glob("../containerd/conf.d/*.toml") == []
    assert glob("/opt/elsewhere/*.toml") == []
    assert glob("/root/gpuop-old/etc/containerd/conf.d/*.toml") == []  # a root's name as a prefix is not the root
    assert learner.catches(["conf.d/*.conf", "conf.d/*.toml"], "etc/containerd/conf.d/99-nvidia.toml",
                           config="etc/containerd") == ["conf.d/*.toml"]  # fmt: skip
    assert imports_of({"imports": "conf.d/*.toml"}) == ["conf.d/*.toml"]
    assert imports_of({"plugins": {"x": {"imports": ["a"]}}}) == ["a"]


def test_a_path_written_under_the_recorded_root_is_read_from_the_copy(tmp_path):
    """A bundle is unpacked elsewhere: the root the learner wrote paths under, recorded, still maps to the copy."""
    learner = LearnerWork(tmp_path / "unpacked", homes=("/home/ana/labs/gpurt", "/root/gpurt"))
    assert learner.inside("/home/ana/labs/gpurt/etc/conf.d/x.toml", config="etc") == learner.root / "etc/conf.d/x.toml"
    assert learner.inside("/root/gpurt/etc/conf.d/x.toml", config="etc") == learner.root / "etc/conf.d/x.toml"
    assert learner.inside("/etc/containerd/conf.d/x.toml", config="etc") == learner.root / "etc/conf.d/x.toml"
    assert learner.inside("/etc/other/x.toml", config="etc") is None


def test_a_top_level_key_written_under_a_table_names_the_table():
    config = tomllib.loads(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nimports = ["conf.d/*.toml"]\n'
    )
    assert top_level(config, "version", "c.toml") == 2
    assert top_level(config, "root", "c.toml") is None
    with pytest.raises(
        StepFailed, match=r'imports sits under \[plugins\."io\.containerd\.grpc\.v1\.cri"\.containerd\] in c\.toml'
    ):
        top_level(config, "imports", "c.toml")


V2_RUNTIMES: dict[str, Any] = {"plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"runtimes": {"nvidia": {}}}}}}
V3_RUNTIMES: dict[str, Any] = {
    "plugins": {"io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {"nvidia": {}}}}}
}
V3_SERVER: dict[str, Any] = {"plugins": {"io.containerd.grpc.v1.cri": {"stream_server_address": "127.0.0.1"}}}


@pytest.mark.parametrize(
    ("document", "read_as", "says"),
    [
        ({"version": 2, **V2_RUNTIMES}, None, None),
        ({"version": 3, **V3_RUNTIMES}, None, None),
        ({"version": 3, "plugins": {**V3_RUNTIMES["plugins"], **V3_SERVER["plugins"]}}, None, None),
        (V2_RUNTIMES, None, None),  # no version, none to read it as: nothing judged
        (V3_RUNTIMES, None, None),
        ({"version": 2, **V3_RUNTIMES}, None, "is version 2, yet writes"),
        (V3_RUNTIMES, 2, "states no version, so it is read as version 2, as main.toml is"),
        ({"version": 3, **V2_RUNTIMES}, 2, "is version 3, yet sets .*containerd, a version 2 setting"),
        (V2_RUNTIMES, 3, "which version 3 silently ignores"),
    ],
)
def test_plugin_names_are_judged_against_the_file_version(document, read_as, says):
    if says is None:
        expect_plugins_match_version(document, "d.toml", read_as, main="main.toml")
    else:
        with pytest.raises(StepFailed, match=says):
            expect_plugins_match_version(document, "d.toml", read_as, main="main.toml")


def test_an_imported_drop_in_states_the_main_file_version_or_none():
    expect_plugins_match_version({"version": 2, **V2_RUNTIMES}, "d.toml", 2, main="main.toml", imported=True)
    with pytest.raises(StepFailed, match=r"says version = 3, but main\.toml, which imports it, is version 2"):
        expect_plugins_match_version({"version": 3, **V3_RUNTIMES}, "d.toml", 2, main="main.toml", imported=True)


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "does not exist"), (b"\xff\xfe\x00", "not UTF-8"), (b"version = = 2", "not valid TOML")],
)
def test_bad_input_is_a_sentence_about_the_file(tmp_path, content, says):
    path = tmp_path / "config.toml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(StepFailed, match=says):
        load_toml(path, "etc/containerd/config.toml")


def test_text_is_read_with_crlf_folded_and_a_bom_dropped(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    assert read_text(path) == "a\nb\n"


@pytest.mark.parametrize(
    ("written", "number"),
    [
        ("64Gi", 64 * 2**30),
        ("65536Mi", 64 * 2**30),
        ("128Mi", 128 * 2**20),
        ("1G", 10**9),
        ("64GiB", None),
        (None, None),
        ("250m", 0.25),
        ("0.25", 0.25),
        (" 900m ", 0.9),
        (1, 1),
        (True, None),
        ("1ki", None),
        ("NaN", None),
        ({"cpu": 1}, None),
    ],
)
def test_kubernetes_quantities(written, number):
    assert quantity_bytes(written) == number


def test_yaml_in_a_string_is_read_with_a_files_bounds():
    assert yaml_in("version: v1\nsharing: {timeSlicing: {}}\n", "data.any") == {
        "version": "v1",
        "sharing": {"timeSlicing": {}},
    }
    with pytest.raises(StepFailed, match=r"^data.any is not valid YAML inside "):
        yaml_in("sharing: [\n", "data.any")
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
    )
    with pytest.raises(StepFailed, match="expands to more than"):
        yaml_in(laughs, "data.any")
    with pytest.raises(StepFailed, match="nested too deeply"):
        yaml_in("[" * 5000 + "]" * 5000, "data.any")


def test_deep_nesting_is_a_sentence_not_a_crash(tmp_path):
    toml_path, yaml_path = tmp_path / "deep.toml", tmp_path / "deep.yaml"
    toml_path.write_text("a = " + "[" * 5000 + "]" * 5000)
    yaml_path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(StepFailed, match="nested too deeply"):
        load_toml(toml_path)
    with pytest.raises(StepFailed, match="nested too deeply"):
        load_yaml_documents(yaml_path)


def test_special_files_are_not_read(tmp_path):
    fifo = tmp_path / "merge.txt"
    os.mkfifo(fifo)  # reading it would block forever
    with pytest.raises(StepFailed, match="not a regular file"):
        read_text(fifo)
    (tmp_path / "zero.txt").symlink_to("/dev/zero")
    with pytest.raises(StepFailed, match="not a regular file"):
        read_text(tmp_path / "zero.txt")


def test_a_huge_file_is_refused_after_reading_at_most_a_little_more_than_the_limit(tmp_path):
    path = tmp_path / "huge.txt"
    with path.open("wb") as handle:
        handle.truncate(10 * 1024**3)  # sparse: 10 GiB that take no disk
    with pytest.raises(StepFailed, match="larger than 1 MiB"):
        read_text(path)


def test_a_key_or_a_node_given_two_different_values_is_refused(tmp_path):
    path = tmp_path / "rollout.txt"
    path.write_text("READY=3\nREADY=2\nDESIRED=3\nDESIRED = 3\n")
    with pytest.raises(StepFailed, match=r"gives READY twice \(3 and 2\)"):
        read_key_values(path, "out/rollout.txt")
    table = tmp_path / "node-gpu.txt"
    table.write_text("lab-node-0 4\nlab-node-0 20\n")
    with pytest.raises(StepFailed, match=r"lists lab-node-0 twice"):
        read_amount_table(table)


def test_every_amount_column_is_kept(tmp_path):
    path = tmp_path / "node-gpu.txt"
    path.write_text("NAME CAPACITY ALLOCATABLE\nlab-node-0 4 4\nlab-node-2 <none> 4\n")
    assert read_amount_table(path) == {"lab-node-0": [4, 4], "lab-node-2": [0, 4]}


def pod(*resources: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)],
            "initContainers": list(init),
        }
    }


@pytest.mark.parametrize(
    ("obj", "resource", "amount"),
    [
        (pod({"limits": {"cpu": "900m"}}), "cpu", 0.9),  # a limit alone is the request
        (pod({"requests": {"cpu": 0.9}, "limits": {"cpu": "2"}}), "cpu", 0.9),
        (pod({"limits": {"nvidia.com/gpu": "1"}}, {}), "nvidia.com/gpu", 1),
        (pod({"requests": {"nvidia.com/gpu": "1000m"}, "limits": {"nvidia.com/gpu": 1}}), "nvidia.com/gpu", 1),
        (pod({"limits": {"memory": "1Gi"}}, {"requests": {"memory": "1024Mi"}}), "memory", 2 * 2**30),
        ({"spec": {"template": pod({"limits": {"memory": "65536Mi"}})}}, "memory", 64 * 2**30),
        (pod({"requests": {"cpu": "1"}}, init=({"resources": {"requests": {"cpu": "2"}}},)), "cpu", 2),
        (
            pod(
                {"requests": {"cpu": "1"}},
                init=({"restartPolicy": "Always", "resources": {"limits": {"cpu": "100m"}}},),
            ),
            "cpu",
            1.1,
        ),
        (pod({"limits": {"cpu": "lots"}}), "cpu", None),
        (pod({}), "cpu", None),
    ],
)
def test_an_amount_is_the_effective_request_in_any_spelling(obj, resource, amount):
    assert effective_request(obj, resource) == amount


def test_an_object_without_a_namespace_is_judged_as_applied_to_the_namespace_asked(tmp_path):
    """`kubectl apply -n gpu-rt -f pod.yaml` of a file without a namespace makes the object in gpu-rt: the file is
    judged only for what it alone holds; a namespace it does write stays as written."""
    learner = LearnerWork(tmp_path)
    (tmp_path / "pod.yaml").write_text("kind: Pod\nmetadata:\n  name: probe\n---\nkind: Pod\nmetadata:\n  name: other\n"
                                       "  namespace: default\n")  # fmt: skip
    pod = learner.file("pod.yaml").object("Pod", "probe", applied_to="gpu-rt")
    assert pod["metadata"] == {"name": "probe", "namespace": "gpu-rt"}
    assert learner.file("pod.yaml").object("Pod", "probe")["metadata"] == {"name": "probe"}
    assert learner.file("pod.yaml").object("Pod", "other", applied_to="gpu-rt")["metadata"]["namespace"] == "default"


def test_a_table_is_shown_with_its_values_in_the_learner_s_syntax_not_python_s():
    from pytest_gpulab.grading.feedback import shown

    written = shown({"requests": {"cpu": "300m", "memory": "64G"}, "limits": {"nvidia.com/gpu": 1}})
    assert written == '{requests: {cpu: "300m", memory: "64G"}, limits: {nvidia.com/gpu: 1}}'
    assert "a table" not in written
    assert "'" not in written
    assert shown({f"k{n}": "x" * 20 for n in range(40)}).endswith("…}")


def test_broken_yaml_is_told_by_line_and_in_words_not_in_the_parser_s(tmp_path):
    (tmp_path / "pod.yaml").write_text("kind: Pod\nmetadata:\n  name: x\n  labels\n  app: y\n")
    with pytest.raises(StepFailed) as failed:
        load_yaml_documents(tmp_path / "pod.yaml", "k8s/pod.yaml")
    assert failed.value.message.startswith(
        "k8s/pod.yaml is not valid YAML at line 5, column 3: a key without its colon"
    )
    assert "<unicode string>" not in failed.value.message
    assert "scanning" not in failed.value.message


def test_a_toml_error_names_a_table_as_its_header():
    from pytest_gpulab.grading.parsing import toml_words

    said = toml_words(
        "Cannot declare ('plugins', 'io.containerd.grpc.v1.cri', 'containerd') twice (at line 3, column 48)"
    )
    assert said == 'Cannot declare [plugins."io.containerd.grpc.v1.cri".containerd] twice (at line 3, column 48)'
    assert (
        toml_words("Cannot overwrite a value (at line 2, column 4)") == "Cannot overwrite a value (at line 2, column 4)"
    )
