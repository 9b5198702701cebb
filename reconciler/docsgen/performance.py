"""The performance page's figures, made from the benchmarks' committed run records.

Each benchmark's `--json` writes a record (`tests/perf/perf_record.py`) of one run of
it: the date, the commit, the load, the command and its figures. Those of the run the
page shows are committed as `docs/reference/perf/<bench>.json`. The page's prose is
written by hand; between `<!-- perf: <bench> -->` and `<!-- /perf -->` the figures are
made here from the record, so they are the run's and no others, with what ran them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.docsgen.markdown import table

RECORDS = Path("docs/reference/perf")
COMMAND = "python -m reconciler.docsgen"
TIMES, NONE = "\N{MULTIPLICATION SIGN}", "\N{EN DASH}"
BLOCK = re.compile(r"(<!-- perf: (\w+) -->\n).*?(<!-- /perf -->)", re.S)


def number(value: float, digits: int = 0) -> str:
    """As the page writes numbers: a space between thousands."""
    return f"{value:,.{digits}f}".replace(",", " ")


def percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def provenance(record: dict[str, Any]) -> str:
    before, after = record["load_before"][0], record["load_after"][0]
    machine = record["machine"]
    took = f"{number(record['minutes'], 1)} min" if record["minutes"] else "under a minute"
    return (
        f"Measured {record['measured']} at commit `{record['commit']}` with "
        f"`{record['command']}`: {took} on {machine['cpus']} "
        f"CPUs ({machine['system']}, Python {machine['python']}), load average "
        f"{before} at the start and {after} at the end.\n"
    )


# --- the scale benchmark ------------------------------------------------------------


def _runs(record: dict[str, Any], scenario: str) -> dict[int, dict[str, Any]]:
    return {
        run["n"]: run["summary"] for run in record["figures"]["runs"] if run["scenario"] == scenario
    }


def scale(record: dict[str, Any]) -> str:
    steady, mixed = _runs(record, "steady"), _runs(record, "mixed")
    burst, churn = _runs(record, "burst"), _runs(record, "churn")
    sizes = sorted({run["n"] for run in record["figures"]["runs"]})
    rows: list[tuple[str, Callable[[int], str]]] = []

    def row(label: str, runs: dict[int, dict[str, Any]], show: Callable[[Any], str]) -> None:
        if runs:
            rows.append((label, lambda n: show(runs[n]) if n in runs else NONE))

    row("steady tick: reconciler CPU", steady, lambda r: f"{number(r['cpu_ms'])} ms")
    row("steady tick: wall time", steady, lambda r: f"{number(r['wall_ms'])} ms")
    row("steady tick: Python calls per pod", steady, lambda r: number(r["calls_per_object"]))
    row(
        "steady tick: `plan_tick()` alone (CPU, best of 5)",
        steady,
        lambda r: f"{number(r['plan_direct_cpu_ms'])} ms",
    )
    row(
        "steady tick: RSS before the first tick / peak",
        steady,
        lambda r: f"{number(r['baseline_rss_mb'])} / {number(r['peak_rss_mb'])} MB",
    )
    row(
        "steady tick: Python heap a tick allocates (tracemalloc peak)",
        steady,
        lambda r: f"{number(r['tick_heap_peak_mb'], 1)} MB",
    )
    row(
        "steady tick: Kubernetes requests (list pages + unscheduled pods + heartbeat + other)",
        steady,
        lambda r: (
            f"{r['kube_pages']} + {r['kube_unscheduled']} + {r['kube_heartbeat']}"
            f" + {sum(r['kube_other'].values())}"
        ),
    )
    row(
        "steady tick: RunPod requests / database writes",
        steady,
        lambda r: f"{sum(r['runpod'].values())} / {r['transactions']}",
    )
    row(
        "mixed (N GPU pods + 100 CPU pods, 100 two-pod gangs, 1 000 claims): "
        "CPU / calls per pod or claim",
        mixed,
        lambda r: (
            f"{number(1000 * r['cpu_ms'] / r['objects'])} µs / {number(r['calls_per_object'])}"
        ),
    )
    row(
        "mixed: RunPod requests / database writes",
        mixed,
        lambda r: f"{sum(r['runpod'].values())} / {r['transactions']}",
    )
    row(
        "burst under 60 creates/min: simulated minutes / 429s",
        burst,
        lambda r: f"{number(r['sim_minutes'], 1)} / {r['throttled']}",
    )
    row(
        "burst: creates as a share of the quota rate (a burst of 5 minutes or more)",
        burst,
        # A shorter burst is mostly its first window's whole quota: the benchmark does not
        # judge it (its MIN_BURST_MINUTES).
        lambda r: percent(r["quota_rate_share"]) if r["sim_minutes"] >= 5 else NONE,
    )
    row(
        "churn, 10 % replaced per tick: write transactions / rows written per tick",
        churn,
        lambda r: f"{number(r['writes'])} / {number(r['rows_written'])}",
    )
    row(
        "churn per replaced pod: Kubernetes (beyond the steady tick's) / RunPod requests",
        churn,
        lambda r: (
            f"{r['per_replaced_pod']['kube_requests_beyond_steady']:.2f} / "
            f"{r['per_replaced_pod']['runpod_requests']:.2f}"
        ),
    )
    row(
        "churn per replaced pod: database writes / rows written",
        churn,
        lambda r: (
            f"{r['per_replaced_pod']['writes']:.2f} / {r['per_replaced_pod']['rows_written']:.1f}"
        ),
    )
    row(
        "churn per replaced pod: reconciler CPU",
        churn,
        lambda r: f"{r['per_replaced_pod']['cpu_ms']:.1f} ms",
    )
    header = ["", *(f"N={number(n)}" for n in sizes)]
    body = [[label, *(show(n) for n in sizes)] for label, show in rows]
    return provenance(record) + "\n" + table(header, body) + "\n" + verdicts(record)


def verdicts(record: dict[str, Any]) -> str:
    """The benchmark's own verdict on each of its targets, as it printed them."""
    found = record["figures"]["targets"]
    missed = [t for t in found if not t["met"]]
    text = f"The benchmark's targets in this run: {len(found) - len(missed)} of {len(found)} met"
    if not missed:
        return text + ".\n"
    return text + "; missed:\n\n" + "".join(f"- {t['name']}: {t['measured']}\n" for t in missed)


# --- the quota benchmark ------------------------------------------------------------


def _kinds(by_kind: dict[str, int]) -> str:
    return ", ".join(
        f"{count} {kind}" for kind, count in sorted(by_kind.items(), key=lambda kv: -kv[1])
    )


def _shares(shares: dict[str, float]) -> str:
    return " / ".join(percent(share) for _owner, share in sorted(shares.items()))


def quota(record: dict[str, Any]) -> str:
    results = record["figures"]["results"]
    rows = []
    if "trickle" in results:
        r = results["trickle"]
        rows.append(
            [
                f"trickle: {r['pods']} pods, one every 2 s, quota {'/'.join(map(str, r['quota']))}",
                f"{r['requests']} RunPod requests ({_kinds(r['by_kind'])}); lists "
                f"{percent(r['list_share'])}; {r['creates_ok']} creates + "
                f"{r['creates_refused']} refused; {r['throttled']} {TIMES} 429; pod to instance "
                f"p50 {r['latency_p50_s']:.1f} s, p95 {r['latency_p95_s']:.1f} s, "
                f"max {r['latency_max_s']:.1f} s",
            ]
        )
    if "burst" in results:
        r = results["burst"]
        rows.append(
            [
                f"burst of {number(r['pods'])} pods in the loop mode",
                f"{number(r['creates'])} creates in {r['sim_seconds'] / 60:.1f} min "
                f"({_kinds(r['by_kind'])}); {r['throttled']} {TIMES} 429; creates = "
                f"{percent(r['window_share'])} of what the minute windows it touched allow "
                "(edge windows whole)",
            ]
        )
    if "clusters" in results:
        r = results["clusters"]
        rows.append(
            [
                f"{r['clusters']} clusters on one key, {r['pods_each']} pods each at once",
                f"{r['requests']} RunPod requests ({_kinds(r['by_kind'])}); "
                f"{r['throttled']} {TIMES} 429; shares of the creates in the first minute "
                f"{_shares(r['shares_first_minute'])}, until the first cluster was done "
                f"{_shares(r['shares_while_contended'])}",
            ]
        )
    targets = [
        [t["name"], t["measured"], "met" if t["met"] else "**missed**"]
        for t in record["figures"]["targets"]
    ]
    return (
        provenance(record)
        + "\n"
        + table(["scenario", "measured"], rows)
        + "\n"
        + table(["target", "measured", ""], targets)
    )


# --- the others ---------------------------------------------------------------------


def tunnels(record: dict[str, Any]) -> str:
    t, s = record["figures"]["throughput"], record["figures"]["scale"]
    rows = [
        [
            "pod → Service (remote forward, the pod's process writing)",
            f"{t['pod_to_service_mb_s']:.0f} MB/s",
        ],
        [
            "cluster → pod (the reconciler's published port, `direct-tcpip`)",
            f"{t['cluster_to_pod_mb_s']:.0f} MB/s",
        ],
        [
            "reconciler CPU per GB carried, pod → Service",
            f"{t['pod_to_service_cpu_s_per_gb']:.1f} CPU-s",
        ],
        [
            "reconciler CPU per GB carried, cluster → pod (with the sending client's, "
            "in the same process)",
            f"{t['cluster_to_pod_cpu_s_per_gb']:.1f} CPU-s",
        ],
        [
            "latency added per 1-byte round trip (pod → Service)",
            f"{t['added_ms_per_round_trip']:.2f} ms",
        ],
        [f"{s['pods']} pods {TIMES} {s['services']} Services: forwards", str(s["forwards"])],
        ["SSH transport threads kept", f"{s['transports']} (one per pod)"],
        [
            "Python memory held for them (tracemalloc: paramiko and the tunnel code)",
            f"{s['python_memory_mb']:.1f} MB, {s['python_memory_kb_per_pod']:.0f} kB per pod",
        ],
        ["process RSS growth, both sides of the connections", f"{s['rss_growth_mb']:.0f} MB"],
        [
            f"first sync of {s['pods']} pods (an SSH connection and a hosts block each, "
            "one after another)",
            f"{s['first_sync_s']:.0f} s",
        ],
    ]
    return provenance(record) + "\n" + table(["what", "figure"], rows)


def http(record: dict[str, Any]) -> str:
    found = record["figures"]["cpu_ms_per_request"]
    rows = [[name, f"{ms:.2f} ms"] for name, ms in found.items()]
    return provenance(record) + "\n" + table(["request, by layer", "CPU per request"], rows)


def starts(record: dict[str, Any]) -> str:
    f = record["figures"]
    slowest = max(f["running_after"].values())
    creates, deletes = f["requests"].get("POST", 0), f["requests"].get("DELETE", 0)
    replacements = f["replacements"]
    per = (creates - f["pods"] + deletes + f["reads_by_id"]) / max(1, replacements)
    rows = [
        ["pools failing their starts", ", ".join(f"`{p}`" for p in f["failing_pools"])],
        ["pods running", f"{len(f['running_after'])} of {f['pods']} after {f['ticks']} ticks"],
        ["slowest pod to run", f"{slowest:.0f} s = {slowest / 300:.2f} start timeouts"],
        ["failed starts replaced", str(replacements)],
        [
            "longest billed past a failure",
            f"{max(f['billed_past_failure'].values(), default=0):.0f} s",
        ],
        [
            "failed instances deleted by the first tick after the failure",
            "every one" if max(f["ticks_past_failure"].values(), default=0) <= 1 else "not all",
        ],
        ["RunPod requests per replacement", f"{per:.2f}"],
        ["a steady tick afterwards", ", ".join(f"`{r}`" for r in f["steady"])],
    ]
    return provenance(record) + "\n" + table(["what", "figure"], rows)


def image(record: dict[str, Any]) -> str:
    f = record["figures"]
    rows = [
        [
            "build (`make image`, with the engine's layer cache as it was)",
            f"{f['build_seconds']:.0f} s with {f['engine']}",
        ],
        ["the project's layers, uncompressed (target ≤ 100 MB)", f"{f['added_mb']:.0f} MB"],
        ["the same, compressed as a registry stores them", f"{f['added_compressed_mb']:.0f} MB"],
    ]
    return provenance(record) + "\n" + table(["what", "figure"], rows)


SECTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "scale": scale,
    "quota": quota,
    "tunnels": tunnels,
    "http": http,
    "starts": starts,
    "image": image,
}


def section(root: Path, bench: str) -> str:
    path = root / RECORDS / f"{bench}.json"
    if not path.exists():
        return f"Not measured: no run of this benchmark is recorded (`{RECORDS / path.name}`).\n"
    return SECTIONS[bench](json.loads(path.read_text()))


def page(root: Path, text: str) -> str:
    """`text` (the page as written) with each block's figures made from its record."""

    def fill(found: re.Match[str]) -> str:
        bench = found.group(2)
        said = (
            f"<!-- Made by `{COMMAND}` from {RECORDS / bench}.json: run the benchmark again "
            "rather than edit this. -->\n"
        )
        return f"{found.group(1)}{said}\n{section(root, bench)}\n{found.group(3)}"

    return BLOCK.sub(fill, text)
