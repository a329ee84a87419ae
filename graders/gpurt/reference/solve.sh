#!/usr/bin/env bash
# Reference solution of the lab "gpurt" (labs/gpurt.md).
#
# Usage: solve.sh ROOT [STEP ...]
#   ROOT   where the learner's files go (the lab's /root/gpurt)
#   STEP   1..8; with none, every step runs in order.
# Cluster steps act on the cluster named by $KUBECONFIG with the kubectl on PATH.
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
mkdir -p "$ROOT"/{k8s,etc/conf.d,bin,fixtures,out}

ensure_namespace() { kubectl get namespace "$1" >/dev/null 2>&1 || kubectl create namespace "$1"; }

# --- step 1: the two RuntimeClasses ------------------------------------------------------------
step1() {
    ensure_namespace gpu-rt
    cat >"$ROOT/k8s/runtimeclasses.yaml" <<'YAML'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia-cdi
handler: nvidia-cdi
YAML
    kubectl apply -f "$ROOT/k8s/runtimeclasses.yaml"
}

# --- step 2: a mistyped handler still passes the API server and the scheduler ----------------------
step2() {
    cat >"$ROOT/k8s/runtimeclass-typo.yaml" <<'YAML'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia-typo
handler: nvidai
---
apiVersion: v1
kind: Pod
metadata:
  name: probe-typo
  namespace: gpu-rt
spec:
  runtimeClassName: nvidia-typo
  containers:
    - name: probe
      image: busybox:1.36
      command: ["true"]
YAML
    kubectl apply -f "$ROOT/k8s/runtimeclass-typo.yaml"
    kubectl wait pod/probe-typo -n gpu-rt --for=condition=PodScheduled --timeout=60s
    printf 'API_VALIDATES_HANDLER=no\nFAILS_AT=container-creation\nVISIBLE_TO=node\n' >"$ROOT/out/unvalidated.txt"
}

# --- step 3: overhead splits scheduling on two cpu-1 nodes ----------------------------------------
tight_node() { # NAME
    cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $1
    type: kwok
status:
  capacity: {cpu: "1", memory: 4Gi, pods: "110"}
  allocatable: {cpu: "1", memory: 4Gi, pods: "110"}
YAML
}

tight_pod() { # NAME NODE [RUNTIMECLASS]
    cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: gpu-rt
spec:
  nodeSelector:
    kubernetes.io/hostname: $2
${3:+  runtimeClassName: $3
}  containers:
    - name: work
      image: busybox:1.36
      resources:
        requests:
          cpu: 900m
YAML
}

step3() {
    { tight_node gpu-tight-a; echo ---; tight_node gpu-tight-b; } >"$ROOT/k8s/node-tight.yaml"
    kubectl apply -f "$ROOT/k8s/node-tight.yaml"
    kubectl wait node/gpu-tight-a node/gpu-tight-b --for=condition=Ready --timeout=60s
    {
        cat <<'YAML'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia-overhead
handler: nvidia
overhead:
  podFixed:
    cpu: 250m
    memory: 128Mi
---
YAML
        tight_pod fits gpu-tight-a
        echo ---
        tight_pod over gpu-tight-b nvidia-overhead
    } >"$ROOT/k8s/overhead.yaml"
    kubectl apply -f "$ROOT/k8s/overhead.yaml"
    kubectl wait pod/fits -n gpu-rt --for=jsonpath='{.status.phase}'=Running --timeout=60s
    kubectl wait pod/over -n gpu-rt --timeout=60s \
        --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=Unschedulable
}

# --- step 4: an imports glob that silently matches nothing ------------------------------------------
step4() {
    cat >"$ROOT/etc/config.toml" <<'TOML'
version = 2
imports = ["/etc/containerd/conf.d/*.conf"]

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
TOML
    cat >"$ROOT/etc/conf.d/99-nvidia.toml" <<'TOML'
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
TOML
    # The glob as containerd sees it: /etc/containerd is this lab's etc/.
    local matched
    matched=$(compgen -G "$ROOT/etc/conf.d/*.conf" | wc -l || true)
    printf 'GLOB=/etc/containerd/conf.d/*.conf\nMATCHED=%s\nDROPIN_EXISTS=yes\nLOADED_NVIDIA=no\n' "$matched" >"$ROOT/out/imports.txt"
}

# --- step 5: the same configuration in version 3 -------------------------------------------------------
step5() {
    cat >"$ROOT/etc/config-v3.toml" <<'TOML'
version = 3
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
TOML
    python3 -c "import tomllib,sys; tomllib.load(open(sys.argv[1],'rb'))" "$ROOT/etc/config-v3.toml"
}

# --- step 6: the crosscheck ----------------------------------------------------------------------------
step6() {
    cat >"$ROOT/bin/rc-crosscheck.sh" <<'SH'
#!/usr/bin/env bash
# Which handlers the cluster's RuntimeClasses need that the loaded containerd config lacks.
set -euo pipefail
if [[ $# -ge 1 ]]; then
    dump=$(cat "$1")
else
    dump=$(containerd config dump)
fi
handlers=$(kubectl get runtimeclass -o jsonpath='{range .items[*]}{.handler}{"\n"}{end}')
python3 -c '
import sys, tomllib
dump = tomllib.loads(sys.stdin.read())
loaded = set()
for plugin in ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"):
    runtimes = dump.get("plugins", {}).get(plugin, {}).get("containerd", {}).get("runtimes", {})
    loaded.update(runtimes)
missing = sorted({h for h in sys.argv[1].split() if h} - loaded)
for handler in missing:
    print(f"MISSING={handler}")
if missing:
    sys.exit(1)
print("OK")
' "$handlers" <<<"$dump"
SH
    chmod +x "$ROOT/bin/rc-crosscheck.sh"
}

# --- step 7: a default-runtime drop-in and its blast radius --------------------------------------------
step7() {
    cat >"$ROOT/etc/conf.d/50-default.toml" <<'TOML'
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
TOML
    printf 'DEFAULT_RUNTIME=nvidia\nAFFECTED=all\nNEEDS_RUNTIMECLASS=no\nBLAST_RADIUS=node\n' >"$ROOT/out/blast.txt"
}

# --- step 8: the checker on a partly loaded dump ------------------------------------------------------
step8() {
    cat >"$ROOT/fixtures/dump-node1.toml" <<'TOML'
# node1: every drop-in is written, but only runc and nvidia were loaded.
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
TOML
    "$ROOT/bin/rc-crosscheck.sh" "$ROOT/fixtures/dump-node1.toml" >"$ROOT/out/crosscheck.txt" || true
}

for step in "${steps[@]}"; do
    case "$step" in
        [1-8]) echo "gpurt[$step]: start" >&2; "step$step"; echo "gpurt[$step]: done" >&2 ;;
        *) echo "unknown step '$step' (expected 1..8)" >&2; exit 2 ;;
    esac
done
