#!/usr/bin/env bash
# Reference solution of the lab "gpuop" (labs/gpuop.md).
#
# Usage: solve.sh ROOT [STEP ...]
#   ROOT   where the learner's files go (the lab's /root/gpuop)
#   STEP   1..8; with none, every step runs in order.
# Steps 5-8 act on the cluster named by $KUBECONFIG with the kubectl on PATH.
# Nothing outside ROOT is written, apart from the cluster objects the lab asks for.
set -euo pipefail

if [[ $# -lt 1 || -z "$1" ]]; then
    echo "usage: $0 ROOT [STEP ...]" >&2
    exit 2
fi
ROOT_ARG=$1
shift
steps=("$@")
if [[ ${#steps[@]} -eq 0 ]]; then
    steps=(1 2 3 4 5 6 7 8)
fi
for step in "${steps[@]}"; do
    case "$step" in
        [1-8]) ;;
        *) echo "unknown step '$step' (expected 1..8)" >&2; exit 2 ;;
    esac
done
mkdir -p "$ROOT_ARG"
ROOT=$(cd "$ROOT_ARG" && pwd)

log() { echo "gpuop[$CURRENT_STEP]: $*" >&2; }
die() { echo "gpuop[$CURRENT_STEP]: ERROR: $*" >&2; exit 1; }
CURRENT_STEP=-

# poll SECONDS DESCRIPTION COMMAND [ARG ...]: run COMMAND until it succeeds or the deadline passes.
poll() {
    local seconds=$1 what=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@"; do
        if ((SECONDS >= deadline)); then
            die "timed out after ${seconds}s waiting for: $what"
        fi
        sleep 1
    done
}

ensure_namespace() {
    if ! kubectl get namespace "$1" >/dev/null 2>&1; then
        kubectl create namespace "$1"
    fi
}

# --- step 1: the accident node's main containerd configuration -------------------------
step1() {
    mkdir -p "$ROOT/etc/containerd"
    cat >"$ROOT/etc/containerd/config.toml" <<'EOF'
version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
EOF
}

# --- step 2: the drop-in the toolkit leaves behind ----------------------------------------
step2() {
    mkdir -p "$ROOT/etc/containerd/conf.d"
    cat >"$ROOT/etc/containerd/conf.d/99-nvidia.toml" <<'EOF'
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
EOF
}

# --- step 3: let the parser judge the merge ---------------------------------------------------
step3() {
    mkdir -p "$ROOT/out"
    python3 - "$ROOT" <<'EOF'
import glob
import os
import re
import sys
import tomllib

root = sys.argv[1]
etc = os.path.join(root, "etc", "containerd")
main_path = os.path.join(etc, "config.toml")
CRI = ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes")


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def runtimes(doc):
    node = doc
    for key in CRI:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    return sorted(node) if isinstance(node, dict) else []


def dotted(path):
    return ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else f'"{k}"' for k in path)


def common_tables(a, b, path=()):
    """Every table path both documents define, deepest last."""
    found = []
    for key in a.keys() & b.keys():
        if isinstance(a[key], dict) and isinstance(b[key], dict):
            found.append(path + (key,))
            found += common_tables(a[key], b[key], path + (key,))
    return found


main = load(main_path)
# The imports are absolute paths on the node (/etc/containerd/...): read them under ROOT.
dropin_paths = []
for entry in main.get("imports", []):
    if entry.startswith("/etc/containerd/"):
        pattern = os.path.join(etc, entry[len("/etc/containerd/"):])
    elif os.path.isabs(entry):
        pattern = os.path.join(root, entry.lstrip("/"))
    else:
        pattern = os.path.join(etc, entry)
    dropin_paths += sorted(glob.glob(pattern))
if not dropin_paths:
    sys.exit(f"the imports of {main_path} match no drop-in file")

main_runtimes = runtimes(main)
dropin_runtimes, conflicts = [], []
for path in dropin_paths:
    dropin = load(path)
    dropin_runtimes += [r for r in runtimes(dropin) if r not in dropin_runtimes]
    conflicts += common_tables(main, dropin)
conflict = max(conflicts, key=len) if conflicts else None

lines = [
    "MAIN_RUNTIMES=" + ",".join(main_runtimes),
    "DROPIN_RUNTIMES=" + ",".join(dropin_runtimes),
    "CONFLICT=" + ("yes" if conflict else "no"),
    "CONFLICT_TABLE=" + (dotted(conflict) if conflict else ""),
    "LOADED_RUNTIMES=runc",  # observed with `containerd config dump` on the day, not computed
]
with open(os.path.join(root, "out", "merge.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
EOF
}

# --- step 4: a check that looks at what containerd loaded ---------------------------------------
step4() {
    mkdir -p "$ROOT/bin"
    cat >"$ROOT/bin/check-runtime.sh" <<'EOF'
#!/usr/bin/env bash
# Is the nvidia runtime handler loaded? Ask the running daemon, not the file on disk.
set -u
dump=$(containerd config dump) || { echo "containerd config dump failed" >&2; exit 1; }
if grep -q 'containerd\.runtimes\.nvidia' <<<"$dump"; then
    echo "nvidia runtime handler loaded"
    exit 0
fi
echo "nvidia runtime handler NOT loaded" >&2
exit 1
EOF
    chmod +x "$ROOT/bin/check-runtime.sh"
}

# --- step 5: RuntimeClass, GPU Pod, Pending -----------------------------------------------------
step5() {
    mkdir -p "$ROOT/k8s" "$ROOT/out"
    cat >"$ROOT/k8s/runtimeclass.yaml" <<'EOF'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
EOF
    cat >"$ROOT/k8s/gpu-pod.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: cuda-probe
  namespace: gpu-lab
spec:
  runtimeClassName: nvidia
  restartPolicy: Never
  containers:
    - name: cuda
      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
      command: ["nvidia-smi"]
      resources:
        limits:
          nvidia.com/gpu: 1
EOF
    ensure_namespace gpu-lab
    kubectl apply -f "$ROOT/k8s/runtimeclass.yaml"
    kubectl apply -f "$ROOT/k8s/gpu-pod.yaml"
    kubectl wait pod/cuda-probe -n gpu-lab --timeout=60s \
        --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=Unschedulable
    kubectl get pod cuda-probe -n gpu-lab -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}' \
        >"$ROOT/out/unscheduled.txt"
}

# --- step 6: advertise GPUs the way a device plugin would -------------------------------------
step6() {
    mkdir -p "$ROOT/out"
    kubectl patch node lab-node-0 --subresource=status --type=merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"}}}'
    kubectl wait pod/cuda-probe -n gpu-lab --for=jsonpath='{.status.phase}'=Running --timeout=90s
    kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\.com/gpu' \
        >"$ROOT/out/node-gpu.txt"
}

# --- step 7: time-slicing configuration and its arithmetic ----------------------------------------
step7() {
    mkdir -p "$ROOT/k8s" "$ROOT/out"
    cat >"$ROOT/k8s/time-slicing.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
  namespace: gpu-operator
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        failRequestsGreaterThanOne: true
        resources:
          - name: nvidia.com/gpu
            replicas: 5
EOF
    ensure_namespace gpu-operator
    kubectl apply -f "$ROOT/k8s/time-slicing.yaml"
    kubectl patch node lab-node-1 --subresource=status --type=merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"20"},"allocatable":{"nvidia.com/gpu":"20"}}}'
    # 4 A100 40GiB, 5 replicas each: 20 slots, but time-slicing divides time, not memory.
    local physical=4 replicas=5 vram=40
    cat >"$ROOT/out/slots.txt" <<EOF
PHYSICAL_GPUS=$physical
REPLICAS=$replicas
ADVERTISED=$((physical * replicas))
VRAM_PER_GPU_GIB=$vram
VRAM_GUARANTEED_PER_SLOT_GIB=0
VRAM_SHARED_PER_GPU_GIB=$vram
ISOLATION=none
EOF
}

# --- step 8: stall the toolkit rollout and report the split state --------------------------------
DS=nvidia-container-toolkit
DS_NS=gpu-operator

write_toolkit_ds() { # TAG MEMORY
    cat >"$ROOT/k8s/toolkit-ds.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: $DS
  namespace: $DS_NS
  labels:
    app: $DS
spec:
  selector:
    matchLabels:
      app: $DS
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        app: $DS
    spec:
      containers:
        - name: toolkit
          image: nvcr.io/nvidia/k8s/container-toolkit:$1
          resources:
            requests:
              memory: $2
EOF
}

ds_status() { # prints: generation observed desired updated ready
    kubectl get ds "$DS" -n "$DS_NS" -o jsonpath='{.metadata.generation} {.status.observedGeneration} {.status.desiredNumberScheduled} {.status.updatedNumberScheduled} {.status.numberReady}'
}

ds_all_ready() {
    local gen obs desired updated ready
    read -r gen obs desired updated ready < <(ds_status; echo) || return 1
    [[ "$gen" == "$obs" && "$desired" == 3 && "$updated" == 3 && "$ready" == 3 ]]
}

ds_stalled() {
    local gen obs desired updated ready
    read -r gen obs desired updated ready < <(ds_status; echo) || return 1
    [[ "$gen" == "$obs" && "$desired" == 3 && "$updated" == 1 && "$ready" == 2 ]] || return 1
    local messages
    messages=$(kubectl get pods -n "$DS_NS" -l "app=$DS" --field-selector=status.phase=Pending \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}{end}') || return 1
    [[ "$messages" == *"Insufficient memory"* ]]
}

step8() {
    mkdir -p "$ROOT/k8s" "$ROOT/out"
    ensure_namespace "$DS_NS"
    write_toolkit_ds v1.16.2 128Mi
    kubectl apply -f "$ROOT/k8s/toolkit-ds.yaml"
    kubectl rollout status "ds/$DS" -n "$DS_NS" --timeout=120s
    poll 60 "DaemonSet $DS: desired 3, updated 3, ready 3" ds_all_ready

    # Only now, with all three Pods Ready, push the new image and the impossible request together.
    write_toolkit_ds v1.17.0 64Gi
    kubectl apply -f "$ROOT/k8s/toolkit-ds.yaml"
    poll 90 "DaemonSet $DS to stall (updated 1, ready 2, a Pod Pending on Insufficient memory)" ds_stalled

    local desired updated ready max_unavailable old_pods
    desired=$(kubectl get ds "$DS" -n "$DS_NS" -o jsonpath='{.status.desiredNumberScheduled}')
    updated=$(kubectl get ds "$DS" -n "$DS_NS" -o jsonpath='{.status.updatedNumberScheduled}')
    ready=$(kubectl get ds "$DS" -n "$DS_NS" -o jsonpath='{.status.numberReady}')
    max_unavailable=$(kubectl get ds "$DS" -n "$DS_NS" -o jsonpath='{.spec.updateStrategy.rollingUpdate.maxUnavailable}')
    old_pods=$(kubectl get pods -n "$DS_NS" -l "app=$DS" \
        -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | grep -c ':v1\.16\.2$' || true)
    cat >"$ROOT/out/rollout.txt" <<EOF
DESIRED=$desired
UPDATED=$updated
READY=$ready
OLD_IMAGE_PODS=$old_pods
MAX_UNAVAILABLE=$max_unavailable
BLOCKER=insufficient-memory
EOF
}

# --- main ------------------------------------------------------------------------------------------
for step in "${steps[@]}"; do
    CURRENT_STEP=$step
    log "start"
    "step$step"
    log "done"
done
