#!/usr/bin/env bash
# gpunode's checks as a verify script: bench/verify/gpunode.sh ROOT FAKES (FAKES/hidden-view.kubeconfig:
# the grader's view of the cluster that hides a Pod of each DaemonSet, which the bench keeps open)
ROOT=$1 FAKES=$2
. "$(dirname "$0")/common.sh"
NS=nvidia-gpu-operator
says() { local want=$1; shift; [ "$("$@" </dev/null | grep = | sort | paste -sd,)" = "$want" ]; }
check gfd-ds              yamlcheck k8s/gfd-ds.yaml 'assert docs[0]["kind"] == "DaemonSet"'
check device-plugin-ds    yamlcheck k8s/device-plugin-ds.yaml 'assert docs[0]["kind"] == "DaemonSet"'
check nodes-labeled       [ "$(kubectl get nodes -l nvidia.com/gpu.deploy.device-plugin=true -o name | wc -l)" = 3 ]
check nodes-four-gpus     [ "$(kubectl get nodes -o jsonpath='{.items[*].status.capacity.nvidia\.com/gpu}')" = "4 4 4" ]
check status-numbers      answer out/ds-gap.txt DESIRED=2
check labels-against-pods answer out/ds-gap.txt MISSING_NODE=lab-node-2
check reserved-job        jsonpath -n research pod a100-job '{.spec.nodeSelector.kubernetes\.io/hostname}' lab-node-2
check allocation-report   answer out/alloc.txt ALLOCATABLE=0
check never-reads-desired not grep -qi desirednumberscheduled $ROOT/bin/ds-coverage.sh
check operator-ns-live    says "" bash $ROOT/bin/ds-coverage.sh $NS
check ns-without-ds       says "" bash $ROOT/bin/ds-coverage.sh research
check pods-that-are-gone  env KUBECONFIG=$FAKES/hidden-view.kubeconfig bash -c "bash $ROOT/bin/ds-coverage.sh $NS | grep -q MISSING="
check saved-at-the-gap    answer out/coverage.txt MISSING=gpu-feature-discovery/lab-node-2
check crd                 jsonpath crd machineconfigpools.machineconfiguration.openshift.io '{.spec.scope}' Cluster
check worker-pool         jsonpath mcp worker '{.metadata.name}' worker
check stuck-status        jsonpath mcp worker '{.status.conditions[?(@.type=="Updating")].status}' True
check stale-below-age     says "STALE=worker" bash $ROOT/bin/mcp-stale.sh 60
check ok-above-age        says "" bash $ROOT/bin/mcp-stale.sh 100000000
check default-threshold   says "STALE=worker" bash $ROOT/bin/mcp-stale.sh
check computes-the-age    not grep -q 2024-10-29 $ROOT/bin/mcp-stale.sh
check gate-at-end-state   says "BLOCKED=mcp/worker,BLOCKED=node/lab-node-2" bash $ROOT/bin/preflight.sh
check saved-at-step-7     answer out/preflight.txt BLOCKED=mcp/worker
check node-restored       jsonpath node lab-node-2 '{.spec.unschedulable}' true
check agents-back         jsonpath -n $NS ds gpu-feature-discovery '{.status.numberReady}' 3
check reserved-job-runs   jsonpath -n research pod a100-job '{.status.phase}' Running
check impact-report       answer out/impact.txt USER_PODS=research/a100-job
finish
