"""What one request costs the reconciler's process in CPU, by HTTP client layer.

    python tests/perf/bench_http.py [--requests N]

A replaced pod had a budget of 5 ms of reconciler CPU (RunPod's quota, near 30
replacements a minute, is now the churn's limit: docs/reference/performance.md), and it
takes seven requests (five to Kubernetes, two to RunPod: see bench_scale's churn). This
prints what each request costs through each layer the reconciler's requests pass,
against both simulators in a child process over loopback HTTP (so this process's CPU is
the client's alone): the bare standard library (`http.client`), urllib3 (what the
official Kubernetes client and requests are built on), our Kubernetes adapter on the
official client, and our RunPod adapter on requests. The last line is the floor those
layers set for the seven requests of one replaced pod, before any planning, database
write or list page.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes
import perf_record
import urllib3
from scale_world import API_KEY, NAMESPACE, TOKEN, remote_world

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient

ROUNDS = 3
KUBE_REQUESTS_PER_POD = 5
RUNPOD_REQUESTS_PER_POD = 2


def cpu_ms_per_call(call: Callable[[int], object], count: int) -> float:
    """The best of a few rounds (CPU time is disturbed only upwards), in ms per call."""
    call(0)  # the connection opened, caches warm
    rounds = []
    for round_number in range(ROUNDS):
        started = time.process_time()
        for i in range(count):
            call(round_number * count + i)
        rounds.append((time.process_time() - started) / count)
    return 1000 * min(rounds)


def measure(count: int) -> dict[str, float]:
    quota = (count * 100, count * 1000, count * 10_000)
    with remote_world(quota) as (host, clock):
        runpod_url, kube_url = host.urls()
        pods = host.add_pods("http", ROUNDS * count + 1, "bench-node")
        host.add_instances("bench-owner", pods[:1])
        configuration = kubernetes.client.Configuration(host=kube_url)
        configuration.api_key = {"BearerToken": TOKEN}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        kube = KubeClient(kubernetes.client.ApiClient(configuration), now=clock.now)
        runpod = RunPodClient(API_KEY, runpod_url, sleep=clock.sleep, monotonic=clock.monotonic)
        [instance] = runpod.instances.list()
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
        kube_address = urlsplit(kube_url)
        bare = http.client.HTTPConnection(kube_address.hostname or "", kube_address.port)
        pool = urllib3.PoolManager()

        def bare_get(_: int) -> None:
            bare.request("GET", "/version", headers=headers)
            bare.getresponse().read()

        def patch_status(i: int) -> None:
            name, _uid = pods[i]
            kube.pods.patch_status(NAMESPACE, name, {"phase": "Pending"}, {"bench": str(i)})

        def record_event(i: int) -> None:
            name, uid = pods[i]
            involved = {"metadata": {"namespace": NAMESPACE, "name": name, "uid": uid}}
            kube.events.record(involved, "BenchEvent", f"request {i}")

        found = {
            "http.client GET (Kubernetes simulator)": cpu_ms_per_call(bare_get, count),
            "urllib3 GET": cpu_ms_per_call(
                lambda _: pool.request("GET", kube_url + "/version", headers=headers).data, count
            ),
            "Kubernetes adapter GET /version": cpu_ms_per_call(
                lambda _: kube.cluster.server_version(), count
            ),
            "Kubernetes adapter PATCH pods/status": cpu_ms_per_call(patch_status, count),
            "Kubernetes adapter POST events": cpu_ms_per_call(record_event, count),
            "RunPod adapter GET /v2/pods/{id}": cpu_ms_per_call(
                lambda _: runpod.instances.get(instance.id), count
            ),
        }
        bare.close()
        runpod.close()
        kube.close()
    kube_mean = statistics.fmean(
        [found["Kubernetes adapter PATCH pods/status"], found["Kubernetes adapter POST events"]]
    )
    found["floor per replaced pod (5 Kubernetes + 2 RunPod requests)"] = (
        KUBE_REQUESTS_PER_POD * kube_mean
        + RUNPOD_REQUESTS_PER_POD * found["RunPod adapter GET /v2/pods/{id}"]
    )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=300, help="requests per round")
    parser.add_argument("--json", type=Path, help="write the figures here (perf_record)")
    args = parser.parse_args(argv)
    run_record = perf_record.Run("http", argv)
    found = measure(args.requests)
    for name, ms in found.items():
        print(f"{name:62s} {ms:6.3f} ms CPU")
    if args.json:
        run_record.write(args.json, {"requests": args.requests, "cpu_ms_per_request": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
