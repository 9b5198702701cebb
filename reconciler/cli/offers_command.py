"""`reconciler offers`: the GPU types (or CPU sizes) a pod would get, best first, with
where, at what price and how much stock, before it runs; for a manifest (`-f`) or a pod
in the cluster.

The ranking and placement are the planner's own (`core.translate.request.placed_offers`:
ranked, then pinned to the data center of the pod's network volume, read from its claim's
PV in the cluster or, for `runpod.io/network-volume-id`, from RunPod's list). The catalog
is the copy the reconciler keeps in its database each time it fetches one, so while that
copy is younger than --catalog-ttl the command sends RunPod nothing. Without a fresh copy
it fetches the catalog itself (one request) and says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import click
import yaml

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store import db
from reconciler.cli.connection import (
    connection_options,
    reaching,
)
from reconciler.cli.manifest_shape import JOB, POD, shape_problem
from reconciler.cli.options import GroupedHelp, settings_from, some_settings_options
from reconciler.cli.output import output_option
from reconciler.cli.pod_argument import METAVAR, namespace_option, pod_of
from reconciler.cli.state_view import render_table
from reconciler.core.capacity.refusals import GANG_REFUSALS, GangRefusal
from reconciler.core.config import Settings
from reconciler.core.domain import Cloud, CpuFlavor, GpuType, KubeObject, RunPodVolume
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.resources.clusters import why_not_a_cluster
from reconciler.core.translate import cuda
from reconciler.core.translate.claims import ClaimMount, claim_mount, claim_names
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.cpus import runs_on_cpu
from reconciler.core.translate.disks import names_network_volume
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.offers import OfferRow, offer_rows
from reconciler.core.translate.request import placed_offers
from reconciler.runtime import process_log
from reconciler.runtime.process.wiring import open_store
from reconciler.runtime.tick.catalog import CLUSTER_CATALOG

COLUMNS = ("TYPE", "COUNT", "DATACENTER", "CLOUD", "PRICE/HR", "STOCK")

# What ranks a pod's offers besides the pod: the node's limits, as `sync` takes them.
RANKING_SETTINGS = (
    "max_gpu_price",
    "cloud_type",
    "pods_without_gpu",
    "datacenter_ids",
    "catalog_ttl",
)


@dataclass(frozen=True)
class Catalog:
    entries: Sequence[GpuType | CpuFlavor]
    note: str | None
    """What getting it cost, when it was not the reconciler's fresh copy."""


@click.command("offers", cls=GroupedHelp)
@click.argument("target", metavar=f"[{METAVAR}]", required=False)
@click.option(
    "--filename",
    "-f",
    type=click.File("rb"),
    default=None,
    help="A manifest holding one Pod or Job ('-': standard input), instead of a pod.",
)
@namespace_option
@connection_options(runpod_api_key=False)
@click.option(
    "--runpod-api-key",
    envvar="RUNPOD_API_KEY",
    default=None,
    show_envvar=True,
    show_default=False,
    help="RunPod API key: needed only when the reconciler's copy of the catalog is "
    "missing or older than --catalog-ttl (then one request fetches it).",
)
@some_settings_options(*RANKING_SETTINGS)
@output_option
@click.pass_obj
def offers_command(
    obj: Any,
    target: str | None,
    filename: IO[bytes] | None,
    namespace: str | None,
    kubeconfig: str | None,
    kube_context: str | None,
    runpod_url: str,
    runpod_api_key: str | None,
    output: str,
    **options: Any,
) -> None:
    """Show the offers a pod would get, best first: GPU type (or CPU flavor), count,
    data center, cloud, price per hour and stock, in the order the reconciler tries them.

    Name a pod ([NAMESPACE/]POD, or -n NAMESPACE POD) or a manifest (-f). The catalog
    is the reconciler's copy in --database-url while younger than --catalog-ttl (no
    RunPod request); else it is fetched (one request, said on standard error).
    """
    settings = settings_from(options)
    if runpod_api_key:
        process_log.register_secret(runpod_api_key)
    pod, job = _the_pod(target, filename, namespace, kubeconfig, kube_context)
    name = f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata'].get('name')}"
    with _unreadable_shapes(name, filename is not None):
        try:
            on_cpu = runs_on_cpu(pod, job, settings)
        except TranslationError as error:
            raise click.ClickException(f"{name}: {error.message}") from None
        members = _cluster_size(name, pod, job, on_cpu)
    kind = "cpu" if on_cpu else CLUSTER_CATALOG if members > 1 else "gpu"
    catalog = _catalog(obj.database_url, kind, settings, runpod_url, runpod_api_key)
    if catalog.note:
        click.echo(catalog.note, err=True)
    gpus = [e for e in catalog.entries if isinstance(e, GpuType)]
    cpus = [e for e in catalog.entries if isinstance(e, CpuFlavor)]
    with _unreadable_shapes(name, filename is not None):
        claim = _claim(name, pod, kubeconfig, kube_context)
        volumes = _network_volumes(pod, job, runpod_url, runpod_api_key)
        try:
            offers = placed_offers(pod, job, gpus, cpus, settings, volumes, claim)
            rows = offer_rows(offers, gpus, cpus)
            floor = None if on_cpu else cuda.pod_floor(pod, job)
        except TranslationError as error:
            raise click.ClickException(f"{name}: {error.message}") from None
    if members > 1:  # Instant Clusters are made in Secure Cloud only
        rows = [row for row in rows if row.offer.cloud is Cloud.SECURE]
    hosts = cuda.allowed_versions(floor, gpus)
    if output == "json":
        records = [_record(row, members) for row in rows]
        for record in records:
            record["cudaFloor"] = None if floor is None else floor.text
            record["allowedCudaVersions"] = list(hosts)
        click.echo(json.dumps(records, indent=2))
    else:
        click.echo(render_table([_cells(row, members) for row in rows], COLUMNS))
        if floor is not None:
            click.echo(
                f"CUDA floor {floor.text} (from the {floor.source}): only hosts with CUDA "
                f"{', '.join(hosts)}"
            )


@contextmanager
def _unreadable_shapes(name: str, from_a_file: bool) -> Iterator[None]:
    """A manifest nobody validated, with a shape `manifest_shape` does not check and the
    planner cannot read: one line, not a traceback."""
    try:
        yield
    except (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError) as error:
        if not from_a_file:
            raise
        raise click.ClickException(
            f"{name}: the manifest has a field whose shape the API server would refuse "
            f"({type(error).__name__})"
        ) from None


def _claim(
    name: str, pod: KubeObject, kubeconfig: str | None, kube_context: str | None
) -> ClaimMount | None:
    """The network volume the pod's claims give it, read from the cluster as a create
    reads it (a GET per claim and PV, only for a pod that mounts claims): it pins the
    offers to the volume's data center. A claim not bound yet pins nothing yet: said."""
    names = claim_names(pod)
    if not names:
        return None
    namespace = pod["metadata"].get("namespace") or "default"
    with reaching("cannot read the pod's claims"):
        kube = KubeClient.from_config(kubeconfig, kube_context)
        try:
            claims = {claim: kube.storage.read_claim(namespace, claim) for claim in names}
            bound = {c["spec"].get("volumeName") for c in claims.values() if c is not None}
            volumes = {pv: kube.storage.read_volume(pv) for pv in bound if pv}
        finally:
            kube.close()
    try:
        return claim_mount(pod, choose_container(pod), claims, volumes)
    except TranslationError as error:
        if error.reason is not PodReason.CLAIM_NOT_BOUND:
            raise click.ClickException(f"{name}: {error.message}") from None
        click.echo(
            f"{name}: {error.message}: its network volume's data center is not known yet, "
            "so these offers are not limited to one (the volume is made in its class's "
            "dataCenter, else the first of runpod.io/datacenter-ids, else the best offer's)",
            err=True,
        )
        return None


def _network_volumes(
    pod: KubeObject, job: KubeObject | None, runpod_url: str, api_key: str | None
) -> list[RunPodVolume] | None:
    """The account's network volumes, listed (one request, said) only for a pod that names
    one by id: its data center pins the offers."""
    if not names_network_volume(pod, job):
        return None
    if not api_key:
        raise click.ClickException(
            "the pod names a network volume (runpod.io/network-volume-id): set "
            "RUNPOD_API_KEY to list where it is (one request)"
        )
    with reaching("cannot list RunPod's network volumes"), RunPodClient(api_key, runpod_url) as r:
        listed = r.volumes.list()
    click.echo("listed RunPod's network volumes for the pod's network volume (1 request)", err=True)
    return listed


def _cluster_size(name: str, pod: KubeObject, job: KubeObject | None, on_cpu: bool) -> int:
    """How many pods one offer is for: an Indexed Job's pods that ask for an Instant
    Cluster run as one cluster of `completions` identical pods, so each offer is for
    all of them; 1 for any other pod. A Job that cannot be a cluster is refused here
    with the reason the planner would give."""
    if not podinfo.asks_for_cluster(pod):
        return 1
    refusal = (
        GANG_REFUSALS[GangRefusal.NOT_A_JOB]
        if job is None
        else why_not_a_cluster(job, [])  # its shape; no pods to compare
        or (
            GANG_REFUSALS[GangRefusal.NOT_GPU].format(job=job["metadata"].get("name"))
            if on_cpu
            else None
        )
    )
    if refusal is not None:
        raise click.ClickException(f"{name}: {refusal}")
    assert job is not None
    return int(job["spec"]["completions"])


def _the_pod(
    target: str | None,
    filename: IO[bytes] | None,
    namespace: str | None,
    kubeconfig: str | None,
    kube_context: str | None,
) -> tuple[KubeObject, KubeObject | None]:
    if (target is None) == (filename is None):
        raise click.UsageError("name a pod ([NAMESPACE/]POD) or a manifest (-f), one of them")
    if filename is not None:
        data = filename.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise click.ClickException(
                f"{filename.name} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
                f"{error.start})"
            ) from None
        return manifest_pod(text, filename.name)
    assert target is not None
    namespace, name = pod_of(target, namespace)
    with reaching("cannot read the pod"):
        kube = KubeClient.from_config(kubeconfig, kube_context)
        pod = kube.pods.find(namespace, name)
        if pod is None:
            raise click.ClickException(f'pod "{name}" not found in namespace {namespace}')
        return pod, kube.jobs.owning(pod)


def manifest_pod(text: str, source: str) -> tuple[KubeObject, KubeObject | None]:
    """The pod a manifest describes (a Pod, or a Job's pod template) and its Job."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise click.ClickException(f"{source} is not valid YAML{line}") from None
    except RecursionError:
        raise click.ClickException(f"{source}: nested too deeply to be a manifest") from None
    found = [d for d in documents if isinstance(d, dict) and d.get("kind") in ("Pod", "Job")]
    if len(found) != 1:
        raise click.ClickException(
            f"{source} holds {len(found)} Pods and Jobs: offers takes a manifest with one"
        )
    manifest = found[0]
    if not isinstance(manifest.get("metadata"), dict) or not isinstance(manifest.get("spec"), dict):
        raise click.ClickException(f"{source}: the {manifest['kind']} has no metadata or spec")
    problem = shape_problem(manifest, POD if manifest["kind"] == "Pod" else JOB)
    if problem is not None:
        raise click.ClickException(f"{source}: {problem}")
    if manifest["kind"] == "Pod":
        return _checked(manifest, source), None
    template = manifest["spec"].get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise click.ClickException(f"{source}: the Job has no spec.template.spec")
    metadata = dict(template.get("metadata") or {})
    metadata.setdefault("name", manifest["metadata"].get("name"))
    metadata.setdefault("namespace", manifest["metadata"].get("namespace"))
    return _checked({"metadata": metadata, "spec": template["spec"]}, source), manifest


def _checked(pod: KubeObject, source: str) -> KubeObject:
    containers = pod["spec"].get("containers")
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        raise click.ClickException(f"{source}: the pod has no list of containers")
    if not containers:
        raise click.ClickException(f"{source}: the pod has no container")
    return pod


_CATALOG_NAMES = {"cpu": "CPU catalog", "gpu": "GPU catalog", CLUSTER_CATALOG: "cluster catalog"}


def _catalog(
    database_url: str, kind: str, settings: Settings, runpod_url: str, api_key: str | None
) -> Catalog:
    """The catalog of `kind`: `cpu`, `gpu`, or `cluster` (GPU types with Instant Cluster
    stock, `product=CLUSTER`, which ranks a gang's offers as the planner does)."""
    what = _CATALOG_NAMES[kind]
    kept, why = _kept_copy(database_url, kind, settings.timing.catalog_ttl)
    if kept is not None:
        return Catalog(kept, None)
    if not api_key:
        raise click.ClickException(
            f"{why}, and no RunPod API key to fetch the {what} with: set RUNPOD_API_KEY "
            "(one request), or point --database-url at the reconciler's database"
        )
    with reaching(f"cannot fetch RunPod's {what}"), RunPodClient(api_key, runpod_url) as r:
        entries: Sequence[GpuType | CpuFlavor] = (
            r.catalog.cpu_flavors()
            if kind == "cpu"
            else r.catalog.gpu_types(product="CLUSTER" if kind == CLUSTER_CATALOG else "POD")
        )
    return Catalog(entries, f"{why}: fetched RunPod's {what} (1 request)")


def _kept_copy(
    database_url: str, kind: str, ttl: float
) -> tuple[list[GpuType | CpuFlavor] | None, str]:
    """The reconciler's copy of the catalog if it is fresh, else None and why not."""
    if db.missing_sqlite_file(database_url) is not None:
        return None, "no reconciler database here"
    try:
        kept = open_store(database_url, upgrade=False).catalogs.load(kind)
    except Exception as error:  # any unreadable store: the catalog can still be fetched
        return None, f"the reconciler's database cannot be read ({type(error).__name__})"
    what = _CATALOG_NAMES[kind]
    if kept is None:
        return None, f"the reconciler has kept no {what} yet"
    entries, fetched_at = kept
    age = datetime.now(UTC) - fetched_at
    if age > timedelta(seconds=ttl):
        return None, (
            f"the reconciler's {what} is {int(age.total_seconds())} s old (--catalog-ttl {ttl:g} s)"
        )
    return entries, ""


def _cells(row: OfferRow, members: int) -> tuple[str, ...]:
    """A cluster's offer: COUNT per pod times its pods, PRICE/HR for all of them."""
    offer = row.offer
    count = f"{offer.count} vCPU" if offer.on_cpu else f"{offer.count} GPU"
    return (
        offer.offer_id,
        f"{members} x {count}" if members > 1 else count,
        row.datacenter or "(any)",
        offer.cloud.value,
        f"{offer.hourly_price * members:.3f}",
        row.stock.name.capitalize(),
    )


def _record(row: OfferRow, members: int) -> dict[str, Any]:
    offer = row.offer
    return {
        "type": offer.offer_id,
        "name": offer.name,
        "kind": "cpu" if offer.on_cpu else "gpu",
        "count": offer.count,
        "pods": members,
        "datacenter": row.datacenter,
        "cloud": offer.cloud.value,
        "pricePerHour": offer.hourly_price * members,
        "stock": row.stock.name,
    }
