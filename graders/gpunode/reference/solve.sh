#!/usr/bin/env bash
# Reference solution of the lab "gpunode" (labs/gpunode.md).
#
# Usage: solve.sh ROOT [STEP ...]
#   ROOT   where the learner's files go (the lab's /root/gpunode)
#   STEP   1..8; with none, every step runs in order.
# Cluster steps act on the cluster named by $KUBECONFIG with the kubectl on PATH.
# Only bash and kubectl: the learner's machine need not have jq.
set -euo pipefail

if [[ $# -lt 1 || -z "$1" ]]; then
    echo "usage: $0 ROOT [STEP ...]" >&2
    exit 2
fi
mkdir -p "$1"
ROOT=$(cd "$1" && pwd)
shift
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(1 2 3 4 5 6 7 8)
mkdir -p "$ROOT"/{k8s,bin,out}

NODES=(lab-node-0 lab-node-1 lab-node-2)
GFD=gpu-feature-discovery
PLUGIN=nvidia-device-plugin-daemonset
NS=nvidia-gpu-operator

ensure_namespace() { kubectl get namespace "$1" >/dev/null 2>&1 || kubectl create namespace "$1"; }

gpus() { # NODE CAPACITY ALLOCATABLE
    kubectl patch node "$1" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$2\"},\"allocatable\":{\"nvidia.com/gpu\":\"$3\"}}}"
}

daemonset() { # NAME LABEL
    cat <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: $1
  namespace: $NS
spec:
  selector:
    matchLabels:
      app: $1
  template:
    metadata:
      labels:
        app: $1
    spec:
      nodeSelector:
        $2: "true"
      containers:
        - name: agent
          image: registry.example/$1:v1
YAML
}

ds_status() { # NAME: "desired ready"
    kubectl get daemonset "$1" -n "$NS" -o jsonpath='{.status.desiredNumberScheduled} {.status.numberReady}'
}

wait_ds() { # NAME DESIRED READY: a bounded wait for the DaemonSet's status
    local deadline=$((SECONDS + 60))
    until [[ "$(ds_status "$1")" == "$2 $3" ]]; do
        ((SECONDS < deadline)) || { echo "$1 did not reach desired $2 ready $3: $(ds_status "$1")" >&2; return 1; }
        kubectl wait daemonset "$1" -n "$NS" --for=jsonpath='{.status.numberReady}'="$3" --timeout=5s >/dev/null 2>&1 || true
    done
}

# --- step 1: GPUs, labels and the operator's two agents ---------------------------------------
step1() {
    for node in "${NODES[@]}"; do
        gpus "$node" 4 4
        kubectl label node "$node" --overwrite nvidia.com/gpu.present=true \
            nvidia.com/gpu.deploy.gpu-feature-discovery=true nvidia.com/gpu.deploy.device-plugin=true
    done
    ensure_namespace "$NS"
    daemonset "$GFD" nvidia.com/gpu.deploy.gpu-feature-discovery >"$ROOT/k8s/gfd-ds.yaml"
    daemonset "$PLUGIN" nvidia.com/gpu.deploy.device-plugin >"$ROOT/k8s/device-plugin-ds.yaml"
    kubectl apply -f "$ROOT/k8s/gfd-ds.yaml" -f "$ROOT/k8s/device-plugin-ds.yaml"
    wait_ds "$GFD" 3 3
    wait_ds "$PLUGIN" 3 3
}

# --- step 2: the reservation taint, the restart, and the gap the status hides ------------------
step2() {
    kubectl taint node lab-node-2 ai4dd-a100-reserved=true:NoSchedule --overwrite
    kubectl delete pod -n "$NS" --field-selector spec.nodeName=lab-node-2 --wait=true
    wait_ds "$GFD" 2 2
    wait_ds "$PLUGIN" 2 2
    local labeled desired ready
    labeled=$(kubectl get nodes -l nvidia.com/gpu.deploy.gpu-feature-discovery=true -o name | wc -l)
    read -r desired ready <<<"$(ds_status "$GFD")"
    {
        echo "LABELED_NODES=$labeled"
        echo "DESIRED=$desired"
        echo "READY=$ready"
        echo "MISSING_NODE=lab-node-2"
        echo "STATUS_LOOKS_HEALTHY=$([[ $desired == "$ready" ]] && echo yes || echo no)"
    } >"$ROOT/out/ds-gap.txt"
}

# --- step 3: capacity 4, allocatable 0, and a reserved job that cannot start ------------------
step3() {
    gpus lab-node-2 4 0
    ensure_namespace research
    cat >"$ROOT/k8s/a100-job.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: a100-job
  namespace: research
spec:
  nodeSelector:
    kubernetes.io/hostname: lab-node-2
  tolerations:
    - key: ai4dd-a100-reserved
      operator: Equal
      value: "true"
      effect: NoSchedule
  containers:
    - name: train
      image: registry.example/train:v1
      resources:
        limits:
          nvidia.com/gpu: 4
YAML
    kubectl apply -f "$ROOT/k8s/a100-job.yaml"
    kubectl wait pod/a100-job -n research --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=Unschedulable --timeout=60s
    {
        echo "CAPACITY=$(kubectl get node lab-node-2 -o jsonpath='{.status.capacity.nvidia\.com/gpu}')"
        echo "ALLOCATABLE=$(kubectl get node lab-node-2 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')"
        echo "REASON=$(kubectl get pod a100-job -n research -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')"
    } >"$ROOT/out/alloc.txt"
}

# --- step 4: coverage by labels and Pods, never by the DaemonSet's status -----------------------
step4() {
    cat >"$ROOT/bin/ds-coverage.sh" <<'SH'
#!/usr/bin/env bash
# Usage: ds-coverage.sh NAMESPACE. Prints MISSING=<daemonset>/<node> for every node whose labels
# match a DaemonSet's nodeSelector but that runs no Pod of it; exits 1 if any, else prints OK.
set -euo pipefail
ns=${1:?usage: ds-coverage.sh NAMESPACE}
missing=0
daemonsets=$(kubectl get daemonsets -n "$ns" -o jsonpath='{.items[*].metadata.name}') # fails closed, as a check must
for ds in $daemonsets; do
    selector=$(kubectl get daemonset "$ds" -n "$ns" \
        -o go-template='{{range $k, $v := .spec.template.spec.nodeSelector}}{{$k}}={{$v}},{{end}}')
    selector=${selector%,}
    if [[ -n $selector ]]; then
        nodes=$(kubectl get nodes -l "$selector" -o jsonpath='{.items[*].metadata.name}')
    else
        nodes=$(kubectl get nodes -o jsonpath='{.items[*].metadata.name}')
    fi
    covered=$(kubectl get pods -n "$ns" -o go-template='{{range .items}}{{$node := .spec.nodeName}}{{range .metadata.ownerReferences}}{{if eq .kind "DaemonSet"}}{{.name}}/{{$node}}{{"\n"}}{{end}}{{end}}{{end}}')
    for node in $nodes; do
        if ! grep -qxF "$ds/$node" <<<"$covered"; then
            echo "MISSING=$ds/$node"
            missing=1
        fi
    done
done
if ((missing)); then exit 1; fi
echo OK
SH
    chmod +x "$ROOT/bin/ds-coverage.sh"
    "$ROOT/bin/ds-coverage.sh" "$NS" >"$ROOT/out/coverage.txt" || true
}

# --- step 5: the MachineConfigPool and its stuck update ------------------------------------------
step5() {
    cat >"$ROOT/k8s/mcp-crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: machineconfigpools.machineconfiguration.openshift.io
spec:
  group: machineconfiguration.openshift.io
  scope: Cluster
  names:
    kind: MachineConfigPool
    listKind: MachineConfigPoolList
    plural: machineconfigpools
    singular: machineconfigpool
    shortNames: [mcp]
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
YAML
    cat >"$ROOT/k8s/mcp-worker.yaml" <<'YAML'
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
YAML
    kubectl apply -f "$ROOT/k8s/mcp-crd.yaml"
    kubectl wait crd/machineconfigpools.machineconfiguration.openshift.io --for=condition=Established --timeout=60s
    kubectl apply -f "$ROOT/k8s/mcp-worker.yaml"
    kubectl patch machineconfigpool worker --subresource=status --type=merge -p '{"status":{
        "machineCount":3,"readyMachineCount":2,"updatedMachineCount":2,"conditions":[
        {"type":"Updated","status":"False","lastTransitionTime":"2024-10-29T09:00:00Z"},
        {"type":"Updating","status":"True","lastTransitionTime":"2024-10-29T09:00:00Z"}]}}'
}

# --- step 6: an alert for updates that never finish ---------------------------------------------
step6() {
    cat >"$ROOT/bin/mcp-stale.sh" <<'SH'
#!/usr/bin/env bash
# Usage: mcp-stale.sh [MINUTES]. Prints STALE=<pool> for every MachineConfigPool Updating for
# longer than MINUTES (default 30) and exits 1; otherwise prints OK.
set -euo pipefail
threshold=${1:-30}
now=$(date +%s)
stale=0
updating=$(kubectl get machineconfigpools -o go-template='{{range .items}}{{$pool := .metadata.name}}{{range .status.conditions}}{{if and (eq .type "Updating") (eq .status "True")}}{{$pool}} {{.lastTransitionTime}}{{"\n"}}{{end}}{{end}}{{end}}')
while read -r pool since; do
    [[ -n $since ]] || continue
    age=$(( (now - $(date -d "$since" +%s)) / 60 ))
    if ((age > threshold)); then
        echo "STALE=$pool"
        stale=1
    fi
done <<<"$updating"
if ((stale)); then exit 1; fi
echo OK
SH
    chmod +x "$ROOT/bin/mcp-stale.sh"
}

# --- step 7: the preflight gate -----------------------------------------------------------------
preflight_script() {
    cat >"$ROOT/bin/preflight.sh" <<'SH'
#!/usr/bin/env bash
# Usage: preflight.sh. Prints BLOCKED=<reason> for each problem and exits 1, or prints OK.
set -euo pipefail
# Each reading is taken before it is used: a gate that cannot read the cluster must not say OK.
pools=$(kubectl get machineconfigpools -o go-template='{{range .items}}{{$pool := .metadata.name}}{{range .status.conditions}}{{if and (eq .type "Updating") (eq .status "True")}}{{$pool}}{{"\n"}}{{end}}{{end}}{{end}}')
nodes=$(kubectl get nodes -o go-template='{{range .items}}{{.metadata.name}} {{range .status.conditions}}{{if eq .type "Ready"}}{{.status}}{{end}}{{end}} {{if .spec.unschedulable}}true{{else}}false{{end}}{{"\n"}}{{end}}')
node_taints=$(kubectl get nodes -o go-template='{{range .items}}{{$node := .metadata.name}}{{range .spec.taints}}{{$node}} {{.key}} {{.effect}}{{"\n"}}{{end}}{{end}}')
blocked=()
while read -r pool; do
    [[ -n $pool ]] && blocked+=("mcp/$pool")
done <<<"$pools"
while read -r node ready unschedulable; do
    [[ -n $node ]] || continue
    if [[ $ready != True || $unschedulable == true ]]; then blocked+=("node/$node"); fi
done <<<"$nodes"
while read -r node key effect; do
    [[ -n $node ]] || continue
    if [[ ($effect == NoSchedule || $effect == NoExecute) && $key != node.kubernetes.io/* ]]; then
        blocked+=("taint/$node/$key")
    fi
done <<<"$node_taints"
if ((${#blocked[@]})); then
    printf 'BLOCKED=%s\n' "${blocked[@]}"
    exit 1
fi
echo OK
SH
    chmod +x "$ROOT/bin/preflight.sh"
}

step7() {
    preflight_script
    "$ROOT/bin/preflight.sh" >"$ROOT/out/preflight.txt" || true
}

# --- step 8: untaint, restore, and the cordon the update was waiting for ------------------------
step8() {
    kubectl taint node lab-node-2 ai4dd-a100-reserved- || true
    wait_ds "$GFD" 3 3
    wait_ds "$PLUGIN" 3 3
    gpus lab-node-2 4 4
    kubectl wait pod/a100-job -n research --for=jsonpath='{.status.phase}'=Running --timeout=60s
    kubectl cordon lab-node-2
    local ready user_pods
    ready=$(kubectl get daemonset "$GFD" -n "$NS" -o jsonpath='{.status.numberReady}')
    user_pods=$(kubectl get pods -A --field-selector spec.nodeName=lab-node-2 \
        -o go-template='{{range .items}}{{if not .metadata.ownerReferences}}{{.metadata.namespace}}/{{.metadata.name}},{{end}}{{end}}')
    {
        echo "NODE=lab-node-2"
        echo "UNSCHEDULABLE=$([[ $(kubectl get node lab-node-2 -o jsonpath='{.spec.unschedulable}') == true ]] && echo yes || echo no)"
        echo "DS_READY=$ready"
        echo "USER_PODS=${user_pods%,}"
    } >"$ROOT/out/impact.txt"
    "$ROOT/bin/preflight.sh" || true
}

for step in "${steps[@]}"; do
    case "$step" in
        [1-8]) "step$step" ;;
        *) echo "unknown step: $step (expected 1..8)" >&2; exit 2 ;;
    esac
done
