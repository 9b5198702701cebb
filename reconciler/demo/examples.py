"""The example manifests the README and the docs show, and `reconciler demo --keep-running`
writes out.

One copy of the text: a test checks that every such block in them is these, byte for byte,
and that both reach Running in the demo.
"""

from __future__ import annotations

from pathlib import Path

# A pod the scheduler places on the virtual node: it selects the node's label and
# tolerates its taint, as pods for any virtual-kubelet node do.
GPU_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-notebook
  annotations:
    runpod.io/max-price: "1.00"            # USD/h for the whole pod
    runpod.io/required-gpu-memory: "24"    # GB per GPU
spec:
  nodeSelector:
    type: virtual-kubelet
  tolerations:
    - key: virtual-kubelet.io/provider
      operator: Equal
      value: runpod
      effect: NoSchedule
  containers:
    - name: notebook
      image: jupyter/base-notebook
      ports:
        - containerPort: 8888
      resources:
        limits:
          nvidia.com/gpu: 1
"""

# A Job whose pod runs on RunPod and ends there: a batch pod must name its command.
GPU_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: gpu-job
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        type: virtual-kubelet
      tolerations:
        - key: virtual-kubelet.io/provider
          operator: Equal
          value: runpod
          effect: NoSchedule
      containers:
        - name: main
          image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
          command: ["python", "-c", "import torch; print(torch.cuda.get_device_name())"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""

# An Indexed Job that runs as one RunPod Instant Cluster: rank i on member i.
TORCHRUN_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: torchrun
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 2
  template:
    metadata:
      annotations:
        runpod.io/cluster: "true"
    spec:
      restartPolicy: Never
      nodeSelector:
        type: virtual-kubelet
      tolerations:
        - key: virtual-kubelet.io/provider
          operator: Equal
          value: runpod
          effect: NoSchedule
      containers:
        - name: main
          image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
          command:
            - sh
            - -c
            - >-
              torchrun --nnodes=2 --nproc_per_node=1 --node_rank="$NODE_RANK"
              --master_addr="$MASTER_ADDR" --master_port=29500 train.py
          resources:
            limits:
              nvidia.com/gpu: 1
"""

# A claim of the shipped StorageClass and a pod that mounts it: the volume is made in
# the data center of the pod's best offer, and outlives the pod.
CHECKPOINTS = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: checkpoints
spec:
  storageClassName: runpod-network-volume
  accessModes: [ReadWriteMany]
  resources:
    requests:
      storage: 50G
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  nodeSelector:
    type: virtual-kubelet
  tolerations:
    - key: virtual-kubelet.io/provider
      operator: Equal
      value: runpod
      effect: NoSchedule
  containers:
    - name: main
      image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
      command: ["sleep", "infinity"]
      volumeMounts:
        - name: checkpoints
          mountPath: /checkpoints
      resources:
        limits:
          nvidia.com/gpu: 1
  volumes:
    - name: checkpoints
      persistentVolumeClaim:
        claimName: checkpoints
"""

EXAMPLES = {
    "gpu-pod.yaml": GPU_POD,
    "gpu-job.yaml": GPU_JOB,
    "torchrun-job.yaml": TORCHRUN_JOB,
    "checkpoints.yaml": CHECKPOINTS,
}


def write_examples(directory: Path) -> dict[str, Path]:
    """Write every example into `directory`; returns the paths by file name."""
    paths = {}
    for name, text in EXAMPLES.items():
        paths[name] = directory / name
        paths[name].write_text(text)
    return paths
