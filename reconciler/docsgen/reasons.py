"""What each reason a user meets means and what to do about it.

The reasons themselves are the closed sets in `core/reasons.py`; the explanation is
written here, once. A member without an entry below fails
`tests/unit/docsgen/test_docs_reference.py`: add one, then run `python -m reconciler.docsgen`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.core.reasons import Notice, PodReason, VolumeNotice
from reconciler.core.translate.status import CONTAINER_CREATING, NOT_RUN_ON_RUNPOD, STATUS_UNKNOWN
from reconciler.docsgen.markdown import code, table

WAITS = "Pending, retried every tick"
WAITS_A_MINUTE = "Pending, retried once a minute"
FAILS = "Failed"


@dataclass(frozen=True)
class Advice:
    shows: str
    """Where and how the reason appears."""
    meaning: str
    what_to_do: str


POD_REASONS: dict[PodReason, Advice] = {
    PodReason.INVALID_ANNOTATION: Advice(
        WAITS,
        "A `runpod.io/*` annotation (on the pod or its Job) does not parse or is out of "
        "range, or RunPod does not know an id it names; the Event says which.",
        "Fix the annotation ([Annotations](annotations.md) gives each one's range).",
    ),
    PodReason.CREATE_CONTAINER_CONFIG_ERROR: Advice(
        WAITS,
        "A Secret or ConfigMap the pod's env needs does not exist.",
        "Create it; the next tick goes on.",
    ),
    PodReason.INVALID_IMAGE_NAME: Advice(
        WAITS,
        "The image is not a valid reference by the registry grammar "
        "(`[registry/]name[:tag][@digest]`); nothing is created.",
        "Fix the image name.",
    ),
    PodReason.GPU_CATALOG_UNAVAILABLE: Advice(
        WAITS,
        "RunPod's GPU catalog could not be read, so no GPU type can be chosen.",
        "Wait; check RunPod's status and the reconciler's log if it lasts.",
    ),
    PodReason.CUDA_VERSION_UNAVAILABLE: Advice(
        WAITS,
        "Some GPU types fit the pod, but RunPod's catalog lists none of them on hosts whose "
        "CUDA version is at or above the image's floor (`runpod.io/min-cuda-version`, else "
        "the image's tag); the message names the floor and the newest version listed.",
        "Wait for newer drivers, use an image built for an older CUDA, or lower the floor "
        "with the annotation if the image really starts on older hosts.",
    ),
    PodReason.UNSATISFIABLE_CPU_REQUEST: Advice(
        FAILS,
        "No CPU flavor could ever fit the pod's CPU and memory (the message names the largest "
        "offer), or the price cap, or it asks for what CPU instances lack (a persistent "
        "volume, the COMMUNITY cloud).",
        "Change the request, or give the pod a GPU (`nvidia.com/gpu`).",
    ),
    PodReason.GPU_REQUIRED: Advice(
        FAILS,
        "The pod asks for no GPU and the node runs such pods on nothing "
        "(`--pods-without-gpu=refuse`).",
        "Give the pod an `nvidia.com/gpu` limit, or run the reconciler with "
        "`--pods-without-gpu=cpu` (or `gpu`).",
    ),
    PodReason.UNSATISFIABLE_GPU_REQUEST: Advice(
        FAILS,
        "No GPU type could ever fit the pod (memory, count, price, the allowed types).",
        "Change the request: `runpod.io/required-gpu-memory`, `runpod.io/max-price`, "
        "`runpod.io/gpu-types` or the `nvidia.com/gpu` limit.",
    ),
    PodReason.BATCH_COMMAND_REQUIRED: Advice(
        FAILS,
        "A batch pod (`restartPolicy: Never` or `OnFailure`) without a `command`: its "
        "image's default command cannot be wrapped to report its exit code.",
        "Name the command ([batch pods](../concepts/how-it-works.md#batch-pods)).",
    ),
    PodReason.INVALID_POD_SPEC: Advice(
        WAITS + "; Failed when the spec can never work",
        "A pod the reconciler could not plan (e.g. an env entry without a name, no "
        "container); the others go on.",
        "Fix the pod spec; if it looks valid, it is a reconciler bug: report it with the "
        "log at debug level.",
    ),
    PodReason.CAPACITY_UNAVAILABLE: Advice(
        WAITS,
        "No GPU type that fits could be created right now: RunPod refused each candidate "
        "(400 or 403). Types refused lately are tried again when the catalog shows stock "
        "or after a back-off.",
        "Wait (until `--max-pending-time`), or allow more GPU types, data centers or a "
        "higher `runpod.io/max-price`.",
    ),
    PodReason.BUDGET_EXCEEDED: Advice(
        WAITS,
        "A create would pass `--max-instances` or `--max-hourly-spend`, or a namespace's "
        "cap; the Event names the cap and the figures.",
        "Raise the cap, or wait for other pods to finish.",
    ),
    PodReason.NODE_CORDONED: Advice(
        WAITS,
        "The virtual node is cordoned: no new instance until it is uncordoned. Running "
        "instances go on.",
        "`kubectl uncordon virtual-runpod`.",
    ),
    PodReason.NODE_TAINTED: Advice(
        WAITS,
        "The virtual node has a `NoSchedule`/`NoExecute` taint the pod does not tolerate.",
        "Remove the taint, or tolerate it in the pod.",
    ),
    PodReason.DAEMON_SET_POD_NOT_RUN: Advice(
        "Pending for good",
        "A DaemonSet's pod landed on the virtual node; a node agent is never run on a rented GPU.",
        "Keep the DaemonSet off the node with a node affinity "
        "([The virtual node](../concepts/virtual-node.md#daemonsets)).",
    ),
    PodReason.INSUFFICIENT_BALANCE: Advice(
        WAITS,
        "RunPod answered 402: the account has no balance.",
        "Top up; creates resume on the next tick.",
    ),
    PodReason.INVALID_RUNPOD_REQUEST: Advice(
        FAILS,
        "RunPod refused our request as invalid (422): a reconciler bug.",
        "Report it with the Event's message.",
    ),
    PodReason.CLAIM_NOT_BOUND: Advice(
        WAITS,
        "A PersistentVolumeClaim the pod mounts does not exist, or is not bound to a "
        "volume yet (a network-volume claim is provisioned on the next ticks).",
        "Create the claim; see its Events (`kubectl describe pvc`) if it stays Pending.",
    ),
    PodReason.UNSUPPORTED_VOLUMES: Advice(
        FAILS,
        "The pod mounts two network-volume claims, or one its container does not mount at "
        "an absolute path: a RunPod instance mounts one network volume.",
        "Use one network-volume claim per pod, mounted by the container.",
    ),
    PodReason.NETWORK_VOLUME_UNAVAILABLE: Advice(
        WAITS,
        "The network volume `runpod.io/network-volume-id` names is not in the account's "
        "list, RunPod's list could not be read, or nothing that fits the pod may be placed "
        "in the volume's data center (a pod runs only where its volume is).",
        "Fix the volume id, or allow the volume's data center (`runpod.io/datacenter-ids`, "
        "`--datacenter-ids`).",
    ),
    PodReason.FOREIGN_ID: Advice(
        "Pending, retried every tick (for `runpod.io/pod-id` an Event only: the pod is run "
        "as a new one)",
        "An id the pod or its Job writes names what is not this namespace's: "
        "`runpod.io/pod-id` an instance whose owner and pod tags are not this pod's (or a "
        "cluster member), `runpod.io/network-volume-id` a volume not made for one of this "
        "namespace's claims, `runpod.io/container-registry-auth-id` a credential neither "
        "made from this namespace's pull secrets nor allowed by `--registry-auth-ids`, or an "
        "ownerReference a Job UID that is no Job of this namespace. Nothing of it is read, "
        "mounted or changed.",
        "Remove the annotation (the reconciler writes `runpod.io/pod-id` itself); mount "
        "another namespace's data through a PersistentVolume an administrator makes; pull "
        "with the namespace's own imagePullSecrets.",
    ),
    PodReason.TEMPLATE_NOT_FOUND: Advice(
        WAITS_A_MINUTE,
        "RunPod has no template with the id `runpod.io/template-id` names (404).",
        "Fix the template id.",
    ),
    PodReason.RUNPOD_UNAUTHORIZED: Advice(
        WAITS_A_MINUTE,
        "RunPod refused the API key (401).",
        "Fix the key in the Secret (`RUNPOD_API_KEY`) and restart the reconciler.",
    ),
    PodReason.RUNPOD_REFUSED: Advice(
        WAITS_A_MINUTE,
        "RunPod refused the create with another 4xx; the Event carries its answer.",
        "Act on RunPod's message.",
    ),
    PodReason.INSTANCE_START_FAILED: Advice(
        "Pending while its instance is replaced (an Event per try); Failed after 3 places",
        "The pod's instance did not start: not running `--start-timeout` after its create, "
        "or RunPod's system lines showed a start that cannot succeed on that host (its CUDA "
        "driver older than the image needs, a GPU the driver cannot initialise). It is "
        "terminated and the pod placed again, leaving out the places that failed; the "
        "failure's message lists them.",
        "Usually nothing. If it fails: set `runpod.io/min-cuda-version` to what the image "
        "needs, raise `--start-timeout` for an image that is slow to pull, or pick other "
        "GPU types ([Starting](../guides/starting.md)).",
    ),
    PodReason.ERR_IMAGE_PULL: Advice(
        "Pending, retried every 5 minutes; Failed after `--max-pending-time`",
        "RunPod could not pull the image: it does not exist, or its registry refused the "
        "credentials. No other host would do better, so its instance was terminated and "
        "nothing bills while the pod waits; the message has RunPod's line.",
        "Fix the image name, or the registry credentials "
        "(`imagePullSecrets`, `runpod.io/container-registry-auth-id`).",
    ),
    PodReason.INSTANCE_LOST: Advice(
        FAILS,
        "The pod's instance vanished at RunPod.",
        "Nothing: the pod is finished; a Job makes a new one.",
    ),
    PodReason.INSTANCE_ERROR: Advice(
        FAILS,
        "RunPod reports the instance in ERROR.",
        "Nothing: the pod is finished; a Job makes a new one. `kubectl describe pod` "
        "shows RunPod's own lines.",
    ),
    PodReason.INSTANCE_STOPPED: Advice(
        FAILS,
        "The instance was stopped outside Kubernetes (RunPod's console or API).",
        "Delete the pod, or let its Job make a new one.",
    ),
    PodReason.EXIT_CODE_UNKNOWN: Advice(
        FAILS,
        "A batch instance stopped but its exit code could not be read within "
        "`--exit-code-timeout` (the log route kept failing or the marker was missing); "
        "the instance was terminated anyway and the log's last lines are in the "
        "container status.",
        "Check that the image has a POSIX `/bin/sh` and curl, wget or python3, and an "
        "entrypoint that executes its arguments.",
    ),
    PodReason.DEADLINE_EXCEEDED: Advice(
        FAILS,
        "`activeDeadlineSeconds` or `--max-pending-time` ran out.",
        "Raise it.",
    ),
    PodReason.UNOWNED_LOOKALIKE: Advice(
        WAITS,
        "An untagged instance that nothing of ours records is named as we would name "
        "this pod's: the pod waits rather than pay for a second instance.",
        "Delete that instance at RunPod, or put its owner tags back.",
    ),
    PodReason.CLUSTER_FORMING: Advice(
        WAITS,
        "The pod's Indexed Job asks for an Instant Cluster (`runpod.io/cluster`), and not "
        "all of its pods are on the virtual node yet: no member runs alone.",
        "Wait; if it lasts, see where the Job's other pods are (`kubectl get pods -l "
        "batch.kubernetes.io/job-name=<job>`).",
    ),
    PodReason.INVALID_CLUSTER_JOB: Advice(
        WAITS,
        "The pod asks for an Instant Cluster, but its Job cannot be one: not Indexed, "
        "parallelism unequal to completions, fewer than 2 or more than 250 pods, pods that "
        "differ, no GPU, a private image or a RunPod template. The message says which.",
        "Fix the Job ([Instant clusters](../concepts/how-it-works.md#instant-clusters) says "
        "what a cluster's Job needs), or drop the annotation.",
    ),
    PodReason.CLUSTER_MEMBER_FAILED: Advice(
        FAILS,
        "A member of the pod's Instant Cluster failed or vanished, or another pod of its "
        "gang ended or was deleted: the whole gang fails and its cluster is deleted.",
        "Nothing: the Job's backoffLimit retries the gang with a new cluster. Read the "
        "failed member's log (`kubectl logs`) for why.",
    ),
}

NOTICES: dict[Notice, Advice] = {
    Notice.CREATED_INSTANCE: Advice("Normal", "An instance was created for the pod.", "Nothing."),
    Notice.CREATED_CLUSTER: Advice(
        "Normal",
        "An Instant Cluster was created for the pod's gang (each of its pods gets the Event).",
        "Nothing.",
    ),
    Notice.ADOPTED_INSTANCE: Advice(
        "Normal",
        "An instance tagged for the pod was found and taken over (an earlier create whose "
        "answer was lost, or state rebuilt after the database was lost).",
        "Nothing.",
    ),
    Notice.COMPLETED: Advice(
        "Normal (Warning for a non-zero exit code)",
        "A batch pod's process ended; its exit code is in the container status.",
        "Nothing.",
    ),
    Notice.TERMINATING_INSTANCE: Advice(
        "Normal", "The pod's instance is being terminated, and why.", "Nothing."
    ),
    Notice.OFFLOADED: Advice(
        "Normal",
        "Offload mode bound the pod to the virtual node; the message names the trigger.",
        "Nothing.",
    ),
    Notice.TAGS_RESTORED: Advice(
        "Normal",
        "The instance's owner tags had been lost (its env was replaced); they were put "
        "back and the pod carries on.",
        "Nothing; avoid editing the instance's env in RunPod's console.",
    ),
    Notice.CHARGE_DIFFERS: Advice(
        "Warning",
        "RunPod charged more than 10 % away from list price times the instance's life: a "
        "wrong price, or an instance that ran longer than the reconciler knew.",
        "Compare with `reconciler cost --by pod`; look for an instance that outlived its pod.",
    ),
    Notice.RUNPOD_SYSTEM: Advice(
        "Normal",
        "RunPod's own line about the instance (image pull, start-up, stop, errors), "
        "stamped with the line's time.",
        "Nothing; a slow image pull shows here as it happens.",
    ),
    Notice.SERVICES_UNREACHABLE: Advice(
        "Warning",
        "The pod cannot reach some or all of the cluster's Services, and the cluster cannot "
        "reach it: its instance has no SSH the reconciler can use (no sshd, 22/tcp not "
        "published, the reconciler's key refused, no --ssh-key-file or --ssh-key-secret), "
        "more Service ports than --service-forwards-per-pod, or a port the instance "
        "already uses. The message says which.",
        "Use an image that starts sshd from PUBLIC_KEY (RunPod's do), raise "
        "--service-forwards-per-pod, or free the port named.",
    ),
}


CLAIM_NOTICES: dict[VolumeNotice, Advice] = {
    VolumeNotice.PROVISIONING_FAILED: Advice(
        "Warning, on the claim; it stays Pending",
        "The claim's network volume cannot be made as asked, told before RunPod is asked: "
        "a size outside RunPod's 10 to 4096 GB, a `parameters.type` other than RunPod's, "
        "no data center (none in the class, and no pod that uses the claim has an offer "
        "that names one), or a data center RunPod's catalog does not name. The message "
        "says which.",
        "Fix the claim or its StorageClass ([network volumes](../guides/network-volumes.md)), "
        "or set `runpod.io/datacenter-ids` on the pod that uses the claim.",
    ),
    VolumeNotice.PROVISIONED: Advice(
        "Normal, on the claim",
        "A network volume was made for the claim and bound to it as a PV; the message names "
        "the volume, its size and data center.",
        "Nothing: the claim's pods are created in that data center.",
    ),
    VolumeNotice.RESIZE_FAILED: Advice(
        "Warning, on the claim",
        "The claim asks for more storage than its volume has, and the volume cannot grow: "
        "past RunPod's 4096 GB, or a volume the reconciler did not make (never resized).",
        "Ask for at most 4096 GB, or resize a volume of your own in RunPod's console.",
    ),
    VolumeNotice.RESIZED: Advice(
        "Normal, on the claim",
        "The claim's volume was grown to the size it asks for (RunPod volumes never shrink).",
        "Nothing.",
    ),
}

CONTAINER_STATES: dict[str, Advice] = {
    CONTAINER_CREATING: Advice(
        "the container's waiting state",
        "No instance runs the pod yet, or its instance is starting, or running with its "
        "ports not ready; the message says which.",
        "Wait; a pod that also has a reason above shows why it waits.",
    ),
    "Completed": Advice(
        "the container's terminated state",
        "The pod's process exited 0 (the kubelet's own reason).",
        "Nothing.",
    ),
    "Error": Advice(
        "the container's terminated state",
        "The process exited non-zero, or the instance was terminated because the pod was "
        "deleted (the kubelet's own reason).",
        "Read the pod's log (`kubectl logs`).",
    ),
    NOT_RUN_ON_RUNPOD: Advice(
        "the waiting or terminated state of a pod's other containers",
        "A RunPod instance runs one container of the pod; the others are never run.",
        "Nothing; run the other containers in a pod of their own if they matter.",
    ),
    STATUS_UNKNOWN: Advice(
        "the container's terminated state",
        "The pod was deleted before any instance ran it (the kubelet's own reason).",
        "Nothing.",
    ),
}
"""The container states' reasons the pod's status shows (`core/translate/status.py`)."""

NODE_CONDITIONS: dict[str, Advice] = {
    "KubeletReady": Advice(
        "the node's Ready condition",
        "The reconciler beats the virtual node's heartbeat; the message says whether "
        "`kubectl logs` and exec reach its kubelet endpoint.",
        "Nothing. A node the heartbeat left is marked NotReady by Kubernetes itself.",
    ),
    **{
        reason: Advice(
            f"the node's {condition} condition (False)",
            "Always so: the virtual node has no memory, disk or process pressure of its own.",
            "Nothing.",
        )
        for condition, reason in (
            ("MemoryPressure", "KubeletHasSufficientMemory"),
            ("DiskPressure", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "KubeletHasSufficientPID"),
        )
    },
}
"""The virtual node's conditions' reasons (`core/node/virtual_node.py`)."""


def missing() -> list[str]:
    """Reasons of the code without an entry here."""
    return (
        [r.value for r in PodReason if r not in POD_REASONS]
        + [n.value for n in Notice if n not in NOTICES]
        + [n.value for n in VolumeNotice if n not in CLAIM_NOTICES]
    )


def documented() -> set[str]:
    """Every reason the page names."""
    return {
        *(r.value for r in POD_REASONS),
        *(n.value for n in NOTICES),
        *(n.value for n in CLAIM_NOTICES),
        *CONTAINER_STATES,
        *NODE_CONDITIONS,
    }


def page(_root: Path) -> str:
    problems = missing()
    if problems:
        raise KeyError(f"reasons without an explanation in {__name__}: {problems}")
    pod_rows = [(code(r.value), a.shows, a.meaning, a.what_to_do) for r, a in POD_REASONS.items()]
    notice_rows = [(code(n.value), a.shows, a.meaning, a.what_to_do) for n, a in NOTICES.items()]
    claim_rows = [
        (code(n.value), a.shows, a.meaning, a.what_to_do) for n, a in CLAIM_NOTICES.items()
    ]
    state_rows = [(code(r), a.shows, a.meaning, a.what_to_do) for r, a in CONTAINER_STATES.items()]
    node_rows = [(code(r), a.shows, a.meaning, a.what_to_do) for r, a in NODE_CONDITIONS.items()]
    return "\n".join(
        [
            "# Pod and Event reasons\n",
            "## Why a pod waits or failed\n",
            "What `kubectl get pod` shows in its STATUS column (`PodReason` in "
            "`reconciler/core/reasons.py`); each also appears as an Event on the pod. A "
            "pod that waits fails with its reason after `--max-pending-time`.\n",
            table(("reason", "pod", "meaning", "what to do"), pod_rows),
            "## Events about what was done\n",
            table(("reason", "type", "meaning", "what to do"), notice_rows),
            "## Events on a PersistentVolumeClaim\n",
            "The network-volume provisioner's Events on a claim of the StorageClass "
            "`runpod-network-volume` (`VolumeNotice`), named as Kubernetes' external "
            "provisioners name theirs.\n",
            table(("reason", "type", "meaning", "what to do"), claim_rows),
            "## Container states\n",
            "The reason of a container's state in the pod's status (`kubectl describe pod`).\n",
            table(("reason", "where", "meaning", "what to do"), state_rows),
            "## The virtual node's conditions\n",
            table(("reason", "where", "meaning", "what to do"), node_rows),
        ]
    )
