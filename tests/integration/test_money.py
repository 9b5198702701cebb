"""Money through both simulators over real HTTP: lost owner tags restored,
tags and records both lost (reported, untouched), an unreadable exit code bounded, a
slow log backfill read whole for the exit code,
registry credentials collected after a rotation, `reconciler cost` equal to RunPod's
ledger, a charge that differs from list price told once (Event, metric), a leak found
by the billing audit counted in seconds, namespace budgets (a namespace read once a minute),
a gauge of instances without pods, and the User-Agent on every request."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from reconciler.cli.commands import main
from reconciler.core.actions import Terminate
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import USER_AGENT
from reconciler.core.money.charges import SPEND_ANNOTATION
from reconciler.core.reasons import TerminateReason
from reconciler.core.resources.registries import registry_name
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.resources.sections import RegistrySection

from .test_lifecycle import phase, reasons


def _running(box: Sandbox, name: str, **settings: Any) -> dict[str, Any]:
    box.add_pod(name, **settings)
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()
    pod = box.pod(name, settings.get("namespace", "default")) or {}
    assert pod["status"]["phase"] == "Running"
    instance = box.instance_for(pod)
    assert instance is not None
    return instance


def _api(box: Sandbox) -> requests.Session:
    """Someone else's client on the same account (the console, a script)."""
    session = requests.Session()
    session.headers.update({"Authorization": f"Bearer {API_KEY}", "User-Agent": "console"})
    return session


def _requests_for(box: Sandbox, instance_id: str, since: int = 0) -> list[tuple[str, str]]:
    return [
        (r.method, r.path)
        for r in box.runpod_sim.requests[since:]
        if instance_id in r.path and r.headers.get("User-Agent") == USER_AGENT
    ]


def _cli(box: Sandbox, *args: str) -> Any:
    result = CliRunner().invoke(main, ["--database-url", box.database_url, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_env_replaced_behind_our_back_gets_the_tags_back(box: Sandbox) -> None:
    instance = _running(box, "web", ports=[22])
    with _api(box) as api:
        patched = api.patch(
            f"{box.runpod_sim.base_url}/v2/pods/{instance['id']}", json={"env": {"DEBUG": "1"}}
        )
    assert patched.status_code == 200 and OWNER_ENV not in patched.json()["env"]
    report = box.tick()
    assert report.applied["RestoreTags"] == 1
    env = box.runpod_sim.instances[instance["id"]]["env"]
    assert env == {
        "DEBUG": "1",
        OWNER_ENV: box.settings.owner_id,
        POD_UID_ENV: (box.pod("web") or {})["metadata"]["uid"],
    }
    assert "TagsRestored" in reasons(box, "web")
    box.tick()
    assert phase(box, "web") == "Running"
    assert [i["id"] for i in box.owned_instances()] == [instance["id"]]
    assert "InstanceLost" not in reasons(box, "web")


def test_tags_and_records_both_lost_is_reported_and_left_alone(box: Sandbox) -> None:
    instance = _running(box, "web", ports=[22])
    with _api(box) as api:
        api.patch(f"{box.runpod_sim.base_url}/v2/pods/{instance['id']}", json={"env": {}})
    for row in box.store.load_rows():
        box.store.delete_row(row.pod_uid)
    pod = box.pod("web") or {}
    del pod["metadata"]["annotations"]["runpod.io/pod-id"]
    box.kube_sim.put("pods", pod)
    since = len(box.runpod_sim.requests)
    report = box.tick()
    assert [i.instance_id for i in report.lookalikes] == [instance["id"]]
    assert _requests_for(box, instance["id"], since) == []  # no PATCH, no DELETE
    assert instance["id"] in box.runpod_sim.instances
    assert box.owned_instances() == []  # and no second instance for the pod
    assert "UnownedLookalike" in reasons(box, "web")
    shown = _cli(box, "state", "show")
    assert f"unowned, looks like ours: instance {instance['id']}" in shown
    listed = json.loads(_cli(box, "state", "show", "-o", "json"))
    assert [e["instance_id"] for e in listed if e["state"] == "unowned-lookalike"] == [
        instance["id"]
    ]
    metrics = Metrics()
    metrics.observe(report, None, box.settings.owner_id)
    assert _sample(metrics.registry, "reconciler_unowned_lookalike_instances") == 1


def test_an_unreadable_exit_code_ends_billing_within_the_bound(box: Sandbox) -> None:
    box.configure(exit_code_timeout=120)
    instance = _running(box, "job", command=["python", "train.py"], restart_policy="Never")
    box.runpod_sim.faults.inject("GET", "/v2/pods/*/logs", 503, count=1000)
    box.runpod_sim.exit_process(instance["id"], 0)
    box.tick()
    assert instance["id"] in box.runpod_sim.instances  # within the bound: still waiting
    # One log read a tick while waiting: the next tick retries, the client does not.
    reads = [r for r in box.runpod_sim.requests if r.path.endswith("/logs")]
    assert [r.status for r in reads] == [503]
    box.advance(121)
    box.tick()
    assert instance["id"] not in box.runpod_sim.instances
    pod = box.pod("job") or {}
    assert pod["status"]["phase"] == "Failed" and pod["status"]["reason"] == "ExitCodeUnknown"
    assert "ExitCodeUnknown" in reasons(box, "job")


# Longer than any silence a reader could take for the end of a backfill (the kubelet's
# non-follow read once ended after 1 s of it).
SLOW_BACKFILL_GAP = 1.5


@pytest.mark.slow
def test_a_slow_backfill_is_read_whole_for_the_exit_code(box: Sandbox) -> None:
    instance = _running(box, "job", command=["python", "train.py"], restart_policy="Never")
    box.runpod_sim.exit_process(instance["id"], 3)
    box.runpod_sim.logs.slow_backfill(instance["id"], SLOW_BACKFILL_GAP)
    since = len(box.runpod_sim.requests)
    box.tick()
    pod = box.pod("job") or {}
    assert pod["status"]["phase"] == "Failed", pod["status"]
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3  # the marker, the backfill's last event
    assert instance["id"] not in box.runpod_sim.instances
    reads = [r for r in box.runpod_sim.requests[since:] if r.path.endswith("/logs")]
    # One stream of both sources read whole for the code, not opened again; the log kept
    # for the pod is that same read (one read per finished batch pod).
    assert [r.query.get("source") for r in reads] == [None]
    assert box.store.saved_logs.read(box.pod("job")["metadata"]["uid"]) is not None


def _pull_secret(box: Sandbox, password: str) -> None:
    auths = {"ghcr.io": {"username": "robot", "password": password}}
    data = {".dockerconfigjson": base64.b64encode(json.dumps({"auths": auths}).encode()).decode()}
    box.kube_sim.put(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "pull", "namespace": "default"},
            "data": data,
        },
    )


def test_secret_rotation_collects_the_old_credential_once_unused(box: Sandbox) -> None:
    private = {
        "image": "ghcr.io/org/train:1",
        "ports": [22],
        "extra_spec": {"imagePullSecrets": [{"name": "pull"}]},
    }
    with _api(box) as api:
        foreign = api.post(
            f"{box.runpod_sim.base_url}/v2/registries",
            json={"name": "team-hub", "username": "me", "password": "mine"},
        ).json()["id"]
    _pull_secret(box, "first")
    old = _running(box, "a", **private)["registry"]
    _pull_secret(box, "second")  # rotation
    new = _running(box, "b", **private)["registry"]
    assert old and new and old != new
    registries = {r["id"] for r in _registries(box)}
    assert {old, new, foreign} <= registries  # the old one is still in use by pod a
    box.kube_sim.delete_pod("default", "a", grace_seconds=30)
    box.tick()
    box.tick()
    assert {r["id"] for r in _registries(box)} == {new, foreign}
    deletes = [
        r
        for r in box.runpod_sim.requests
        if r.method == "DELETE" and r.path.startswith("/v2/registries/")
    ]
    assert [(r.path, r.status) for r in deletes] == [(f"/v2/registries/{old}", 204)]


def test_a_collected_credential_is_counted_from_the_registries_report_section(
    box: Sandbox,
) -> None:
    private = {
        "image": "ghcr.io/org/train:1",
        "extra_spec": {"imagePullSecrets": [{"name": "pull"}]},
    }
    _pull_secret(box, "first")
    old = _running(box, "a", **private)["registry"]
    _pull_secret(box, "second")
    _running(box, "b", **private)
    box.kube_sim.delete_pod("default", "a", grace_seconds=30)
    metrics = Metrics()
    reports = [box.tick(), box.tick()]
    for report in reports:
        metrics.observe(report, None, box.settings.owner_id)
    assert [d for r in reports for d in RegistrySection.of(r).deleted] == [old]
    deleted = "reconciler_registry_credentials_deleted_total"
    assert metrics.registry.get_sample_value(deleted) == 1


def test_registry_credential_calls_are_journaled_with_their_ids(box: Sandbox) -> None:
    private = {
        "image": "ghcr.io/org/train:1",
        "extra_spec": {"imagePullSecrets": [{"name": "pull"}]},
    }
    _pull_secret(box, "first")
    old = _running(box, "a", **private)["registry"]
    _pull_secret(box, "second")
    new = _running(box, "b", **private)["registry"]
    box.kube_sim.delete_pod("default", "a", grace_seconds=30)
    box.tick()
    box.tick()
    journal = [
        (e.kind, e.resource_id, e.outcome)
        for e in box.store.journal()
        if e.kind.endswith("registry-auth")
    ]
    assert journal == [
        ("create-registry-auth", old, "ok"),
        ("create-registry-auth", new, "ok"),
        ("delete-registry-auth", old, "ok"),
    ]


def test_a_credential_already_stored_under_our_name_is_used_not_made_again(
    box: Sandbox,
) -> None:
    """As after a create whose answer was lost: the name says it is ours and what it holds."""
    private = {
        "image": "ghcr.io/org/train:1",
        "extra_spec": {"imagePullSecrets": [{"name": "pull"}]},
    }
    _pull_secret(box, "first")
    name = registry_name(box.settings.owner_id, "ghcr.io", "robot", "first")
    with _api(box) as api:
        stored = api.post(
            f"{box.runpod_sim.base_url}/v2/registries",
            json={"name": name, "username": "robot", "password": "first"},
        ).json()["id"]
    assert _running(box, "a", **private)["registry"] == stored
    made = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/registries")]
    assert [r.headers.get("User-Agent") for r in made] == ["console"]


def test_a_credential_of_ours_is_not_made_while_creates_are_stopped(box: Sandbox) -> None:
    private = {
        "image": "ghcr.io/org/train:1",
        "extra_spec": {"imagePullSecrets": [{"name": "pull"}]},
    }
    _pull_secret(box, "first")
    box.add_pod("plain")
    box.add_pod("private", **private)
    box.runpod_sim.faults.inject("POST", "/v2/pods", 402, count=100)
    box.tick()
    assert _registries(box) == []  # the create that needed it waits for a later tick


def _registries(box: Sandbox) -> list[dict[str, Any]]:
    with _api(box) as api:
        answer = api.get(f"{box.runpod_sim.base_url}/v2/registries").json()
    return list(answer["registries"])


def test_cost_equals_the_ledger_to_the_cent_and_is_annotated(box: Sandbox) -> None:
    web = _running(box, "web", ports=[22])
    job = _running(
        box, "job", namespace="research", command=["python", "x.py"], restart_policy="Never"
    )
    box.advance(3 * 3600 + 600)
    box.runpod_sim.exit_process(job["id"], 0)
    box.tick()  # the job ends; its instance is deleted
    box.advance(2 * 3600)
    box.tick()
    box.advance(3600)
    report = box.tick()
    ledger = {i: box.runpod_sim.billed(i)["total"] for i in (web["id"], job["id"])}
    billed = json.loads(_cli(box, "cost", "-o", "json"))
    # The running pod's current hour is not read yet: compare what the read covers.
    until = billed["billed_until"]
    assert until is not None
    by_pod = {row["pod"]: row["usd"] for row in billed["rows"]}
    assert by_pod["research/job"] == round(ledger[job["id"]], 2)
    web_read = _ledger_until(box, web["id"], until)
    assert by_pod["default/web"] == round(web_read, 2)
    assert billed["total_usd"] == round(ledger[job["id"]] + web_read, 2)
    namespaces = json.loads(_cli(box, "cost", "--by", "namespace", "-o", "json"))
    assert {r["namespace"]: r["usd"] for r in namespaces["rows"]} == {
        "research": round(ledger[job["id"]], 2),
        "default": round(web_read, 2),
    }
    assert all(not row["mismatch"] for row in billed["rows"]), billed["rows"]
    annotations = (box.pod("web") or {})["metadata"]["annotations"]
    assert float(annotations[SPEND_ANNOTATION]) == round(web_read, 2)
    assert "spend: $" in _cli(box, "state", "show")
    metrics = Metrics()
    metrics.observe(report, None, box.settings.owner_id)
    assert metrics.registry.get_sample_value(
        "reconciler_spend_usd_total", {"namespace": "research"}
    ) == pytest.approx(ledger[job["id"]], abs=0.005)


def test_a_charge_that_differs_from_list_price_is_told_once(box: Sandbox) -> None:
    box.add_pod("web", ports=[22])
    box.tick()
    (instance,) = box.owned_instances()
    # RunPod states a price a third below what its ledger charges: a wrong price.
    box.runpod_sim.set_instance_fields(instance["id"], {"cost": round(instance["cost"] / 1.5, 4)})
    box.advance(30)
    box.tick()
    box.tick()
    assert phase(box, "web") == "Running"
    metrics = Metrics()
    box.advance(2 * 3600)
    since = len(box.runpod_sim.requests)
    metrics.observe(box.tick(), None, box.settings.owner_id)  # reads billing: it differs
    told = [e for e in box.events("web") if e["reason"] == "ChargeDiffersFromListPrice"]
    assert len(told) == 1 and told[0]["type"] == "Warning"
    assert "more than 10% apart" in told[0]["message"]
    assert _sample(metrics.registry, "reconciler_spend_mismatched_pods_total") == 1
    # The flag costs no request of its own: the tick's list and the hourly billing read
    # (and the hourly ghost-charge audit's reads of the two other routes: it shares the
    # pods' read).
    assert [(r.method, r.path) for r in box.runpod_sim.requests[since:]] == [
        ("GET", "/v2/pods"),
        ("GET", "/v2/billing/pods"),
        ("GET", "/v2/billing/network-volumes"),
        ("GET", "/v2/billing/clusters"),
    ]
    assert json.loads(_cli(box, "cost", "-o", "json"))["rows"][0]["mismatch"] is True
    box.advance(3600)
    metrics.observe(box.tick(), None, box.settings.owner_id)  # reads again: still differs
    told = [e for e in box.events("web") if e["reason"] == "ChargeDiffersFromListPrice"]
    assert len(told) == 1  # not every hour
    assert _sample(metrics.registry, "reconciler_spend_mismatched_pods_total") == 1


def _ledger_until(box: Sandbox, instance_id: str, until: str) -> float:
    with _api(box) as api:
        answer = api.get(
            f"{box.runpod_sim.base_url}/v2/billing/pods",
            params={"podId": instance_id, "bucketSize": "hour", "endTime": until},
        ).json()
    return float(answer["metadata"]["totals"]["totalAmount"])


def test_an_instance_billed_after_its_pod_ended_is_a_leak(box: Sandbox) -> None:
    instance = _running(box, "web", ports=[22])
    box.runpod_sim.faults.delete_keeps_billing()
    box.kube_sim.delete_pod("default", "web", grace_seconds=30)
    ended = box.clock.now()
    box.tick()  # terminates the instance: the DELETE answers 204, yet it bills on
    box.tick()
    assert box.pod("web") is None
    box.advance(3 * 3600 + 125)
    report = box.tick()
    leaks = [
        a for a in report.done if isinstance(a, Terminate) and a.reason is TerminateReason.LEAK
    ]
    assert [a.instance_id for a in leaks] == [instance["id"]]
    metrics = Metrics()
    metrics.observe(report, None, box.settings.owner_id)
    # Counted in seconds by our clock, from the pod's end plus the grace until now (not
    # in the billing's whole hours).
    gone_by = (box.clock.now() - ended).total_seconds() - box.settings.timing.orphan_grace_time
    assert _sample(metrics.registry, "reconciler_leaked_instance_seconds_total") == gone_by
    billed = box.runpod_sim.billed(instance["id"])["total"]
    box.advance(3600)
    assert box.runpod_sim.billed(instance["id"])["total"] == billed  # billing ended


def test_a_namespace_cap_holds_while_another_namespace_creates(box: Sandbox) -> None:
    box.ensure_namespace("team-a")
    namespace = box.kube_sim.get("namespaces", None, "team-a") or {}
    namespace["metadata"]["annotations"] = {"runpod.io/max-instances": "1"}
    box.kube_sim.put("namespaces", namespace)
    for name in ("a1", "a2"):
        box.add_pod(name, namespace="team-a")
    for name in ("b1", "b2", "b3"):
        box.add_pod(name, namespace="team-b")
    for _ in range(3):
        box.tick()
        box.advance(30)
    per_namespace: dict[str, int] = {}
    for instance in box.owned_instances():
        pod_uid = instance["env"][POD_UID_ENV]
        row = next(r for r in box.store.load_rows() if r.pod_uid == pod_uid)
        per_namespace[row.namespace] = per_namespace.get(row.namespace, 0) + 1
    assert per_namespace == {"team-a": 1, "team-b": 3}
    held = [
        e
        for name in ("a1", "a2")
        for e in box.events(name, "team-a")
        if e["reason"] == "BudgetExceeded"
    ]
    assert len(held) == 1 and "namespace team-a: 1/1 instances" in held[0]["message"]
    assert "namespace team-a: 1/1 instances" in _cli(box, "state", "show")


def test_instances_without_pods_are_one_gauge_until_terminated(box: Sandbox) -> None:
    instance = _running(box, "web", ports=[22])
    _running(box, "other", ports=[22])
    metrics = Metrics()
    metrics.observe(box.tick(), None, box.settings.owner_id)
    assert _sample(metrics.registry, "reconciler_instances_without_pods") == 0
    box.kube_sim.delete_pod("default", "web", grace_seconds=0)  # gone, nothing terminated
    assert box.pod("web") is None
    metrics.observe(box.tick(), None, box.settings.owner_id)
    assert _sample(metrics.registry, "reconciler_instances_without_pods") == 1
    box.advance(box.settings.timing.orphan_grace_time + 1)
    box.tick()  # the second sighting past the grace: terminated
    assert instance["id"] not in box.runpod_sim.instances
    metrics.observe(box.tick(), None, box.settings.owner_id)
    assert _sample(metrics.registry, "reconciler_instances_without_pods") == 0


def test_every_request_of_the_reconciler_carries_its_user_agent(box: Sandbox) -> None:
    _running(box, "web", ports=[22])
    agents = {r.headers.get("User-Agent") for r in box.runpod_sim.requests}
    assert agents == {USER_AGENT}


def _sample(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    assert value is not None, name
    return value


def test_a_namespace_is_read_once_a_minute_while_its_pod_waits(box: Sandbox) -> None:
    """One GET of the namespace, kept 60 s, read again after (docs/guides/money.md)."""
    box.ensure_namespace("team-a")
    namespace = box.kube_sim.get("namespaces", None, "team-a") or {}
    namespace["metadata"]["annotations"] = {"runpod.io/max-instances": "0"}
    box.kube_sim.put("namespaces", namespace)
    box.add_pod("held", namespace="team-a")

    def reads() -> int:
        return sum(
            1
            for method, path, _query, _status in box.kube_sim.requests
            if (method, path) == ("GET", "/api/v1/namespaces/team-a")
        )

    box.tick()
    assert reads() == 1
    box.advance(59)
    box.tick()
    assert reads() == 1
    box.advance(1)
    box.tick()
    assert reads() == 2
