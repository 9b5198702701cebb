"""`reconciler offers` as a real process against both simulators: a manifest's offers
from the reconciler's kept catalog with no RunPod request, ranked as the planner ranks
(its first row is where the planner creates the pod) and placed as it places (a claim's
network volume pins its data center); a cold copy fetched with one
request, said on stderr; a pod named either way; bad input as a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from reconciler.demo.examples import CHECKPOINTS, GPU_POD, TORCHRUN_JOB
from reconciler.demo.live import LiveWorld
from reconciler.demo.run import install_storage_class
from reconciler.demo.sandbox import API_KEY, Sandbox

CATALOG = "/v2/catalog/gpus"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        # The kept catalog's age is judged against the wall clock, as a person runs it.
        sandbox.advance(max(0.0, (datetime.now(UTC) - sandbox.clock.now()).total_seconds()))
        yield sandbox


def offers(box: Sandbox, *args: str, key: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNPOD_API_KEY"}
    if key:
        env["RUNPOD_API_KEY"] = API_KEY
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "--database-url",
            box.database_url,
            "offers",
            "--kubeconfig",
            box.kubeconfig,
            "--runpod-url",
            box.runpod_sim.base_url,
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def catalog_reads(box: Sandbox) -> int:
    return sum(r.path == CATALOG for r in box.runpod_sim.requests)


def test_a_manifests_offers_come_from_the_kept_catalog_as_the_planner_ranks(
    box: Sandbox, tmp_path: Path
) -> None:
    pod = box.add_pod("notebook")
    box.tick()  # the pod's create reads the catalog; the reconciler keeps it
    instance = box.instance_for(pod)
    assert instance is not None
    manifest = tmp_path / "gpu-pod.yaml"
    manifest.write_text(GPU_POD)
    before = catalog_reads(box)
    done = offers(box, "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    assert catalog_reads(box) == before  # warm: RunPod is not asked
    assert done.stderr == ""
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["TYPE", "COUNT", "DATACENTER", "CLOUD", "PRICE/HR", "STOCK"]
    assert rows
    # The same pod on the node: its first row is what the planner created.
    named = offers(box, "default/notebook")
    assert named.returncode == 0, named.stderr
    first = named.stdout.splitlines()[1]
    assert first.startswith(instance["gpu"]["id"] + " "), (first, instance["gpu"])
    assert first.split()[-4] == instance["dataCenterId"], first
    assert offers(box, "-n", "default", "notebook").stdout == named.stdout


def test_a_cold_catalog_is_fetched_with_one_request_and_said(box: Sandbox, tmp_path: Path) -> None:
    manifest = tmp_path / "gpu-pod.yaml"
    manifest.write_text(GPU_POD)
    refused = offers(box, "-f", str(manifest))
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "RUNPOD_API_KEY" in refused.stderr
    done = offers(box, "-f", str(manifest), key=True)
    assert done.returncode == 0, done.stderr
    assert catalog_reads(box) == 1
    assert "(1 request)" in done.stderr
    assert API_KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("kind: Pod\nmetadata: {name: x\n", "is not valid YAML"),
        ("kind: Service\nmetadata: {name: x}\n", "holds 0 Pods and Jobs"),
        (
            GPU_POD.replace('"24"    # GB per GPU', '"640"'),
            "no acceptable GPU type has 640 GB",
        ),
    ],
)
def test_bad_input_is_one_line(box: Sandbox, tmp_path: Path, text: str, says: str) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(text)
    done = offers(box, "-f", str(manifest), key=True)
    assert done.returncode == 1
    error = done.stderr.splitlines()[-1]  # after what fetching the catalog cost, if it did
    assert error.startswith("Error: ") and says in error, done.stderr
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("Error")]) == 1


MALFORMED = {
    "annotations-as-a-list": (
        GPU_POD.replace(
            '    runpod.io/max-price: "1.00"            # USD/h for the whole pod\n'
            '    runpod.io/required-gpu-memory: "24"    # GB per GPU\n',
            "    - runpod.io/max-price\n",
        ),
        "metadata.annotations must be a map, not a list",
    ),
    "resources-as-a-string": (
        GPU_POD.replace(
            "      resources:\n        limits:\n          nvidia.com/gpu: 1\n",
            "      resources: lots\n",
        ),
        "spec.containers[0].resources must be a map, not a string",
    ),
    "limits-as-a-list": (
        GPU_POD.replace("          nvidia.com/gpu: 1\n", "          - nvidia.com/gpu\n"),
        "spec.containers[0].resources.limits must be a map, not a list",
    ),
    "template-metadata-as-a-list": (
        TORCHRUN_JOB.replace(
            '    metadata:\n      annotations:\n        runpod.io/cluster: "true"\n',
            "    metadata:\n      - annotations\n",
        ),
        "spec.template.metadata must be a map, not a list",
    ),
    "deep-nesting": (
        GPU_POD + "  extra: " + "[" * 20_000 + "]" * 20_000 + "\n",
        "nested too deeply to be a manifest",
    ),
    "a-name-as-a-map": (
        GPU_POD.replace("  name: gpu-notebook\n", "  name: {a: b}\n"),
        "metadata.name must be a string, not a map",
    ),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_manifest_is_one_line(box: Sandbox, tmp_path: Path, name: str) -> None:
    text, says = MALFORMED[name]
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(text)
    done = offers(box, "-f", str(manifest), key=True)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == f"Error: {manifest}: {says}", done.stderr


def test_a_manifest_that_is_not_utf8_is_one_line(box: Sandbox, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    data = GPU_POD.replace("gpu-notebook", "gpu-\xe9").encode("latin-1")
    manifest.write_bytes(data)
    done = offers(box, "-f", str(manifest), key=True)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    offset = data.index(b"\xe9")
    assert done.stderr.strip() == (
        f"Error: {manifest} is not UTF-8 text (byte 0xe9 at offset {offset})"
    ), done.stderr


def test_an_indexed_cluster_job_is_offered_as_one_cluster_of_its_pods(
    box: Sandbox, tmp_path: Path
) -> None:
    """Each row is for the whole Instant Cluster: COUNT per pod times its pods, the
    price of all of them; the first row is the GPU type and data center the planner
    asks RunPod's cluster create for."""
    box.add_indexed_job("torchrun", 2)
    box.tick()  # the gang's create reads the catalog (kept) and posts the cluster
    [post] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    manifest = tmp_path / "torchrun-job.yaml"
    manifest.write_text(TORCHRUN_JOB)
    as_cluster = offers(box, "-f", str(manifest), "-o", "json")
    assert as_cluster.returncode == 0, as_cluster.stderr
    alone = tmp_path / "alone.yaml"
    alone.write_text(TORCHRUN_JOB.replace('runpod.io/cluster: "true"', 'note: "alone"'))
    single = offers(box, "-f", str(alone), "-o", "json")
    assert single.returncode == 0, single.stderr
    grouped_rows, single_rows = json.loads(as_cluster.stdout), json.loads(single.stdout)
    assert len(grouped_rows) == len(single_rows) > 0
    for grouped, one in zip(grouped_rows, single_rows, strict=True):
        assert (grouped["type"], grouped["datacenter"]) == (one["type"], one["datacenter"])
        assert (grouped["pods"], grouped["count"], one["pods"]) == (2, 1, 1)
        assert grouped["pricePerHour"] == pytest.approx(2 * one["pricePerHour"])
    table = offers(box, "-f", str(manifest)).stdout.splitlines()
    assert " 2 x 1 GPU " in table[1]
    rows = table[1 : 1 + len(grouped_rows)]  # a CUDA floor line may follow
    shown = [float(line.split()[-2]) for line in rows]  # PRICE/HR, before STOCK
    assert shown == pytest.approx([r["pricePerHour"] for r in grouped_rows], abs=0.001)
    [pod, _] = box.job_pods("torchrun")
    named = offers(box, f"default/{pod['metadata']['name']}")
    assert named.returncode == 0, named.stderr
    first = named.stdout.splitlines()[1]
    assert first.startswith(post.body["compute"]["gpuTypeId"] + " "), (first, post.body)


def test_a_cluster_job_that_cannot_be_one_is_refused_in_one_line(
    box: Sandbox, tmp_path: Path
) -> None:
    manifest = tmp_path / "torchrun-job.yaml"
    manifest.write_text(TORCHRUN_JOB.replace("parallelism: 2", "parallelism: 1"))
    done = offers(box, "-f", str(manifest), key=True)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "Error: default/torchrun: Job torchrun asks for an Instant Cluster: its parallelism "
        "(1) must equal its completions (2), so that all its pods run at once"
    )


def test_a_gangs_offers_are_ranked_on_cluster_stock_with_all_members_priced(
    box: Sandbox, tmp_path: Path
) -> None:
    """A type pods can get but clusters cannot is no gang's first offer: the rows come
    from the kept cluster catalog (`product=CLUSTER`), the one the planner ranks on, and
    each is priced for all the cluster's pods."""
    box.add_indexed_job("first", 2)
    box.tick()
    [post] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    best = post.body["compute"]["gpuTypeId"]
    account = box.runpod_sim.account
    for datacenter in account.catalog.datacenters_of(best):
        account.set_capacity(best, datacenter, 0, "CLUSTER")
    box.advance(box.settings.timing.catalog_ttl + 1)
    box.add_indexed_job("torchrun", 2)
    box.tick()  # the cluster catalog fetched again, kept; the gang's create ranked on it
    [_, second] = [
        r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")
    ]
    box.advance(max(0.0, (datetime.now(UTC) - box.clock.now()).total_seconds()))
    manifest = tmp_path / "torchrun-job.yaml"
    manifest.write_text(TORCHRUN_JOB)
    reads = catalog_reads(box)
    done = offers(box, "-f", str(manifest), "-o", "json")
    assert done.returncode == 0, done.stderr
    assert catalog_reads(box) == reads  # the kept copy
    rows = json.loads(done.stdout)
    assert rows[0]["type"] == second.body["compute"]["gpuTypeId"] != best
    assert all(row["cloud"] == "SECURE" and row["pods"] == 2 for row in rows)
    [gpu] = [g for g in account.catalog.gpus.values() if g.id == rows[0]["type"]]
    assert rows[0]["pricePerHour"] == pytest.approx(2 * gpu.price_for("SECURE"))


def test_a_pod_whose_claim_is_a_network_volume_is_offered_only_in_its_data_center(
    box: Sandbox, tmp_path: Path
) -> None:
    """The README's claim and its pod: once the claim's volume is made, the offers are the
    planner's, pinned to the volume's data center (read from the claim's PV), as the
    pod's create is; before, a claim not bound yet pins nothing, and says so."""
    install_storage_class(box)
    manifest = tmp_path / "checkpoints.yaml"
    manifest.write_text(CHECKPOINTS)
    early = offers(box, "-f", str(manifest), "-o", "json", key=True)
    assert early.returncode == 0, early.stderr
    assert 'persistentvolumeclaim "checkpoints" not found' in early.stderr
    assert len({row["datacenter"] for row in json.loads(early.stdout)}) > 1, early.stdout
    for document in yaml.safe_load_all(CHECKPOINTS):
        document["metadata"]["namespace"] = "default"
        box.kube_sim.put(
            "persistentvolumeclaims" if document["kind"] != "Pod" else "pods", document
        )
    world = LiveWorld(box)
    for _ in range(10):
        world.beat(5)
        trainer = box.pod("trainer") or {}
        if "runpod.io/datacenter" in (trainer["metadata"].get("annotations") or {}):
            break
    claim = box.kube_sim.get("persistentvolumeclaims", "default", "checkpoints")
    pv = box.kube_sim.get("persistentvolumes", None, claim["spec"]["volumeName"])
    where = pv["spec"]["csi"]["volumeAttributes"]["dataCenter"]
    done = offers(box, "-f", str(manifest), "-o", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and {row["datacenter"] for row in rows} == {where}, (where, done.stdout)
    assert trainer["metadata"]["annotations"]["runpod.io/datacenter"] == where


def test_a_pod_that_names_a_network_volume_is_offered_only_where_it_is(
    box: Sandbox, tmp_path: Path
) -> None:
    """`runpod.io/network-volume-id`: the account's volumes are listed (one request, said)
    to find the volume's data center, as the create does; the offers are pinned there."""
    volume = box.runpod_sim.add_volume("datasets", 50, "US-KS-2")
    pinned = GPU_POD.replace(
        "  annotations:\n",
        f'  annotations:\n    runpod.io/network-volume-id: "{volume.id}"\n',
    )
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(pinned)
    done = offers(box, "-f", str(manifest), "-o", "json", key=True)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and {row["datacenter"] for row in rows} == {"US-KS-2"}, done.stdout
    listed = [r for r in box.runpod_sim.requests if r.path == "/v2/network-volumes"]
    assert len(listed) == 1 and "network volumes" in done.stderr and "(1 request)" in done.stderr


def test_the_cuda_floor_it_used_is_shown_and_only_types_with_such_hosts_rank(
    box: Sandbox, tmp_path: Path
) -> None:
    box.add_pod("notebook")
    box.tick()  # the catalog kept, with each GPU type's hosts' CUDA versions
    manifest = tmp_path / "cuda.yaml"
    manifest.write_text(
        GPU_POD.replace("jupyter/base-notebook", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")
    )
    table = offers(box, "-f", str(manifest))
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[-1] == (
        "CUDA floor 12.4 (from the image tag of pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime)"
        ": only hosts with CUDA 12.9, 12.8, 12.6, 12.4"
    )
    annotated = GPU_POD.replace(
        "annotations:\n", 'annotations:\n    runpod.io/min-cuda-version: "12.8"\n', 1
    )
    manifest.write_text(annotated)
    rows = json.loads(offers(box, "-f", str(manifest), "-o", "json").stdout)
    types = {row["type"] for row in rows}
    assert "NVIDIA A100 80GB PCIe" not in types  # its hosts report 12.6 at most
    assert "NVIDIA GeForce RTX 4090" in types
    assert {row["cudaFloor"] for row in rows} == {"12.8"}
    assert rows[0]["allowedCudaVersions"] == ["12.9", "12.8"]
    manifest.write_text(annotated.replace('"12.8"', '"12.x"'))
    bad = offers(box, "-f", str(manifest))
    assert bad.returncode != 0
    assert "runpod.io/min-cuda-version" in bad.stderr and "major.minor" in bad.stderr
