"""How a tick is reported on the terminal: a short table for people, JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from reconciler.cli.state_view import render_table
from reconciler.core.actions import Action
from reconciler.runtime.tick.tick_report import TickReport


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
    """(kind, subject, detail) of one planned action, for --dry-run: each action says
    its own subject and detail (`shown`), so no list of the actions is kept here."""
    return (type(action).__name__, *action.shown())


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
