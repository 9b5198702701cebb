"""Every reason the reconciler gives, as closed sets (docs/architecture.md §2, Reasons).

The planner, the executor, the Events, the metrics and the tests all name reasons by
these members, never by their text: rewording a message can then never silently change
what a metric counts or what a test checks. Code that branches on a reason matches every
member and ends in `typing.assert_never`, so a new member cannot be forgotten.
"""

from __future__ import annotations

import enum


class PodReason(enum.StrEnum):
    """Why a pod waits for an instance, or why it failed.

    The value is what `kubectl get pod` shows in its STATUS column and the reason of the
    pod's Event, so it is CamelCase like the kubelet's own reasons. A waiting pod is
    retried every tick and fails with the same reason after `max_pending_time`.
    """

    # Translation: the pod cannot be turned into a create request as it stands.
    INVALID_ANNOTATION = "InvalidAnnotation"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    INVALID_IMAGE_NAME = "InvalidImageName"
    GPU_CATALOG_UNAVAILABLE = "GPUCatalogUnavailable"
    UNSATISFIABLE_GPU_REQUEST = "UnsatisfiableGPURequest"
    UNSATISFIABLE_CPU_REQUEST = "UnsatisfiableCPURequest"
    GPU_REQUIRED = "GPURequired"
    """The pod asks for no GPU and this node runs none such (--pods-without-gpu=refuse)."""
    BATCH_COMMAND_REQUIRED = "BatchCommandRequired"
    INVALID_POD_SPEC = "InvalidPodSpec"
    # Admission and RunPod's answers to a create.
    CAPACITY_UNAVAILABLE = "RunPodCapacityUnavailable"
    BUDGET_EXCEEDED = "BudgetExceeded"
    NODE_CORDONED = "NodeCordoned"
    """The virtual node is cordoned: no new instance until it is uncordoned."""
    NODE_TAINTED = "NodeTainted"
    """The virtual node has a NoSchedule/NoExecute taint the pod does not tolerate."""
    DAEMON_SET_POD_NOT_RUN = "DaemonSetPodNotRun"
    """A DaemonSet's pod on the virtual node: never run, it waits for good
    (core.pods.daemonsets)."""
    INSUFFICIENT_BALANCE = "InsufficientBalance"
    INVALID_RUNPOD_REQUEST = "InvalidRunPodRequest"
    CLAIM_NOT_BOUND = "PersistentVolumeClaimNotBound"
    """A claim the pod mounts is missing or not bound to a volume yet: the pod waits."""
    UNSUPPORTED_VOLUMES = "UnsupportedVolumes"
    """Volumes RunPod cannot mount as asked (two network volumes, no mount path)."""
    NETWORK_VOLUME_UNAVAILABLE = "NetworkVolumeUnavailable"
    """The network volume the pod mounts is not in the account's list (or the list could
    not be read): no create names it, so no candidate is spent on a sure refusal."""
    FOREIGN_ID = "ForeignIdRefused"
    """An id the pod writes (runpod.io/pod-id, network-volume-id,
    container-registry-auth-id, its Job's UID) names what is not its namespace's
    (core.tenancy): refused, nothing of it used or changed."""
    # Definite refusals of a create (docs/architecture.md §4, Candidates;
    # core/capacity/refusals.py): nothing was created; retried once a minute rather than
    # every tick, and failed with the reason at max_pending_time.
    TEMPLATE_NOT_FOUND = "TemplateNotFound"
    RUNPOD_UNAUTHORIZED = "RunPodUnauthorized"
    RUNPOD_REFUSED = "RunPodRefused"
    # What happened to a pod's instance.
    INSTANCE_LOST = "InstanceLost"
    INSTANCE_ERROR = "InstanceError"
    INSTANCE_STOPPED = "InstanceStopped"
    EXIT_CODE_UNKNOWN = "ExitCodeUnknown"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    # An untagged instance nothing of ours records is named like the pod's own: waiting
    # rather than paying for a second instance.
    UNOWNED_LOOKALIKE = "UnownedLookalike"
    # Gangs: an Indexed Job run as one Instant Cluster (core/clusters.py).
    CLUSTER_FORMING = "ClusterForming"
    """Waiting until every pod of the Job is on the node; no member runs alone."""
    INVALID_CLUSTER_JOB = "InvalidClusterJob"
    """The pod asks for a cluster, but its Job cannot be one (core/capacity/refusals.py)."""
    CLUSTER_MEMBER_FAILED = "ClusterMemberFailed"
    """A member of the pod's cluster failed, rank 0 exited non-zero, or a pod of its gang
    went: the gang fails."""

    @classmethod
    def parse(cls, value: str | None) -> PodReason | None:
        """A stored reason; None for none, and for one this version does not know (a
        newer version wrote it): the pod is then treated as having no reason."""
        try:
            return None if value is None else cls(value)
        except ValueError:
            return None


class Notice(enum.StrEnum):
    """Events about what the reconciler did with a pod (Normal, except a failed process)."""

    CREATED_INSTANCE = "CreatedInstance"
    CREATED_CLUSTER = "CreatedCluster"
    ADOPTED_INSTANCE = "AdoptedInstance"
    COMPLETED = "Completed"
    TERMINATING_INSTANCE = "TerminatingInstance"
    OFFLOADED = "OffloadedToRunPod"
    TAGS_RESTORED = "TagsRestored"
    CHARGE_DIFFERS = "ChargeDiffersFromListPrice"
    """RunPod charged more than 10% away from list price times the instance's life."""
    RUNPOD_SYSTEM = "RunPodSystem"
    """RunPod's own line about the instance (image pull, start-up, stop, errors)."""
    SERVICES_UNREACHABLE = "ServicesUnreachable"
    """Some or all of the cluster's Services are not reachable from the pod, and why."""


class VolumeNotice(enum.StrEnum):
    """Events on a PersistentVolumeClaim of ours (the external provisioner's reasons)."""

    PROVISIONING_FAILED = "ProvisioningFailed"
    PROVISIONED = "ProvisioningSucceeded"
    RESIZE_FAILED = "VolumeResizeFailed"
    RESIZED = "VolumeResizeSuccessful"


EventReason = PodReason | Notice
"""The reason of an Event on a pod."""


class TerminateReason(enum.Enum):
    """Why an instance is deleted. The human wording travels beside it (`Terminate.detail`)."""

    DUPLICATE = "duplicate"
    """A second instance for one pod, past the create grace: the one the pod's
    annotation names (else the mapped, else the oldest one) stays."""
    ORPHAN = "orphan"
    """Its pod is gone, it was seen so on two ticks and is past the grace period."""
    POD_DELETED = "pod-deleted"
    """The pod is being deleted: the instance goes first, then the pod object."""
    POD_ENDED = "pod-ended"
    """The pod reached Succeeded or Failed by itself."""
    PROCESS_ENDED = "process-ended"
    """A batch pod's process exited; its exit code is recorded."""
    POD_FAILED = "pod-failed"
    """The reconciler failed the pod (a `PodReason`)."""
    ALREADY_DECIDED = "already-decided"
    """The row says terminating or finished, yet the instance is still listed: again."""
    LEAK = "leak"
    """RunPod billed it for hours after its pod ended (the billing audit): again, loudly."""


class OffloadTrigger(enum.Enum):
    """Why offload mode bound a pod to the virtual node (docs/architecture.md §2)."""

    FORCED = "forced"
    """`runpod.io/offload: "true"` on the pod or its Job."""
    WAITED = "waited"
    """Unschedulable for longer than the pod's offload wait."""
    OVERFLOW = "overflow"
    """More managed pods unschedulable than `pending_threshold`."""
