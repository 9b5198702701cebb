"""The campaign's view of the two simulated worlds: start them, act on them, look at them.

`SimHost` starts `simhost.py` as a process and talks to it over HTTP only: the RunPod
simulator's `/_sim/` admin API and the Kubernetes control server. `Snapshot` is one
look at both worlds, with the derived facts the invariants are about: the owned
instances of each pod UID, orphans, duplicates and pods that wait.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from reconciler.core.contract import GANG_ENV, OWNER_ENV, POD_UID_ENV
from reconciler.core.pods.podinfo import CLUSTER_ANNOTATION
from reconciler.core.reasons import PodReason
from reconciler.core.resources.volume_objects import (
    CSI_DRIVER,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    size_gb,
    volume_name,
)

API_KEY = "chaos-key"
TOKEN = "chaos-token"
SIMHOST = Path(__file__).with_name("simhost.py")
TOLERATION = {"key": "virtual-kubelet.io/provider", "operator": "Exists"}
PRIVATE_REGISTRY = "ghcr.io"
SHIPPED_STORAGE = Path(__file__).parents[2] / "deploy" / "common" / "storageclass.yaml"
SHIPPED_CLASS = "runpod-network-volume"
IMMEDIATE_CLASS = "runpod-network-volume-immediate"
RETAIN_CLASS = "runpod-network-volume-retain"
VOLUME_DATACENTER = "EU-RO-1"

Json = dict[str, Any]


class SimHost:
    """Both simulators in a subprocess; every call goes over loopback HTTP."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self._process: subprocess.Popen[str] | None = None
        self._http = requests.Session()
        self.runpod_url = self.kube_url = self.control_url = ""

    def start(self) -> SimHost:
        with open(self.workdir / "simhost.log", "w") as log:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    str(SIMHOST),
                    "--runpod-key",
                    API_KEY,
                    "--kube-token",
                    TOKEN,
                    "--kubeconfig-out",
                    str(self.kubeconfig),
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self._process.stdout is not None
        urls = json.loads(self._process.stdout.readline())
        self.runpod_url, self.kube_url, self.control_url = (
            urls["runpod"],
            urls["kube"],
            urls["control"],
        )
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None
        self._http.close()

    # --- RunPod admin ----------------------------------------------------------------

    def runpod(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        """`missing_ok`: a user acting on an instance that is already gone does nothing."""
        response = self._http.request(
            method, f"{self.runpod_url}/_sim/{path}", json=body, timeout=10
        )
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RuntimeError(f"{method} /_sim/{path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def runpod_exit(self, instance_id: str, code: int) -> bool:
        """The instance's main process exits with `code`; False if it is gone or runs no
        process (not RUNNING: 400)."""
        response = self._http.post(
            f"{self.runpod_url}/_sim/pods/{instance_id}/exit", json={"code": code}, timeout=10
        )
        if response.status_code >= 500:
            raise RuntimeError(f"exit {instance_id}: {response.status_code} {response.text}")
        return response.status_code < 400

    def instances(self) -> list[Json]:
        return list(self.runpod("GET", "state")["pods"])

    def runpod_state(self) -> Json:
        """Every instance and every network volume of the account, as served now."""
        return dict(self.runpod("GET", "state"))

    def runpod_requests(self) -> list[Json]:
        return list(self.runpod("GET", "requests"))

    # --- Kubernetes control ----------------------------------------------------------

    def control(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, f"{self.control_url}/{path}", json=body, timeout=10)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} /{path}: {response.status_code} {response.text}")
        return response.json()

    def ensure_namespace(self, name: str) -> None:
        self.control(
            "PUT",
            "objects/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )

    def put_pull_secret(self, namespace: str, name: str, password: str) -> None:
        """An imagePullSecret for `PRIVATE_REGISTRY`: each password is a credential."""
        auths = {PRIVATE_REGISTRY: {"username": "chaos", "password": password}}
        config = base64.b64encode(json.dumps({"auths": auths}).encode()).decode()
        self.control(
            "PUT",
            "objects/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": name, "namespace": namespace},
                "data": {".dockerconfigjson": config},
            },
        )

    def annotate_namespace(self, name: str, annotations: dict[str, str]) -> None:
        self.control(
            "PUT",
            "objects/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "annotations": annotations},
            },
        )

    def create_pod(self, manifest: Json) -> Json:
        return dict(self.control("POST", "pods", manifest))

    def delete_pod(self, namespace: str, name: str, grace: int) -> None:
        """A user's delete; a pod already gone (its Job or the reconciler removed it since
        the user looked) is as good as deleted, as for `kubectl delete --ignore-not-found`."""
        response = self._http.request(
            "DELETE", f"{self.control_url}/pods/{namespace}/{name}?grace={grace}", timeout=10
        )
        if response.status_code not in (200, 404):
            raise RuntimeError(
                f"DELETE pods/{namespace}/{name}: {response.status_code} {response.text}"
            )

    def create_job(self, manifest: Json) -> Json:
        """A Job; the simulator's Job controller makes an Indexed Job's pods at once."""
        return dict(self.control("PUT", "objects/jobs", manifest))

    def delete_job(self, namespace: str, name: str) -> None:
        self.control("DELETE", f"jobs/{namespace}/{name}")

    def pods(self) -> list[Json]:
        return list(self.control("GET", "pods"))

    def objects(self, plural: str) -> list[Json]:
        return list(self.control("GET", f"objects/{plural}"))

    def put_object(self, plural: str, body: Json) -> Json:
        return dict(self.control("PUT", f"objects/{plural}", body))

    def patch_object(self, plural: str, namespace: str, name: str, patch: Json) -> bool:
        """A user's merge patch (`kubectl patch`); False when the API refused it."""
        response = self._http.request(
            "PATCH",
            f"{self.control_url}/objects/{plural}/{namespace}/{name}",
            json=patch,
            timeout=10,
        )
        return response.status_code == 200

    def delete_object(self, plural: str, namespace: str, name: str) -> None:
        """A user's delete (`kubectl delete --ignore-not-found`): finalizers honoured."""
        response = self._http.request(
            "DELETE", f"{self.control_url}/objects/{plural}/{namespace}/{name}", timeout=10
        )
        if response.status_code not in (200, 404):
            raise RuntimeError(
                f"DELETE {plural}/{namespace}/{name}: {response.status_code} {response.text}"
            )

    def pod_uids(self, namespace: str) -> dict[str, str]:
        """{name: uid} of every pod of the namespace a write reached, gone ones too."""
        return dict(self.control("GET", f"pod-uids/{namespace}"))

    def kube_fault(self, method: str, path: str, status: int, count: int) -> None:
        self.control(
            "POST", "faults", {"method": method, "path": path, "status": status, "count": count}
        )

    def kube_requests(self) -> list[list[Any]]:
        return list(self.control("GET", "requests"))

    def kube_request_count(self) -> int:
        return int(self.control("GET", "requests/count"))


@contextmanager
def sim_host(workdir: Path) -> Iterator[SimHost]:
    host = SimHost(workdir).start()
    try:
        yield host
    finally:
        host.stop()


def pod_manifest(
    namespace: str,
    name: str,
    node: str,
    batch: bool,
    pull_secret: str | None = None,
    claim: str | None = None,
) -> Json:
    """A pod of the virtual node; with `pull_secret`, its image is private (pulled with a
    registry credential the reconciler makes); with `claim`, it mounts that claim at
    /data and asks for the data center the claim's volume is made in."""
    command = ["python", "train.py"] if batch else ["python", "-m", "http.server", "8000"]
    container = {
        "name": "main",
        "image": f"{PRIVATE_REGISTRY}/chaos/train:1" if pull_secret else "python:3.11",
        "command": command,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    spec: Json = {
        "nodeName": node,
        "restartPolicy": "Never" if batch else "Always",
        "containers": [container],
        "tolerations": [TOLERATION],
    }
    if pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret}]
    metadata: Json = {"name": name, "namespace": namespace}
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        metadata["annotations"] = {"runpod.io/datacenter-ids": VOLUME_DATACENTER}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def storage_classes() -> list[Json]:
    """The shipped class (WaitForFirstConsumer, Delete: its data center is the first
    consumer's) and two variants: Immediate with Delete, WaitForFirstConsumer with
    Retain. All allow expansion."""
    shipped = next(
        doc
        for doc in yaml.safe_load_all(SHIPPED_STORAGE.read_text())
        if doc["kind"] == "StorageClass"
    )
    now = {
        **copy.deepcopy(shipped),
        "metadata": {"name": IMMEDIATE_CLASS},
        "volumeBindingMode": "Immediate",
        "parameters": {"dataCenter": VOLUME_DATACENTER},
    }
    retain = {
        **copy.deepcopy(shipped),
        "metadata": {"name": RETAIN_CLASS},
        "reclaimPolicy": "Retain",
    }
    return [shipped, now, retain]


def csi_driver() -> Json:
    return next(
        doc for doc in yaml.safe_load_all(SHIPPED_STORAGE.read_text()) if doc["kind"] == "CSIDriver"
    )


def claim_manifest(namespace: str, name: str, storage_class: str, size: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": storage_class,
        },
    }


def gang_manifest(namespace: str, name: str, node: str, size: int = 2) -> Json:
    """An Indexed Job of `size` pods on the virtual node, run as one Instant Cluster."""
    container = {
        "name": "main",
        "image": "python:3.11",
        "command": ["torchrun", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    template = {
        "metadata": {"annotations": {CLUSTER_ANNOTATION: "true"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [container],
            "tolerations": [TOLERATION],
        },
    }
    spec = {
        "completionMode": "Indexed",
        "completions": size,
        "parallelism": size,
        "backoffLimit": 2,
        "template": template,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


# --- one look at both worlds ------------------------------------------------------------


@dataclass
class Snapshot:
    """Both worlds at one moment, reduced to what the invariants need."""

    owner: str
    node: str
    pods: dict[str, Json]
    """Pods on our node, by UID."""
    instances: list[Json]
    """Every instance in the account (foreign ones too), as the API serves them."""
    claims: dict[str, Json] = field(default_factory=dict)
    """The run's PersistentVolumeClaims, by UID."""
    persistent_volumes: list[Json] = field(default_factory=list)
    """PVs of the network-volume CSI driver whose claim is (or was) one of the run's."""
    volumes: list[Json] = field(default_factory=list)
    """Every network volume in the account (foreign ones too), as the API serves them."""
    neighbours: tuple[str, ...] = ()
    """The owners of the cluster's other virtual nodes: an Immediate claim's volume may be
    made by any of them, and is the run's as much as one of `owner`'s."""
    owned: dict[str, list[Json]] = field(init=False)
    clusters: dict[str, dict[str, list[Json]]] = field(init=False)
    """Our Instant Clusters' members, by gang tag and cluster id (not in `owned`)."""

    def __post_init__(self) -> None:
        self.owned = defaultdict(list)
        self.clusters = defaultdict(lambda: defaultdict(list))
        for instance in self.instances:
            env = instance.get("env") or {}
            if env.get(OWNER_ENV) != self.owner:
                continue
            if instance.get("cluster"):
                gang = env.get(GANG_ENV, "?")
                self.clusters[gang][instance["cluster"]["id"]].append(instance)
            else:
                self.owned[env.get(POD_UID_ENV, "?")].append(instance)

    @classmethod
    def take(
        cls,
        host: SimHost,
        owner: str,
        node: str,
        namespace: str = "",
        neighbours: tuple[str, ...] = (),
    ) -> Snapshot:
        pods = {
            p["metadata"]["uid"]: p
            for p in host.pods()
            if (p.get("spec") or {}).get("nodeName") == node
        }
        claims = {
            c["metadata"]["uid"]: c
            for c in host.objects("persistentvolumeclaims")
            if c["metadata"].get("namespace") == namespace
        }
        volumes = [
            pv
            for pv in host.objects("persistentvolumes")
            if (pv["spec"].get("csi") or {}).get("driver") == CSI_DRIVER
            and (pv["spec"].get("claimRef") or {}).get("namespace") == namespace
        ]
        state = host.runpod_state()
        listed = state.get("networkVolumes") or []
        return cls(owner, node, pods, state["pods"], claims, volumes, listed, neighbours)

    def live(self, uid: str) -> bool:
        pod = self.pods.get(uid)
        return pod is not None and not deleting(pod) and not finished(pod)

    def orphans(self) -> list[Json]:
        """Owned instances whose pod is gone, finished or being deleted."""
        return [i for uid, group in self.owned.items() if not self.live(uid) for i in group]

    def duplicates(self) -> dict[str, int]:
        return {uid: len(group) for uid, group in self.owned.items() if len(group) > 1}

    def duplicate_clusters(self) -> list[str]:
        """Gangs with more than one cluster."""
        return [gang for gang, made in self.clusters.items() if len(made) > 1]

    def leaked_clusters(self) -> list[str]:
        """Our clusters whose Job has no live pod on the node."""
        jobs = {_job_uid(pod) for uid, pod in self.pods.items() if self.live(uid)}
        return [
            cluster_id
            for gang, made in self.clusters.items()
            if gang.partition("/")[0] not in jobs
            for cluster_id in made
        ]

    def our_volumes(self) -> dict[str, list[Json]]:
        """Our network volumes (ours or a neighbour's), by the UID of the claim each was made
        for (the end of its name)."""
        prefixes = [volume_name(owner, "") for owner in (self.owner, *self.neighbours)]
        found: dict[str, list[Json]] = defaultdict(list)
        for volume in self.volumes:
            for prefix in prefixes:
                if volume["name"].startswith(prefix):
                    found[volume["name"][len(prefix) :]].append(volume)
        return found

    def duplicate_volumes(self) -> list[str]:
        """Claims with more than one volume of ours."""
        return [
            f"claim {uid} has volumes {sorted(v['id'] for v in group)}"
            for uid, group in self.our_volumes().items()
            if len(group) > 1
        ]

    def leaked_volumes(self) -> list[str]:
        """What convergence must not leave: a volume of ours that no PV names; a volume
        whose claim is gone while its PV says Delete (a Retain volume stays, with its
        Released PV); a PV of a claim that is gone whose volume is gone too."""
        by_handle = {_handle(pv): pv for pv in self.persistent_volumes}
        found = []
        for uid, group in self.our_volumes().items():
            for volume in group:
                pv = by_handle.get(volume["id"])
                if pv is None:
                    claim = "its claim is gone" if uid not in self.claims else "its claim waits"
                    found.append(f"volume {volume['id']} of claim {uid}: no PV names it, {claim}")
                elif _reclaim(pv) == "Delete" and _claim_uid(pv) not in self.claims:
                    found.append(
                        f"volume {volume['id']}: claim {uid} is gone, its PV "
                        f"{pv['metadata']['name']} says Delete"
                    )
        listed = {v["id"] for v in self.volumes}
        found += [
            f"PV {pv['metadata']['name']} outlived its claim and its volume {_handle(pv)}"
            for pv in self.persistent_volumes
            if _handle(pv) not in listed and _claim_uid(pv) not in self.claims
        ]
        return found

    def _claim_problems(self) -> list[str]:
        """A live claim handed to the provisioner is Bound, at the size it asks for
        (a WaitForFirstConsumer claim once a node is selected for it: one whose
        consumers went first waits for the next, unselected)."""
        problems = []
        for claim in self.claims.values():
            meta, status = claim["metadata"], claim.get("status") or {}
            if meta.get("deletionTimestamp"):
                continue
            asked = size_gb(claim["spec"]["resources"]["requests"]["storage"])
            annotations = meta.get("annotations") or {}
            handed = STORAGE_PROVISIONER in annotations and (
                SELECTED_NODE in annotations
                or claim["spec"].get("storageClassName") == IMMEDIATE_CLASS
            )
            if handed and status.get("phase") != "Bound":
                problems.append(f"claim {meta['name']} is {status.get('phase')}")
            elif status.get("phase") == "Bound" and asked > size_gb(status["capacity"]["storage"]):
                problems.append(f"claim {meta['name']} asks {asked} GB, holds less")
        return problems

    def unconverged(self) -> list[str]:
        """Why the worlds do not agree yet; empty once converged."""
        problems = [
            f"orphan instance {i['id']} ({i['status']}) of pod {i['env'].get(POD_UID_ENV)}"
            for i in self.orphans()
        ]
        problems += [f"pod {uid} has {n} instances" for uid, n in self.duplicates().items()]
        problems += [f"gang {gang} has two clusters" for gang in self.duplicate_clusters()]
        problems += [f"cluster {c} outlived its Job's pods" for c in self.leaked_clusters()]
        problems += self.duplicate_volumes() + self.leaked_volumes() + self._claim_problems()
        listed = {cluster_id for made in self.clusters.values() for cluster_id in made}
        for uid, pod in self.pods.items():
            if _annotations(pod).get(CLUSTER_ANNOTATION) == "true":
                problems += _gang_pod_problems(pod, listed)
            else:
                problems += _pod_problems(pod, self.owned.get(uid, []))
        return problems


def _handle(pv: Json) -> str:
    return str((pv["spec"].get("csi") or {}).get("volumeHandle") or "")


def _reclaim(pv: Json) -> str:
    return str(pv["spec"].get("persistentVolumeReclaimPolicy") or "")


def _claim_uid(pv: Json) -> str:
    return str((pv["spec"].get("claimRef") or {}).get("uid") or "")


def _annotations(pod: Json) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("annotations") or {})


def _job_uid(pod: Json) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return str(ref.get("uid"))
    return None


def _gang_pod_problems(pod: Json, listed: set[str]) -> list[str]:
    """A gang's pod agrees with RunPod once it runs on a listed cluster of ours, or ended."""
    name = pod["metadata"]["name"]
    if deleting(pod):
        return [f"gang pod {name} still Terminating"]
    if finished(pod):
        return []
    cluster = _annotations(pod).get("runpod.io/cluster-id")
    if phase(pod) != "Running" or cluster not in listed:
        return [f"gang pod {name} is {phase(pod)} ({waiting_reason(pod)}) on cluster {cluster}"]
    return []


def _pod_problems(pod: Json, instances: list[Json]) -> list[str]:
    name = pod["metadata"]["name"]
    if deleting(pod):
        return [f"pod {name} still Terminating"]
    if finished(pod):
        return []
    if not instances and waiting_reason(pod) == PodReason.UNOWNED_LOOKALIKE:
        # The seeded foreign instance named like this pod's: it waits for a person by
        # design (docs/architecture.md §3), never for the reconciler.
        return []
    if not instances:
        return [f"pod {name} ({phase(pod)}) has no instance"]
    if phase(pod) != "Running":
        return [f"pod {name} is {phase(pod)} with instance {instances[0]['status']}"]
    return []


def waiting_reason(pod: Json) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
        if reason:
            return str(reason)
    return None


def phase(pod: Json) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def finished(pod: Json) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def deleting(pod: Json) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))
