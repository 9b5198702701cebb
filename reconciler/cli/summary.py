"""How a tick is reported on the terminal: a short table for people, JSON for scripts."""

from __future__ import annotations

import json
from typing import Any, assert_never

from reconciler.cli.state_view import render_table
from reconciler.core.actions import (
    Action,
    Adopt,
    Bind,
    ClaimEvent,
    Create,
    CreateCluster,
    CreateNetworkVolume,
    CreateVolumeObject,
    DeleteCluster,
    DeleteClusterRow,
    DeleteNetworkVolume,
    DeleteRegistryAuth,
    DeleteRow,
    DeleteVolumeObject,
    EnsureRegistryAuth,
    Event,
    FinalizePod,
    MarkClaimSelected,
    PatchMetadata,
    PatchStatus,
    ReleaseClaim,
    ResizeNetworkVolume,
    RestoreTags,
    SaveClusterRow,
    SaveRow,
    Terminate,
)
from reconciler.runtime.tick_report import TickReport


def report_record(report: TickReport) -> dict[str, Any]:
    return {
        "tick": report.tick_id,
        "ok": report.ok,
        "pods": report.pods,
        "instances": report.instances,
        "planned": dict(report.planned),
        "applied": dict(report.applied),
        "failed": dict(report.failed),
        "errors": report.errors,
        "skipped": report.skipped,
        "deferred_creates": report.deferred_creates,
        "duration_seconds": round(report.duration, 3),
    }


def describe(action: Action) -> tuple[str, str, str]:
    """(kind, subject, detail) of one planned action, for --dry-run."""
    kind = type(action).__name__
    match action:
        case SaveRow(row=row):
            return kind, f"{row.namespace}/{row.name}", row.state.value
        case DeleteRow():
            return kind, "", ""
        case Create(pod=pod, candidates=candidates):
            return kind, str(pod), ", ".join(c.offer_id for c in candidates)
        case Terminate(pod=pod, instance_id=instance_id, detail=detail):
            return kind, str(pod) if pod is not None else instance_id, detail
        case PatchStatus(pod=pod, status=status):
            return kind, str(pod), str(status.get("phase", ""))
        case Adopt(pod=pod) | PatchMetadata(pod=pod) | FinalizePod(pod=pod):
            return kind, str(pod), ""
        case Bind(pod=pod, detail=detail):
            return kind, str(pod), detail
        case RestoreTags(pod=pod, instance_id=instance_id):
            return kind, str(pod) if pod is not None else instance_id, "owner tags lost"
        case Event(pod=pod, reason=reason):
            return kind, str(pod), reason.value
        case EnsureRegistryAuth(pod=pod, name=name):
            return kind, str(pod), name
        case DeleteRegistryAuth(registry_id=registry_id, name=name):
            return kind, registry_id, name
        case CreateCluster(row=row, candidates=candidates):
            return (
                kind,
                f"{row.namespace}/{row.job_name}",
                ", ".join(f"{c.pod_count}x{c.gpu_type_id}" for c in candidates),
            )
        case DeleteCluster(cluster_id=cluster_id, detail=detail):
            return kind, cluster_id, detail
        case SaveClusterRow(row=row):
            return kind, f"{row.namespace}/{row.job_name}", row.state.value
        case DeleteClusterRow(gang=gang):
            return kind, gang, ""
        case CreateNetworkVolume(claim=claim, size_gb=size, datacenter=datacenter):
            return kind, str(claim), f"{size} GB in {datacenter}"
        case ResizeNetworkVolume(claim=claim, volume_id=volume_id, size_gb=size):
            return kind, str(claim), f"{volume_id} to {size} GB"
        case (
            CreateVolumeObject(claim=claim)
            | MarkClaimSelected(claim=claim)
            | ReleaseClaim(claim=claim)
        ):
            return kind, str(claim), ""
        case ClaimEvent(claim=claim, reason=reason):
            return kind, str(claim), reason.value
        case DeleteNetworkVolume(volume_id=volume_id, pv_name=pv_name):
            return kind, pv_name or "(no PV)", volume_id
        case DeleteVolumeObject(pv_name=pv_name):
            return kind, pv_name, ""
        case _:
            assert_never(action)


def render(report: TickReport, output: str, dry_run: bool) -> str:
    if output == "json":
        record = report_record(report)
        if dry_run:
            record["plan"] = [
                dict(zip(("kind", "subject", "detail"), describe(a), strict=True))
                for a in report.actions
            ]
        return json.dumps(record, indent=2)
    lines = [_headline(report, dry_run)]
    if dry_run:
        lines.append(
            render_table([describe(a) for a in report.actions], ("ACTION", "SUBJECT", "DETAIL"))
            if report.actions
            else "nothing to do"
        )
    elif report.planned:
        kinds = sorted(report.planned)
        lines.append(
            render_table(
                [
                    (k, str(report.planned[k]), str(report.applied[k]), str(report.failed[k]))
                    for k in kinds
                ],
                ("ACTION", "PLANNED", "APPLIED", "FAILED"),
            )
        )
    lines += [f"error: {e}" for e in report.errors]
    return "\n".join(lines)


def _headline(report: TickReport, dry_run: bool) -> str:
    state = "ok" if report.ok else "FAILED"
    if report.skipped:
        state += f" ({report.skipped})"
    elif report.deferred_creates:
        state += f" ({report.deferred_creates} creates wait for a later tick)"
    name = "dry run" if dry_run else f"tick #{report.tick_id}"
    return (
        f"{name} {state} in {report.duration:.2f} s: {report.pods} pods, "
        f"{report.instances} owned instances, {sum(report.planned.values())} actions"
    )
