#!/usr/bin/env bash
# gpuop's checks as a verify script: bench/verify/gpuop.sh ROOT FAKES
ROOT=$1 FAKES=$2
. "$(dirname "$0")/common.sh"
C=etc/containerd/config.toml D=etc/containerd/conf.d/99-nvidia.toml S=bin/check-runtime.sh
R='plugins."io.containerd.grpc.v1.cri".containerd'
check version             toml $C 'assert d["version"] == 2'
check imports             toml $C 'assert any("conf.d" in i for i in d["imports"])'
check default-runtime     toml $C 'assert d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] == "runc"'
check runc-runtime        toml $C 'assert "runc" in d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]'
check nvidia-runtime      toml $D 'assert d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]["runtime_type"] == "io.containerd.runc.v2"'
check adds-only-nvidia    toml $D 'assert list(d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]) == ["nvidia"]'
check cgroup-driver       toml $D 'assert d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True'
check imported-by-main    py 'import glob; d = tomllib.load(open(root / "etc/containerd/config.toml", "rb")); assert any(glob.fnmatch.fnmatch("/etc/containerd/conf.d/99-nvidia.toml", i) for i in d["imports"])'
check merge-runtimes      answer out/merge.txt MAIN_RUNTIMES=runc
check merge-conflict      answer out/merge.txt CONFLICT=yes
check merge-loaded        answer out/merge.txt LOADED_RUNTIMES=runc
check script-reads-dump   not grep -q config.toml $ROOT/$S
check exits-0-nvidia      with_dump v2-runc-nvidia bash $ROOT/$S
check exits-1-accident    not with_dump v2-accident-imported-not-loaded bash $ROOT/$S
check exits-1-other-name  not with_dump v2-runc-gpu-handler bash $ROOT/$S
check asks-config-dump    grep -q "config dump" $ROOT/$S
check exits-1-no-ctrd     not without_containerd bash $ROOT/$S
check runtimeclass        jsonpath runtimeclass nvidia '{.handler}' nvidia
check gpu-pod             jsonpath -n gpu-lab pod cuda-probe '{.spec.runtimeClassName}' nvidia
check pending-reason      answer out/unscheduled.txt Unschedulable
check node-gpus           jsonpath node lab-node-0 '{.status.allocatable.nvidia\.com/gpu}' 4
check probe-runs          jsonpath -n gpu-lab pod cuda-probe '{.status.phase}' Running
check node-gpu-table      grep -q "lab-node-0 *4" $ROOT/out/node-gpu.txt
check time-slicing        yamlcheck k8s/time-slicing.yaml 'assert "replicas: 5" in str(docs) or "5" in str(docs)'
check node-slots          jsonpath node lab-node-1 '{.status.allocatable.nvidia\.com/gpu}' 20
check slot-arithmetic     answer out/slots.txt ADVERTISED=20
check daemonset-spec      yamlcheck k8s/toolkit-ds.yaml 'assert docs[0]["kind"] == "DaemonSet"'
check rollout-stalled     jsonpath -n gpu-operator ds nvidia-container-toolkit '{.status.numberReady}' 2
check rollout-report      answer out/rollout.txt BLOCKER=insufficient-memory
finish
