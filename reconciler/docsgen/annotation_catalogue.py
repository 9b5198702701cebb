"""Every annotation the reconciler reads or writes, with its type, range and meaning.

The names and bounds are the constants the code reads them with; the meaning is written
here, once. A `runpod.io/...` name in the code that this catalogue lacks fails
`tests/unit/docsgen/test_docs_reference.py`: add an entry below, then run
`python -m reconciler.docsgen`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.kube.leases import CREATES_HELD_ANNOTATION
from reconciler.core.config import MAX_DISK_GB, YEAR
from reconciler.core.domain import Cloud
from reconciler.core.money import charges, namespace_caps
from reconciler.core.pods import offload, podinfo
from reconciler.core.resources import clusters, volume_objects
from reconciler.core.translate import annotations as ann
from reconciler.core.translate import service_links
from reconciler.core.translate.disks import DEFAULT_MOUNT_PATH, MIN_PERSISTENT_GB
from reconciler.core.translate.gpus import MAX_GPU_MEMORY_GB
from reconciler.core.translate.ports import HTTP_PORTS
from reconciler.docsgen.markdown import code, table


@dataclass(frozen=True)
class Annotation:
    name: str
    value: str
    """Its type and accepted range."""
    meaning: str


_ID = "a RunPod id: 1 to 128 printable characters, no spaces"
_LIST = (
    f"comma-separated, at most {ann.MAX_LIST_ITEMS} items of 1 to {ann.MAX_ITEM_LENGTH} "
    "printable characters"
)
_FLAG = '`"true"` or `"false"`'

ON_PODS = (
    Annotation(
        ann.MANAGED,
        _FLAG + " (also as a label on the Job)",
        "`true`: offload mode may bind the pod to the virtual node when the cluster cannot "
        "place it.",
    ),
    Annotation(
        ann.OFFLOAD,
        _FLAG,
        "`true`: bind it now (forced); `false`: only if the scheduler puts it there.",
    ),
    Annotation(
        offload.MAX_PENDING_TIME_BEFORE_OFFLOAD,
        f"whole seconds (ASCII digits), 0 to {int(YEAR)}",
        "How long the pod may be unschedulable before it is offloaded; overrides "
        "`--max-pending-time-before-offload` for this pod or Job.",
    ),
    Annotation(
        ann.GPU_TYPES,
        _LIST,
        "Ordered allow-list of GPU type ids or names.",
    ),
    Annotation(
        ann.CPU_FLAVORS,
        _LIST,
        "Ordered allow-list of CPU flavor ids or names, for a pod that gets a CPU instance "
        "(no `nvidia.com/gpu`, `--pods-without-gpu=cpu`).",
    ),
    Annotation(
        ann.REQUIRED_GPU_MEMORY,
        f"whole GB (ASCII digits), 1 to {MAX_GPU_MEMORY_GB}",
        "Least memory per GPU.",
    ),
    Annotation(
        ann.MIN_CUDA_VERSION,
        "a CUDA version as `major.minor` (ASCII digits), like `12.4`",
        "Oldest CUDA version the image starts on (its `NVIDIA_REQUIRE_CUDA`); overrides "
        "the version the image's tag names (`cuda12.4`, `cu124`: "
        "[Starting](../guides/starting.md)). The create accepts only hosts at or above it "
        "(`gpu.allowedCudaVersions`), and only GPU types with such hosts are offered.",
    ),
    Annotation(
        ann.MAX_PRICE,
        f"USD/h, above 0 and at most {ann.MAX_PRICE_USD:g}: plain ASCII digits, at most 9 decimals",
        "Most the whole pod may cost per hour, its GPU and its disks (default `--max-gpu-price`).",
    ),
    Annotation(
        ann.CLOUD_TYPE,
        "one of " + ", ".join(code(c.value) for c in Cloud),
        "RunPod's cloud tier (default `--cloud-type`).",
    ),
    Annotation(
        ann.DATACENTER_IDS,
        _LIST,
        "Data centers the instance may use, intersected with `--datacenter-ids`; checked "
        "against the GPU catalog before any create.",
    ),
    Annotation(
        ann.PORTS,
        f"at most {ann.MAX_LIST_ITEMS} `port/protocol` items, comma-separated: port 1 to "
        '65535, protocol `http` or `tcp`, no port twice; `""` exposes nothing',
        "The ports to publish, e.g. `8888/http,22/tcp`. Without it: the container's TCP "
        "ports, as `http` for "
        + ", ".join(str(p) for p in sorted(HTTP_PORTS))
        + " and `tcp` for the others (UDP is skipped).",
    ),
    Annotation(ann.TEMPLATE_ID, _ID, "A RunPod template to create the instance from."),
    Annotation(ann.TEMPLATE_ID_LEGACY, _ID, f"The older spelling of `{ann.TEMPLATE_ID}`."),
    Annotation(
        ann.CONTAINER_DISK_GB,
        f"whole GB (ASCII digits), 1 to {MAX_DISK_GB}",
        "Container disk (default `--container-disk-gb`).",
    ),
    Annotation(
        ann.VOLUME_GB,
        f"whole GB (ASCII digits), {MIN_PERSISTENT_GB} to {MAX_DISK_GB}",
        f"A persistent volume on the instance's host, at `{ann.VOLUME_MOUNT_PATH}`.",
    ),
    Annotation(
        ann.VOLUME_MOUNT_PATH,
        "an absolute path of printable characters, at most 4096",
        f"Where the volume is mounted (default `{DEFAULT_MOUNT_PATH}`).",
    ),
    Annotation(
        ann.NETWORK_VOLUME_ID,
        _ID,
        "A network volume the reconciler made for one of the pod's namespace's claims, to "
        f"mount; not together with `{ann.VOLUME_GB}`. Any other volume is mounted through a "
        "PersistentVolume an administrator makes.",
    ),
    Annotation(
        ann.CONTAINER_REGISTRY_AUTH_ID,
        _ID,
        "A RunPod registry credential for the image: one `--registry-auth-ids` allows, or one "
        "made from the pod's own `imagePullSecrets`; without it, one is made from them.",
    ),
    Annotation(
        ann.DEFAULT_CONTAINER,
        "a container name of the pod",
        "Which container runs on RunPod when the pod has several (Kubernetes' own "
        "annotation; the pod's only, not its Job's). Without it: the first that is not a "
        "known sidecar.",
    ),
    Annotation(
        clusters.CLUSTER,
        '`"true"` (on the pod template of an Indexed Job)',
        f"Run all the Job's pods together as one RunPod Instant Cluster: completions "
        f"{clusters.MIN_PODS} to {clusters.MAX_PODS}, parallelism equal to completions, "
        "index i on the member of rank i "
        "([Instant clusters](../concepts/how-it-works.md#instant-clusters)).",
    ),
)

ON_PODS_ONLY = (
    Annotation(
        service_links.SERVICES_ANNOTATION,
        "comma-separated `namespace/name` entries",
        "Services of other namespaces the pod reaches by name, each only if its "
        "`runpod.io/reachable-from-namespaces` lists the pod's namespace "
        "([Services both ways](../guides/networking.md)). Read from the pod only.",
    ),
)

ON_SERVICES = (
    Annotation(
        service_links.REACHABLE_FROM,
        "comma-separated namespace names, or `*`",
        "Pods on RunPod of these namespaces may reach this Service when they name it in "
        "`runpod.io/services`: the traffic leaves from the reconciler, past this "
        "namespace's NetworkPolicies, so the Service's owner consents.",
    ),
)

ON_NAMESPACES = (
    Annotation(
        namespace_caps.MAX_HOURLY_SPEND_ANNOTATION,
        f"USD/h, 0 to {namespace_caps.MOST_HOURLY_SPEND}: ASCII digits, at most 6 decimals",
        "Cap on the list prices of the namespace's live instances, on top of "
        "`--max-hourly-spend`. A value that does not parse or is out of range holds the "
        "namespace's creates back, with a reason naming the annotation and the range.",
    ),
    Annotation(
        namespace_caps.MAX_INSTANCES_ANNOTATION,
        f"a whole number, 0 to {namespace_caps.MOST_INSTANCES}",
        "Cap on the namespace's live instances, on top of `--max-instances`.",
    ),
)

WRITTEN = (
    Annotation(
        podinfo.POD_ID_ANNOTATION,
        "a RunPod pod id",
        "The pod's instance (read back only if RunPod's record tags it as this pod's).",
    ),
    Annotation(ann.COST_PER_HR, "USD/h", "The instance's list price."),
    Annotation(ann.GPU_TYPE, "a GPU type id", "The instance's GPU type."),
    Annotation(ann.DATACENTER, "a data center id", "Where the instance runs."),
    Annotation(ann.PUBLIC_IP, "an IP address", "The instance's public address, once known."),
    Annotation(
        ann.PORT_MAPPINGS,
        "comma-separated `port/protocol->endpoint`",
        "The public endpoints of the instance's ports: RunPod's proxy URL for `http`, "
        "the public address and port for `tcp`. For people: exec never reads it (it asks "
        "RunPod's record of the instance).",
    ),
    Annotation(
        charges.SPEND_ANNOTATION,
        "USD",
        "What RunPod charged for the pod so far, updated after each hourly billing read.",
    ),
    Annotation(
        clusters.RANK,
        "a whole number",
        "A gang pod's rank in its Instant Cluster (RunPod's NODE_RANK): its completion index.",
    ),
    Annotation(clusters.CLUSTER_ID, "a RunPod cluster id", "A gang pod's Instant Cluster."),
)

ON_CLAIMS = (
    Annotation(
        volume_objects.PROVISIONING_FINALIZER,
        "a finalizer",
        "Holds a claim of ours from before its network volume is asked for until a PV "
        "names it, so that a claim deleted meanwhile (even across a crash) stays until "
        "its volume has its PV and the reclaim policy can act "
        "([network volumes](../guides/network-volumes.md#deleting)).",
    ),
    Annotation(
        volume_objects.VOLUME_NAME_ANNOTATION,
        "a RunPod network volume name",
        "The name of the volume asked for the claim (`runpod-reconciler-<owner "
        "digest>-pvc-<claim UID>`): which reconciler holds it, when several serve one "
        "cluster.",
    ),
    Annotation(
        volume_objects.RECLAIM_ANNOTATION,
        "`Delete` or `Retain`",
        "The claim's StorageClass's reclaim policy when its volume was asked for: the "
        "policy its PV gets, even if the class is gone by then.",
    ),
    Annotation(
        volume_objects.REQUESTED_AT_ANNOTATION,
        "an RFC 3339 time",
        "When the claim's volume was last asked for (POSTed): while this is younger "
        "than `--create-grace-time`, a volume RunPod's lagging list does not show yet "
        "is waited for, not asked for again.",
    ),
)

ON_THE_WRITER_LEASE = (
    Annotation(
        CREATES_HELD_ANNOTATION,
        "a time (RFC 3339, on RunPod's clock)",
        "Until when the writer that holds or next takes the node's writer Lease "
        "(`<node>-writer` in `kube-node-lease`) starts no create: a dead writer's create "
        "may still land or lag in RunPod's list (for up to `--create-grace-time`), and is "
        "adopted by its tags rather than made twice "
        "([one writer per virtual node](../concepts/how-it-works.md#one-writer-per-virtual-node)).",
    ),
)

# Kubernetes' own annotations the reconciler reacts to.
OTHERS = (
    Annotation(podinfo.MIRROR_ANNOTATION, "any", "A mirror pod: ignored, never run on RunPod."),
    Annotation(
        clusters.COMPLETION_INDEX,
        "a whole number",
        "The Job controller's index of an Indexed Job's pod: a gang pod runs on the member "
        "of that rank.",
    ),
    Annotation(
        volume_objects.PROVISIONER,
        "a StorageClass's `provisioner`",
        "Not an annotation but the provisioner name the reconciler serves: claims of such "
        "a class become RunPod network volumes, and the PV controller names it in a "
        "claim's `volume.kubernetes.io/storage-provisioner` when the claim is ours to "
        "provision ([network volumes](../guides/network-volumes.md)).",
    ),
)


def every_name() -> set[str]:
    return {
        a.name
        for a in (
            *ON_PODS,
            *ON_PODS_ONLY,
            *ON_SERVICES,
            *ON_NAMESPACES,
            *WRITTEN,
            *ON_CLAIMS,
            *ON_THE_WRITER_LEASE,
            *OTHERS,
        )
    }


def page(_root: Path) -> str:
    header = ("annotation", "value", "meaning")

    def rows(group: tuple[Annotation, ...]) -> list[tuple[str, str, str]]:
        return [(code(a.name), a.value, a.meaning) for a in group]

    return "\n".join(
        [
            "# Annotations\n",
            "## On a pod or its Job\n",
            "The pod's annotation is read first, then its owning Job's, so a Job can be "
            "annotated once. A value that does not parse or is out of range never turns "
            "into a default: the pod waits with `InvalidAnnotation`, and the Event names "
            "the annotation and the accepted range. The GPU count is the container's "
            "`nvidia.com/gpu` limit (default 1).\n",
            table(header, rows(ON_PODS)),
            "## On a pod only\n",
            table(header, rows(ON_PODS_ONLY)),
            "## On a Service\n",
            table(header, rows(ON_SERVICES)),
            "## On a Namespace\n",
            "Read (one GET, cached 60 s) only while one of the namespace's pods waits for "
            "a create; a create beyond a cap waits with `BudgetExceeded`.\n",
            table(header, rows(ON_NAMESPACES)),
            "## Written by the reconciler on the pod\n",
            table(header, rows(WRITTEN)),
            "## Written by the reconciler on a PersistentVolumeClaim\n",
            table(header, rows(ON_CLAIMS)),
            "## Written by the reconciler on the node's writer Lease\n",
            table(header, rows(ON_THE_WRITER_LEASE)),
            "## Kubernetes' own\n",
            table(header, rows(OTHERS)),
        ]
    )
