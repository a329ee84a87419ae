#!/usr/bin/env bash
# Reference solution of the example lab gpuquota: solve.sh ROOT [STEP ...], only the steps named (all by default).
set -euo pipefail
root=$1
shift
steps=" ${*:-1 2} "
mkdir -p "$root/k8s" "$root/out"

if [[ $steps == *" 1 "* ]]; then
    cat >"$root/k8s/trainer.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-a}
spec:
  tolerations: [{key: dedicated, value: gpu, effect: NoSchedule}]
  containers:
    - name: train
      image: registry.example/train:1
      resources: {limits: {nvidia.com/gpu: 1}}
YAML
    kubectl apply -f "$root/k8s/trainer.yaml"
    kubectl wait pod/trainer -n team-a --for=jsonpath='{.status.phase}'=Running --timeout=60s
fi

if [[ $steps == *" 2 "* ]]; then
    echo "FREE_GPUS=$(( $(kubectl get configmap quota -n team-a -o jsonpath='{.data.gpus}') - 1 ))" >"$root/out/free.txt"
fi
