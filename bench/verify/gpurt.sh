#!/usr/bin/env bash
# gpurt's checks as a verify script: bench/verify/gpurt.sh ROOT FAKES (FAKES/dumps holds the generated dumps)
ROOT=$1 FAKES=$2
. "$(dirname "$0")/common.sh"
S=bin/rc-crosscheck.sh
missing() { local dump=$1 want=$2; [ "$(bash $ROOT/$S "$FAKES/dumps/$dump.toml" </dev/null | grep MISSING= | sort | paste -sd,)" = "$want" ]; }
check namespace           jsonpath namespace gpu-rt '{.metadata.name}' gpu-rt
check runtimeclass-nvidia jsonpath runtimeclass nvidia '{.handler}' nvidia
check runtimeclass-cdi    jsonpath runtimeclass nvidia-cdi '{.handler}' nvidia-cdi
check typo-runtimeclass   jsonpath runtimeclass nvidia-typo '{.handler}' nvidai
check probe-typo-sched    jsonpath -n gpu-rt pod probe-typo '{.status.conditions[?(@.type=="PodScheduled")].status}' True
check unvalidated-answers answer out/unvalidated.txt API_VALIDATES_HANDLER=no
check tight-node-a        jsonpath node gpu-tight-a '{.status.allocatable.cpu}' 1
check tight-node-b        jsonpath node gpu-tight-b '{.status.allocatable.cpu}' 1
check overhead-rc         jsonpath runtimeclass nvidia-overhead '{.overhead.podFixed.cpu}' 250m
check fits-scheduler      yamlcheck k8s/overhead.yaml 'assert all("nodeName" not in d["spec"] for d in docs if d["kind"] == "Pod")'
check over-scheduler      jsonpath -n gpu-rt pod over '{.spec.overhead.cpu}' 250m
check fits-runs-on-a      jsonpath -n gpu-rt pod fits '{.spec.nodeName}' gpu-tight-a
check over-waits          jsonpath -n gpu-rt pod over '{.status.conditions[?(@.type=="PodScheduled")].reason}' Unschedulable
check main-config         toml etc/config.toml 'assert d["version"] == 2'
check dropin-nvidia       toml etc/conf.d/99-nvidia.toml 'assert "nvidia" in d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]'
check glob-misses         py 'import fnmatch; d = tomllib.load(open(root / "etc/config.toml", "rb")); assert not any(fnmatch.fnmatch("/etc/containerd/conf.d/99-nvidia.toml", i) for i in d["imports"])'
check imports-report      answer out/imports.txt LOADED_NVIDIA=no
check version-3           toml etc/config-v3.toml 'assert d["version"] == 3'
check renamed-plugin      toml etc/config-v3.toml 'assert "runtimes" in d["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]'
check grpc-plugin-clean   toml etc/config-v3.toml 'assert "containerd" not in d["plugins"].get("io.containerd.grpc.v1.cri", {})'
check v3-imports-dropin   toml etc/config-v3.toml 'assert d["imports"]'
check ok-all-loaded-v2    missing all-v2 ""
check ok-all-loaded-v3    missing all-v3 ""
check names-missing-v2    missing some-v2 "MISSING=nvidia-cdi"
check names-missing-v3    missing some-v3 "MISSING=nvidai,MISSING=nvidia-cdi"
check reads-config-dump   with_dump gpurt-no-argument bash -c "bash $ROOT/$S | grep -q MISSING=nvidai"
check default-dropin      toml etc/conf.d/50-default.toml 'assert d["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] == "nvidia"'
check blast-answers       answer out/blast.txt BLAST_RADIUS=node
check fixture-partly      toml fixtures/dump-node1.toml 'assert "runc" in str(d)'
check saved-verdict       answer out/crosscheck.txt MISSING=nvidai
finish
