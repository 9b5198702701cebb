"""Conformance of the Kubernetes simulator for pods: each rule a real kube-apiserver (or,
where said, the kubelet's and Job controller's contract) holds, with a request a sloppy
client would send and the answer it gets. Through HTTP, with the official client (and
the real kubectl for printing and protobuf bodies).

Rules (source in brackets):
 P1  strategic merge: status.podIPs/hostIPs merge by `ip`            [core/v1 types.go tags]
 P2  strategic merge: status.containerStatuses is atomic              [no patchStrategy]
 P3  strategic merge: status.conditions merge by `type`, fields merge [patchMergeKey=type]
 P4  strategic merge: metadata.finalizers is a merged set;
     `$deleteFromPrimitiveList/finalizers` removes                    [meta/v1 types.go]
 P5  strategic merge: ownerReferences by `uid`, containers by `name`  [types.go tags]
 P6  directives: `$patch: delete|replace` in keyed lists, `$patch: replace|delete` on
     maps, `$retainKeys`, `$setElementOrder`                          [strategicpatch]
 P7  JSON merge patch replaces lists; JSON patch `test` failing is 422 [RFC 7386/6902]
 S1  podIPs/hostIPs entries are valid IPs, at most one per family, no duplicates
                                                                      [validatePodIPs/HostIPs]
 S2  hostIPs[0] must equal hostIP                                     [validateHostIPs]
 S3  podIP is authoritative: a differing podIPs becomes [podIP]       [v1 conversion]
 S4  a terminated container may not become non-terminated unless the restart policy
     restarts it                                         [ValidateContainerStateTransition]
 S5  qosClass is immutable                                            [ValidatePodStatusUpdate]
 S6  fields without omitempty come back with Go's zero values (imageID "", state {})
                                                                      [JSON round trip]
 K1  a terminal phase never changes again                             [kubelet contract]
 K2  one member per container state                                   [ContainerState doc]
 J1  Job pods carry batch.kubernetes.io/job-tracking                  [job controller]
 J2  the finalizer goes when the pod is Succeeded/Failed, or deleted unless the Job
     replaces only failed pods (podReplacementPolicy Failed, podFailurePolicy)
 J3  the Job counts the pod (succeeded/failed, Complete)
 T1  Table for pods: READY, STATUS with the reason, RESTARTS, AGE; wide IP, NODE,
     NOMINATED NODE, READINESS GATES; for a list and for one object   [printers.go]
 T2  Table for nodes: STATUS (SchedulingDisabled), ROLES, VERSION; wide INTERNAL-IP...
 B1  protobuf request bodies (`k8s\0` + runtime.Unknown) for Secret, ConfigMap,
     Namespace, Job and Eviction, as kubectl's imperative commands send them; other
     kinds and unknown fields are refused (415), never guessed      [runtime/protobuf]
 E1  pods/eviction deletes the pod with the eviction's options, and discovery lists it
     with group policy, version v1 (how kubectl drain finds it)     [policy/v1 Eviction]
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.jobs import TRACKING_FINALIZER
from reconciler.sim.kube.protobuf import CONTENT_TYPE as PROTOBUF
from reconciler.sim.kube.resources import JOBS, PODS
from reconciler.sim.kube.simulator import KubeSimulator

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
NODE = "virtual-runpod"


@pytest.fixture
def core(sim: KubeSimulator) -> Iterator[client.CoreV1Api]:
    with sim.api_client() as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture
def batch(sim: KubeSimulator) -> Iterator[client.BatchV1Api]:
    with sim.api_client() as api_client:
        yield client.BatchV1Api(api_client)


def _pod(
    sim: KubeSimulator,
    name: str = "p",
    restart: str = "Always",
    containers: int = 1,
    **metadata: Any,
) -> dict[str, Any]:
    spec = {
        "nodeName": NODE,
        "restartPolicy": restart,
        "containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)],
    }
    return sim.create_pod(
        {"metadata": {"name": name, "namespace": "default", **metadata}, "spec": spec}
    )


def _raw(response: Any) -> Any:
    return json.loads(response.data)


def _status_patch(
    core: client.CoreV1Api, body: Any, content_type: str = SMP, name: str = "p"
) -> dict[str, Any]:
    response = core.patch_namespaced_pod_status(
        name, "default", body, _content_type=content_type, _preload_content=False
    )
    return dict(_raw(response))


def _invalid(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return str(json.loads(caught.value.body)["message"])


def _container(name: str = "c0", **state: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "imageID": "busybox@sha256:1",
        "ready": False,
        "restartCount": 0,
        "state": state or {"waiting": {"reason": "ContainerCreating"}},
    }


def _running(core: client.CoreV1Api, ip: str = "10.0.0.1") -> None:
    _status_patch(
        core,
        {
            "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "hostIP": ip,
                "hostIPs": [{"ip": ip}],
                "containerStatuses": [
                    {
                        **_container(state=None),
                        "ready": True,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            }
        },
    )


# --- P: patch semantics ------------------------------------------------------------------


def test_p1_s2_changing_host_ip_with_a_plain_strategic_patch_is_422(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim)
    _running(core)
    sloppy = {"status": {"hostIP": "10.0.0.2", "hostIPs": [{"ip": "10.0.0.2"}]}}
    message = _invalid(lambda: _status_patch(core, sloppy))
    assert "must be equal to `hostIP`" in message
    assert "no more than one IP for each IP family" in message
    # What a kubelet sends: the list replaced (or the old entry deleted) by directive.
    fixed = {
        "status": {"hostIP": "10.0.0.2", "hostIPs": [{"$patch": "replace"}, {"ip": "10.0.0.2"}]}
    }
    assert _status_patch(core, fixed)["status"]["hostIPs"] == [{"ip": "10.0.0.2"}]


def test_p1_s3_pod_ips_merge_by_ip_but_pod_ip_is_authoritative(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim)
    _running(core)
    status = _status_patch(core, {"status": {"podIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.2"}]}})[
        "status"
    ]
    assert status["podIP"] == "10.0.0.2" and status["podIPs"] == [{"ip": "10.0.0.2"}]
    # Merging by ip keeps an entry of the other family.
    status = _status_patch(core, {"status": {"podIPs": [{"ip": "fd00::2"}]}})["status"]
    assert status["podIPs"] == [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}]


def test_p2_container_statuses_are_replaced_whole(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim, restart="Never", containers=2)
    both = [_container("c0"), _container("c1")]
    _status_patch(core, {"status": {"containerStatuses": both}})
    # A sloppy client sends only what changed, expecting a merge by name.
    sloppy = {
        "status": {
            "containerStatuses": [
                {"name": "c0", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
            ]
        }
    }
    statuses = _status_patch(core, sloppy)["status"]["containerStatuses"]
    assert [s["name"] for s in statuses] == ["c0"]
    assert statuses[0]["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert statuses[0]["imageID"] == ""  # S6: not merged from before, Go's zero value


def test_p3_conditions_merge_by_type_and_a_missing_reason_stays(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim)
    _status_patch(
        core,
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
            }
        },
    )
    sloppy = _status_patch(core, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    ready = next(c for c in sloppy["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ContainersNotReady"  # stale: the sloppy client's bug
    fixed = _status_patch(
        core, {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}}
    )
    ready = next(c for c in fixed["status"]["conditions"] if c["type"] == "Ready")
    assert "reason" not in ready and ready["status"] == "True"


def test_p4_finalizers_are_a_merged_set(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim, finalizers=["a.example/x"])
    pod = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"finalizers": ["b.example/y"]}}, _content_type=SMP
    )
    assert pod.metadata.finalizers == ["a.example/x", "b.example/y"]
    pod = core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example/x"]}},
        _content_type=SMP,
    )
    assert pod.metadata.finalizers == ["b.example/y"]
    pod = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"finalizers": ["c.example/z"]}}, _content_type=MERGE
    )
    assert pod.metadata.finalizers == ["c.example/z"]  # P7: merge patch replaces lists


def test_p5_owner_references_by_uid_and_containers_by_name(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    first = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u1"}
    _pod(sim, containers=2, ownerReferences=[first])
    second = {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "u2"}
    pod = core.patch_namespaced_pod(
        "p",
        "default",
        {
            "metadata": {"ownerReferences": [second]},
            "spec": {"containers": [{"name": "c1", "image": "busybox:2"}]},
        },
        _content_type=SMP,
    )
    assert [r.uid for r in pod.metadata.owner_references] == ["u1", "u2"]
    assert [(c.name, c.image) for c in pod.spec.containers] == [
        ("c0", "busybox"),
        ("c1", "busybox:2"),
    ]


def test_p6_list_and_map_directives(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    _status_patch(
        core,
        {
            "status": {
                "conditions": [
                    {"type": "A", "status": "True"},
                    {"type": "B", "status": "True"},
                    {"type": "C", "status": "True", "reason": "Old", "message": "m"},
                ]
            }
        },
    )
    status = _status_patch(
        core,
        {
            "status": {
                "$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}, {"type": "B"}],
                "conditions": [
                    {"type": "B", "$patch": "delete"},
                    {"type": "C", "$retainKeys": ["type", "status"], "status": "False"},
                ],
            }
        },
    )["status"]
    assert [c["type"] for c in status["conditions"]] == ["C", "A"]
    c = status["conditions"][0]
    assert c["status"] == "False" and "reason" not in c and "message" not in c
    status = _status_patch(
        core, {"status": {"conditions": [{"$patch": "replace"}, {"type": "D", "status": "True"}]}}
    )["status"]
    assert [c["type"] for c in status["conditions"]] == ["D"]
    with pytest.raises(ApiException) as caught:
        _status_patch(core, {"status": {"conditions": [{"status": "True"}]}})
    assert caught.value.status == 422 and "merge key" in caught.value.body


def test_p7_json_patch_test_failure_is_422(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    operations = [
        {"op": "test", "path": "/status/phase", "value": "Running"},
        {"op": "replace", "path": "/status/phase", "value": "Failed"},
    ]
    _invalid(lambda: _status_patch(core, operations, JSON_PATCH))


# --- S, K: pod status validation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ips", "problem"),
    [
        (["10.0.0.1", "10.0.0.2"], "no more than one IP for each IP family"),
        (["10.0.0.1", "not-an-ip"], "must be a valid IP address"),
        (["fd00::1", "10.0.0.1", "fd00::2"], "no more than one IP for each IP family"),
    ],
)
def test_s1_pod_ips_are_valid_and_one_per_family(
    sim: KubeSimulator, core: client.CoreV1Api, ips: list[str], problem: str
) -> None:
    _pod(sim)
    body = {"status": {"podIP": ips[0], "podIPs": [{"ip": ip} for ip in ips]}}
    assert problem in _invalid(lambda: _status_patch(core, body, MERGE))


def test_s1_a_dual_stack_pair_is_fine(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    body = {
        "status": {
            "podIP": "10.0.0.1",
            "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            "hostIP": "10.0.0.9",
            "hostIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}],
        }
    }
    assert len(_status_patch(core, body, MERGE)["status"]["hostIPs"]) == 2


def test_s4_a_terminated_container_of_a_never_restarting_pod_stays_terminated(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim, restart="Never")
    done = _container(terminated={"exitCode": 0, "reason": "Completed"})
    _status_patch(core, {"status": {"containerStatuses": [done]}})
    again = _container(running={"startedAt": "2026-01-01T00:00:00Z"})
    message = _invalid(lambda: _status_patch(core, {"status": {"containerStatuses": [again]}}))
    assert "may not be transitioned to non-terminated state" in message


def test_s4_an_always_restarting_pod_may_run_again(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim, restart="Always")
    done = _container(terminated={"exitCode": 1, "reason": "Error"})
    _status_patch(core, {"status": {"containerStatuses": [done]}})
    again = _container(running={"startedAt": "2026-01-01T00:00:00Z"})
    patched = _status_patch(core, {"status": {"containerStatuses": [again]}})
    [status] = patched["status"]["containerStatuses"]
    assert "running" in status["state"] and "terminated" not in status["state"]


def test_s5_qos_class_is_immutable(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    _invalid(lambda: _status_patch(core, {"status": {"qosClass": "Guaranteed"}}))


def test_s6_missing_required_fields_read_back_as_go_zero_values(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    _pod(sim)
    _status_patch(
        core,
        {
            "status": {
                "containerStatuses": [{"name": "c0", "state": {"terminated": {"reason": "Error"}}}]
            }
        },
    )
    raw = _raw(core.read_namespaced_pod("p", "default", _preload_content=False))
    status = raw["status"]["containerStatuses"][0]
    assert status["imageID"] == "" and status["image"] == "" and status["ready"] is False
    assert status["restartCount"] == 0 and status["lastState"] == {}
    assert status["state"]["terminated"]["exitCode"] == 0
    # ... so the official client's typed models deserialize the pod.
    assert core.read_namespaced_pod("p", "default").status.container_statuses[0].image_id == ""


def test_k1_a_terminal_phase_never_changes(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    _status_patch(core, {"status": {"phase": "Failed"}})
    message = _invalid(lambda: _status_patch(core, {"status": {"phase": "Running"}}))
    assert "terminal phase Failed" in message


def test_k2_a_container_state_has_one_member(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    _pod(sim)
    both = {
        "running": {"startedAt": "2026-01-01T00:00:00Z"},
        "terminated": {"exitCode": 0, "reason": "Completed"},
    }
    message = _invalid(
        lambda: _status_patch(
            core, {"status": {"containerStatuses": [{**_container(), "state": both}]}}
        )
    )
    assert "only one of waiting, running, terminated" in message


# --- J: the Job controller's tracking finalizer -----------------------------------------


def _job(sim: KubeSimulator, batch: client.BatchV1Api, **spec: Any) -> str:
    """A Job of one pod: the name of the pod its controller made (on our node)."""
    template = {
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "containers": [{"name": "c0", "image": "busybox"}],
        }
    }
    batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {"template": template, **spec},
        },
    )
    pods = sim.list("pods", "default")
    assert len(pods) == 1 and pods[0]["metadata"]["generateName"] == "train-"
    return str(pods[0]["metadata"]["name"])


def _job_status(sim: KubeSimulator) -> dict[str, Any]:
    return dict((sim.get("jobs", "default", "train") or {}).get("status") or {})


def test_j1_j2_a_deleted_job_pod_goes_at_once_by_default(
    sim: KubeSimulator, core: client.CoreV1Api, batch: client.BatchV1Api
) -> None:
    pod = _job(sim, batch)
    assert core.read_namespaced_pod(pod, "default").metadata.finalizers == [TRACKING_FINALIZER]
    core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)
    assert sim.get("pods", "default", pod) is None
    assert _job_status(sim)["failed"] == 1


@pytest.mark.parametrize(
    "policy",
    [
        {"podReplacementPolicy": "Failed"},
        {
            "podFailurePolicy": {
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
            }
        },
    ],
)
def test_j2_j3_a_job_replacing_only_failed_pods_waits_for_the_terminal_phase(
    sim: KubeSimulator, core: client.CoreV1Api, batch: client.BatchV1Api, policy: dict[str, Any]
) -> None:
    pod = _job(sim, batch, **policy)
    core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)
    stuck = sim.get("pods", "default", pod)
    assert stuck is not None and stuck["metadata"]["finalizers"] == [TRACKING_FINALIZER]
    assert "failed" not in _job_status(sim)
    _status_patch(core, {"status": {"phase": "Failed"}}, name=pod)
    assert sim.get("pods", "default", pod) is None
    assert _job_status(sim)["failed"] == 1


def test_j2_j3_a_succeeded_pod_is_counted_and_completes_the_job(
    sim: KubeSimulator, core: client.CoreV1Api, batch: client.BatchV1Api
) -> None:
    pod = _job(sim, batch)
    _status_patch(core, {"status": {"phase": "Succeeded"}}, name=pod)
    assert core.read_namespaced_pod(pod, "default").metadata.finalizers is None
    status = _job_status(sim)
    assert status["succeeded"] == 1
    # v1.37 keeps the interim condition the end was judged by before the final one.
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert {c["reason"] for c in status["conditions"]} == {"CompletionsReached"}


def test_j1_pods_of_no_job_get_no_finalizer(sim: KubeSimulator) -> None:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "x", "controller": True}
    assert "finalizers" not in _pod(sim, ownerReferences=[ref])["metadata"]


# --- T: server-side printing ------------------------------------------------------------


def _table(sim: KubeSimulator, path: str) -> dict[str, Any]:
    with sim.api_client() as api_client:
        response = api_client.call_api(
            "GET",
            sim.base_url + path,
            header_params={
                "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
                "Authorization": f"Bearer {sim.token}",
            },
        )
        return dict(json.loads(response.read()))


def test_t1_pod_table_shows_the_reason_for_one_pod_and_a_list(
    sim: KubeSimulator, core: client.CoreV1Api, clock: SimClock
) -> None:
    _pod(sim)
    _status_patch(
        core,
        {"status": {"phase": "Pending", "podIP": "10.0.0.5", "containerStatuses": [_container()]}},
    )
    clock.advance(150)
    for path in ("/api/v1/namespaces/default/pods/p", "/api/v1/namespaces/default/pods"):
        table = _table(sim, path)
        names = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
        assert names == [
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1),
        ]
        assert table["rows"][0]["cells"] == [
            "p",
            "0/1",
            "ContainerCreating",
            "0",
            "2m30s",
            "10.0.0.5",
            NODE,
            "<none>",
            "<none>",
        ]


def test_t1_restarts_show_when_and_deletion_shows_terminating(
    sim: KubeSimulator, core: client.CoreV1Api, clock: SimClock
) -> None:
    _pod(sim)
    restarted = {
        **_container(running={"startedAt": "2026-01-01T00:00:00Z"}),
        "ready": True,
        "restartCount": 2,
        "lastState": {
            "terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-01-01T00:00:00Z"}
        },
    }
    _status_patch(core, {"status": {"phase": "Running", "containerStatuses": [restarted]}})
    clock.advance(600)
    cells = _table(sim, "/api/v1/namespaces/default/pods/p")["rows"][0]["cells"]
    assert cells[1:4] == ["1/1", "Running", "2 (10m ago)"]
    sim.delete_pod("default", "p", 30)
    assert _table(sim, "/api/v1/namespaces/default/pods/p")["rows"][0]["cells"][2] == "Terminating"


def test_t2_node_table(sim: KubeSimulator) -> None:
    sim.put(
        "nodes",
        {
            "metadata": {"name": NODE, "labels": {"kubernetes.io/role": "agent"}},
            "spec": {"unschedulable": True},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0"},
            },
        },
    )
    cells = _table(sim, f"/api/v1/nodes/{NODE}")["rows"][0]["cells"]
    assert cells[:3] == [NODE, "Ready,SchedulingDisabled", "agent"]
    assert cells[4:6] == ["v1.32.0", "10.1.0.1"]
    assert cells[6:] == ["<none>", "<unknown>", "<unknown>", "<unknown>"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_t1_kubectl_get_pod_name_shows_the_reason_and_wide_columns(
    tmp_path: Path, clock: SimClock
) -> None:
    with KubeSimulator(clock=clock, tls=True) as sim:
        kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        _pod(sim)
        sim.store.patch(
            PODS,
            "default",
            "p",
            MERGE,
            {
                "status": {
                    "phase": "Failed",
                    "reason": "InstanceLost",
                    "podIP": "10.0.0.7",
                    "containerStatuses": [
                        _container(terminated={"exitCode": 137, "reason": "InstanceLost"})
                    ],
                }
            },
            "status",
        )

        def kubectl(*args: str) -> list[str]:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig, *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout.splitlines()

        header, row = kubectl("get", "pod", "p")
        assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert row.split()[:4] == ["p", "0/1", "InstanceLost", "0"]
        header, row = kubectl("get", "pod", "p", "-o", "wide")
        assert "NOMINATED NODE" in header and row.split()[5:7] == ["10.0.0.7", NODE]


# --- B, E: protobuf bodies and evictions -------------------------------------------------


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    def field(number: int, data: bytes) -> bytes:
        return bytes([number << 3 | 2, len(data)]) + data

    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return b"k8s\x00" + field(1, type_meta) + field(2, raw)


def _post(sim: KubeSimulator, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    with sim.api_client() as api_client:
        response = api_client.call_api(
            "POST",
            sim.base_url + path,
            header_params={"Content-Type": PROTOBUF, "Authorization": f"Bearer {sim.token}"},
            body=body,
        )
        return response.status, dict(json.loads(response.read()))


def test_b1_a_protobuf_config_map_is_created(sim: KubeSimulator) -> None:
    meta = bytes([0x0A, 2]) + b"cm"  # ObjectMeta.name
    entry = bytes([0x0A, 1]) + b"k" + bytes([0x12, 1]) + b"v"  # data map entry
    raw = bytes([0x0A, len(meta)]) + meta + bytes([0x12, len(entry)]) + entry
    status, created = _post(
        sim, "/api/v1/namespaces/default/configmaps", _envelope("v1", "ConfigMap", raw)
    )
    assert status == 201 and created["data"] == {"k": "v"}
    assert (sim.get("configmaps", "default", "cm") or {})["data"] == {"k": "v"}


def test_b1_unknown_kinds_and_fields_are_refused(sim: KubeSimulator) -> None:
    status, answer = _post(
        sim, "/api/v1/namespaces/default/configmaps", _envelope("v1", "Service", b"")
    )
    assert status == 415 and "Service" in answer["message"]
    status, answer = _post(
        sim,
        "/api/v1/namespaces/default/configmaps",
        _envelope("v1", "ConfigMap", bytes([0xF8, 0x07, 0x01])),
    )
    assert status == 415 and "field 127 of ConfigMap" in answer["message"]
    status, _ = _post(sim, "/api/v1/namespaces/default/configmaps", b"{}")
    assert status == 400


def test_e1_eviction_is_discoverable_and_deletes(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    entry = next(r for r in core.get_api_resources().resources if r.name == "pods/eviction")
    assert (entry.kind, entry.group, entry.version) == ("Eviction", "policy", "v1")
    _pod(sim)
    core.create_namespaced_pod_eviction(
        "p",
        "default",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p"},
            "deleteOptions": {"gracePeriodSeconds": 0},
        },
    )
    assert sim.get("pods", "default", "p") is None


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_b1_e1_kubectl_imperative_commands_and_drain(tmp_path: Path, clock: SimClock) -> None:
    with KubeSimulator(clock=clock, tls=True) as sim:
        kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        sim.put(
            "nodes",
            {
                "metadata": {"name": NODE},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            },
        )
        _pod(sim)

        def kubectl(*args: str) -> str:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig, *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert "secret/s created" in kubectl(
            "create", "secret", "generic", "s", "--from-literal=token=t0p"
        )
        assert "configmap/c created" in kubectl("create", "configmap", "c", "--from-literal=a=b")
        assert "namespace/team created" in kubectl("create", "namespace", "team")
        assert "job.batch/j created" in kubectl(
            "create", "job", "j", "--image=busybox:1.36", "--", "echo", "hi"
        )
        assert (sim.get("secrets", "default", "s") or {})["data"] == {"token": "dDBw"}
        assert (sim.get("configmaps", "default", "c") or {})["data"] == {"a": "b"}
        assert sim.get("namespaces", None, "team") is not None
        job = sim.get("jobs", "default", "j") or {}
        assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
        drained = kubectl("drain", NODE, "--force", "--grace-period=0", "--timeout=30s")
        assert "pod/p evicted" in drained
        assert sim.get("pods", "default", "p") is None


def test_a_container_ports_protocol_defaults_to_tcp(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    """SetDefaults_ContainerPort: `kubectl describe` shows `Port: 8888/TCP`, not `8888/`."""
    container = {"name": "c", "image": "busybox", "ports": [{"containerPort": 8888}]}
    sim.create_pod(
        {
            "metadata": {"name": "ports", "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [container]},
        }
    )
    pod = core.read_namespaced_pod("ports", "default")
    assert pod.spec.containers[0].ports[0].protocol == "TCP"


def test_t9_job_storage_class_and_event_tables_have_kubectls_columns(
    sim: KubeSimulator, core: client.CoreV1Api, clock: SimClock
) -> None:
    """printJob, printStorageClass and printEvent (pkg/printers/internalversion)."""
    sim.put(
        "storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "net"},
            "provisioner": "runpod.io/network-volume",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": True,
        },
    )
    sim.put(
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {
                "completions": 2,
                "template": {"spec": {"restartPolicy": "Never", "containers": []}},
            },
        },
    )
    pod = _pod(sim)
    with sim.api_client() as api_client:
        KubeClient(api_client, now=clock.now).events.record(pod, "Pulled", "pulled it")
    clock.advance(65)
    sc = _table(sim, "/apis/storage.k8s.io/v1/storageclasses")
    assert [c["name"] for c in sc["columnDefinitions"]] == [
        "Name",
        "Provisioner",
        "ReclaimPolicy",
        "VolumeBindingMode",
        "AllowVolumeExpansion",
        "Age",
    ]
    assert sc["rows"][0]["cells"] == [
        "net",
        "runpod.io/network-volume",
        "Delete",
        "WaitForFirstConsumer",
        "true",
        "65s",
    ]
    job = _table(sim, "/apis/batch/v1/namespaces/default/jobs")
    assert [c["name"] for c in job["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Completions",
        "Duration",
        "Age",
    ]
    # The Job controller set status.startTime when it first synced the Job (65 s ago):
    # DURATION runs from there until completionTime.
    assert job["rows"][0]["cells"][:5] == ["j", "Running", "0/2", "65s", "65s"]
    events = _table(sim, "/api/v1/namespaces/default/events")
    assert [c["name"] for c in events["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Message",
    ]
    cells = events["rows"][0]["cells"]
    assert cells[:4] == ["65s", "Normal", "Pulled", "pod/p"] and cells[6] == "pulled it"


def test_t10_claim_and_volume_tables_have_kubectls_columns(
    sim: KubeSimulator, clock: SimClock
) -> None:
    """printPersistentVolumeClaim and printPersistentVolume: a claim's capacity and
    access modes only once it names a volume, the PV's claim as namespace/name, access
    modes as RWO/RWX in kubectl's order, <unset> where no class or mode is set."""
    sim.put(
        "persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "ckpt", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "resources": {"requests": {"storage": "50G"}},
                "storageClassName": "net",
            },
        },
    )
    clock.advance(30)
    claims = _table(sim, "/api/v1/namespaces/default/persistentvolumeclaims")
    assert [c["name"] for c in claims["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Volume",
        "Capacity",
        "Access Modes",
        "StorageClass",
        "VolumeAttributesClass",
        "Age",
    ]
    assert claims["rows"][0]["cells"][:8] == [
        "ckpt",
        "Pending",
        "",
        "",
        "",
        "net",
        "<unset>",
        "30s",
    ]
    sim.put(
        "persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv1"},
            "spec": {
                "capacity": {"storage": "50G"},
                "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "net",
                "volumeMode": "Filesystem",
                "claimRef": {"namespace": "default", "name": "ckpt"},
                "csi": {"driver": "network-volume.runpod.io", "volumeHandle": "v1"},
            },
        },
    )
    volumes = _table(sim, "/api/v1/persistentvolumes")
    assert [c["name"] for c in volumes["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Capacity",
        "Access Modes",
        "Reclaim Policy",
        "Status",
        "Claim",
        "StorageClass",
        "VolumeAttributesClass",
        "Reason",
        "Age",
    ]
    cells = volumes["rows"][0]["cells"]
    assert cells[:9] == [
        "pv1",
        "50G",
        "RWO,RWX",
        "Delete",
        cells[4],
        "default/ckpt",
        "net",
        "<unset>",
        "",
    ]
    assert cells[10] == "Filesystem"


def _put_job(sim: KubeSimulator, name: str, **spec: Any) -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": []}}  # the controller makes none
    sim.put(
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "finalizers": ["example.com/hold"]},
            "spec": {"template": template, **spec},
        },
    )


def test_t11_job_rows_as_print_job_writes_them(sim: KubeSimulator) -> None:
    """printJob: a work queue of parallelism 1 shows "0/1", of more "0/1 of N"; a Job
    being deleted is Terminating unless it finished; the selector as
    FormatLabelSelector writes it (requirements sorted by key), the generated one for a
    Job without manualSelector."""
    _put_job(sim, "queue-1", parallelism=1)
    _put_job(sim, "queue-3", parallelism=3)
    selector = {
        "matchLabels": {"team": "ml"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]},
            {"key": "app", "operator": "Exists"},
            {"key": "zone", "operator": "DoesNotExist"},
        ],
    }
    _put_job(sim, "going", completions=2, selector=selector, manualSelector=True)
    sim.store.delete(JOBS, "default", "going")
    rows = {
        row["cells"][0]: row["cells"]
        for row in _table(sim, "/apis/batch/v1/namespaces/default/jobs")["rows"]
    }
    assert rows["queue-1"][1:3] == ["Running", "0/1"]
    assert rows["queue-3"][1:3] == ["Running", "0/1 of 3"]
    assert rows["going"][1:3] == ["Terminating", "0/2"]
    assert rows["going"][7] == "app,team=ml,tier in (cpu,gpu),!zone"
    # The API server generated the selector of a Job without manualSelector.
    uid = (sim.get("jobs", "default", "queue-1") or {})["metadata"]["uid"]
    assert rows["queue-1"][7] == f"batch.kubernetes.io/controller-uid={uid}"
    template = (sim.get("jobs", "default", "queue-1") or {})["spec"]["template"]
    assert template["metadata"]["labels"] == {
        "job-name": "queue-1",
        "batch.kubernetes.io/job-name": "queue-1",
        "controller-uid": uid,
        "batch.kubernetes.io/controller-uid": uid,
    }


def test_t11_event_rows_as_print_event_writes_them(sim: KubeSimulator, clock: SimClock) -> None:
    """printEvent: an events.k8s.io-style Event (eventTime, series, reporting fields, no
    count) shows the series' last time and count and "component, instance"; an Event
    with no time at all shows <unknown>; an object without a name shows its kind."""
    now = clock.now()
    earlier = (now - timedelta(seconds=300)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    later = (now - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    base = {"apiVersion": "v1", "kind": "Event", "type": "Normal", "message": " m "}
    sim.put(
        "events",
        {
            **base,
            "metadata": {"name": "series", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Pulled",
            "eventTime": earlier,
            "series": {"count": 4, "lastObservedTime": later},
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
        },
    )
    sim.put(
        "events",
        {
            **base,
            "metadata": {"name": "timeless", "namespace": "default"},
            "involvedObject": {"kind": "Node"},
            "reason": "Starting",
            "source": {"component": "kubelet"},
        },
    )
    rows = {
        row["cells"][9]: row["cells"]
        for row in _table(sim, "/api/v1/namespaces/default/events")["rows"]
    }
    assert rows["series"] == [
        "30s", "Normal", "Pulled", "pod/p", "", "kubelet, node-1", "m", "5m", 4, "series"
    ]  # fmt: skip
    assert rows["timeless"] == [
        "<unknown>", "Normal", "Starting", "node", "", "kubelet", "m", "<unknown>", 1, "timeless"
    ]  # fmt: skip


def test_t12_pod_row_counts_sidecars_and_shows_a_failed_containers_reason(
    sim: KubeSimulator, clock: SimClock
) -> None:
    """printPod: a restartable init container (a sidecar) counts among the containers,
    ready and restarted as it is; a pod whose last-listed container Completed while an
    earlier one failed shows the failure, not Completed."""
    spec = {
        "nodeName": NODE,
        "restartPolicy": "Never",
        "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
        "containers": [{"name": "c0", "image": "busybox"}, {"name": "c1", "image": "busybox"}],
    }
    sim.create_pod({"metadata": {"name": "side", "namespace": "default"}, "spec": spec})
    finished = (clock.now() - timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    sidecar = {
        **_container("proxy", running={}),
        "ready": True,
        "started": True,
        "restartCount": 2,
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": finished}},
    }
    status = {
        "phase": "Running",
        "conditions": [{"type": "Initialized", "status": "True"}],
        "initContainerStatuses": [sidecar],
        "containerStatuses": [
            _container("c0", terminated={"exitCode": 0, "reason": "Completed"}),
            _container("c1", terminated={"exitCode": 1, "reason": "Error"}),
        ],
    }
    sim.store.patch(
        PODS, "default", "side", "application/merge-patch+json", {"status": status}, "status"
    )
    cells = _table(sim, "/api/v1/namespaces/default/pods/side")["rows"][0]["cells"]
    assert cells[1:4] == ["1/3", "Error", "2 (40s ago)"]


def test_t13_only_the_effective_default_storage_class_is_marked(
    sim: KubeSimulator, clock: SimClock
) -> None:
    """printStorageClassList (v1.37): of the classes annotated as default (GA or beta
    annotation) only the newest is marked " (default)", of two as new the first by
    name; printing one class alone marks none."""

    def put(name: str, annotation: str) -> None:
        sim.put(
            "storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name, "annotations": {annotation: "true"}},
                "provisioner": "runpod.io/network-volume",
            },
        )

    put("old", "storageclass.kubernetes.io/is-default-class")
    clock.advance(10)
    put("zeta", "storageclass.kubernetes.io/is-default-class")
    put("beta-one", "storageclass.beta.kubernetes.io/is-default-class")
    listed = _table(sim, "/apis/storage.k8s.io/v1/storageclasses")["rows"]
    assert [row["cells"][0] for row in listed] == ["beta-one (default)", "old", "zeta"]
    alone = _table(sim, "/apis/storage.k8s.io/v1/storageclasses/beta-one")["rows"]
    assert alone[0]["cells"][0] == "beta-one"
