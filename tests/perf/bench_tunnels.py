"""What the Services' tunnels cost the reconciler, on loopback.

    python tests/perf/bench_tunnels.py [--megabytes 200] [--pods 100] [--services 3]

Against both simulators in this process (the RunPod simulator's sshd is asyncssh, each
pod in a network namespace of its own; its public addresses are reached through its
relay, a process per connection):

- throughput from a pod to a Service (a process in the pod writes to the Service's
  variables' address; the backend, on this machine's loopback, counts the bytes), and
  from the cluster to a pod (a client writes to the reconciler's published port; the
  pod's port counts them);
- the reconciler's CPU per GB carried: this process's CPU time less the simulators'
  threads' (the sshd's event loop, the API server's) and the backend's;
- the latency a tunnel adds: 1-byte round trips from inside the pod through the tunnel
  to an echo backend, less the same round trips straight to it on loopback;
- with `--pods` pods each reaching `--services` Services: the threads the reconciler
  keeps for them and the Python memory it holds for them (tracemalloc, by the files that
  allocated: paramiko and the reconciler's tunnel code), and this process's RSS growth
  (both sides of the SSH connections together).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import paramiko
import perf_record

from reconciler.core.config import Settings
from reconciler.demo.sandbox import Sandbox

SIM_THREADS = ("runpod-sim-sshd", "kube-sim", "bench-backend")
OURS = (
    "paramiko",
    "reconciler/runtime/services",
    "reconciler/adapters/ssh",
)


def _cpu_of_threads(prefixes: tuple[str, ...]) -> float:
    """CPU seconds so far of this process's live threads whose names start so."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for thread in threading.enumerate():
        if thread.native_id is None or not thread.name.startswith(prefixes):
            continue
        try:
            fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1]
        except OSError:
            continue
        utime, stime = fields.split()[11:13]
        total += (int(utime) + int(stime)) / tick
    return total


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _backend(kind: str) -> Iterator[int]:
    """A loopback TCP server in one thread: "count" reads to the end, answers the count;
    "echo" sends back what it reads."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                if kind == "count":
                    count = 0
                    while chunk := conn.recv(1 << 20):
                        count += len(chunk)
                    conn.sendall(str(count).encode())
                else:
                    while chunk := conn.recv(65536):
                        conn.sendall(chunk)

    thread = threading.Thread(target=serve, name="bench-backend", daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def _selectorless(box: Sandbox, name: str, port: int, backend: int) -> None:
    box.kube_sim.put(
        "services",
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"name": "tcp", "port": port}]},
        },
    )
    box.kube_sim.put(
        "endpointslices",
        {
            "metadata": {
                "name": f"{name}-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["localhost"], "conditions": {"ready": True}}],
            "ports": [{"name": "tcp", "port": backend, "protocol": "TCP"}],
        },
    )


def _in_pod(box: Sandbox, pod_name: str, command: str) -> str:
    pod = box.pod(pod_name) or {}
    address = box.engine.ssh_addresses.of(pod["metadata"]["uid"])
    assert address is not None
    tunnel = box.tunnels.tunnels[pod["metadata"]["uid"]] if box.tunnels else None
    assert tunnel is not None
    channel = tunnel.transport.open_session(timeout=30)
    channel.exec_command(command)
    out = b""
    while chunk := channel.recv(65536):
        out += chunk
    status = channel.recv_exit_status()
    assert status == 0, (command, out, channel.recv_stderr(65536))
    return out.decode()


_SEND = (
    "python3 -c \"import socket,time,sys;s=socket.create_connection(('127.0.0.1',{port}));"
    "b=b'x'*65536;t=time.monotonic()\n"
    "for _ in range({chunks}): s.sendall(b)\n"
    's.shutdown(1);n=s.recv(100);print(n.decode(),time.monotonic()-t)"'
)
_PING = (
    "python3 -c \"import socket,time;s=socket.create_connection(('127.0.0.1',{port}));"
    "s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1);t=time.monotonic()\n"
    "for _ in range({rounds}):\n s.sendall(b'x');s.recv(1)\n"
    'print((time.monotonic()-t)/{rounds})"'
)


def _ping_direct(port: int, rounds: int) -> float:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.monotonic()
        for _ in range(rounds):
            sock.sendall(b"x")
            sock.recv(1)
        return (time.monotonic() - started) / rounds


def _running(box: Sandbox, names: list[str]) -> None:
    for name in names:
        container = {
            "name": "main",
            "image": "python:3.11",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        }
        box.add_pod(name, extra_spec={"containers": [container]})
    _settle(box, names)


def _settle(box: Sandbox, names: list[str]) -> None:
    phases: set[str] = set()
    for _ in range(20):
        box.tick()
        box.advance(30)
        phases = {(box.pod(n) or {}).get("status", {}).get("phase") for n in names}
        if phases == {"Running"}:
            box.tick()
            return
    raise SystemExit(f"the pods did not all run: {phases}")


def throughput(megabytes: int, rounds: int) -> dict[str, float]:
    chunks = megabytes * 16  # 64 KiB each
    with (
        tempfile.TemporaryDirectory() as workdir,
        Sandbox() as box,
        _backend("count") as sink,
        _backend("echo") as echo,
    ):
        box.enable_ssh(str(Path(workdir) / "key"))
        box.configure(service_endpoint_address="192.0.2.10", service_listen_address="127.0.0.1")
        box.start_tunnels()
        _selectorless(box, "sink", 9000, sink)
        _selectorless(box, "echo", 9001, echo)
        box.kube_sim.put(
            "services",
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"app": "bench"}, "ports": [{"name": "tcp", "port": 9002}]},
            },
        )
        box.add_pod("bench", labels={"app": "bench"}, ports=[9002])
        _settle(box, ["bench"])
        instance = box.instance_for(box.pod("bench") or {})
        assert instance is not None
        box.runpod_sim.ssh.serve_count(instance["id"], 9002)
        box.tick()
        uid = (box.pod("bench") or {})["metadata"]["uid"]
        forwarded = (
            {p.service: p.local_port for p in box.tunnels.tunnels[uid].forwarded.values()}
            if box.tunnels
            else {}
        )

        process, sims = _process_cpu(), _cpu_of_threads(SIM_THREADS)
        started = time.monotonic()
        answer = _in_pod(box, "bench", _SEND.format(port=forwarded["sink"], chunks=chunks))
        wall = time.monotonic() - started
        ours = (_process_cpu() - process) - (_cpu_of_threads(SIM_THREADS) - sims)
        count, seconds = answer.split()
        assert int(count) == chunks * 65536, answer
        mb = int(count) / 1e6
        found = {
            "megabytes": round(mb),
            "pod_to_service_mb_s": mb / float(seconds),
            "pod_to_service_cpu_s_per_gb": ours / mb * 1000,
        }
        print(
            f"pod -> Service: {mb:.0f} MB in {float(seconds):.2f} s = "
            f"{mb / float(seconds):.0f} MB/s "
            f"(wall {wall:.2f} s); reconciler CPU {ours:.2f} s = {ours / mb * 1000:.1f} CPU-s/GB"
        )

        pieces = [
            s
            for s in box.kube_sim.list("endpointslices", "default")
            if s["metadata"]["labels"].get("endpointslice.kubernetes.io/managed-by")
            == "runpod-reconciler.runpod.io"
        ]
        port = pieces[0]["ports"][0]["port"]
        process, sims = _process_cpu(), _cpu_of_threads(SIM_THREADS)
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            block = b"x" * 65536
            for _ in range(chunks):
                sock.sendall(block)
            sock.shutdown(socket.SHUT_WR)
            reply = sock.recv(100).decode()
        seconds = time.monotonic() - started
        ours = (_process_cpu() - process) - (_cpu_of_threads(SIM_THREADS) - sims)
        assert reply == f"{chunks * 65536} bytes", reply
        found["cluster_to_pod_mb_s"] = mb / seconds
        found["cluster_to_pod_cpu_s_per_gb"] = ours / mb * 1000
        print(
            f"cluster -> pod: {mb:.0f} MB in {seconds:.2f} s = {mb / seconds:.0f} MB/s; "
            f"reconciler CPU (and the client's sends) {ours:.2f} s = "
            f"{ours / mb * 1000:.1f} CPU-s/GB"
        )

        through = float(_in_pod(box, "bench", _PING.format(port=forwarded["echo"], rounds=rounds)))
        direct = _ping_direct(echo, rounds)
        print(
            f"latency: {through * 1e3:.3f} ms per round trip through the tunnel, "
            f"{direct * 1e3:.3f} ms straight to the backend: "
            f"{(through - direct) * 1e3:.3f} ms added"
        )
        found["rounds"] = rounds
        found["added_ms_per_round_trip"] = (through - direct) * 1e3
        return found


def scale(pods: int, services: int) -> dict[str, float]:
    settings = Settings.of(
        max_instances=pods + 10, max_creates_per_tick=pods, max_hourly_spend=100000.0
    )
    with (
        tempfile.TemporaryDirectory() as workdir,
        Sandbox(settings) as box,
        _backend("echo") as echo,
    ):
        box.enable_ssh(str(Path(workdir) / "key"))
        for index in range(services):
            _selectorless(box, f"svc-{index}", 9000 + index, echo)
        names = [f"pod-{i}" for i in range(pods)]
        _running(box, names)
        threads_before = threading.active_count()
        rss_before = _rss()
        tracemalloc.start()
        box.start_tunnels()
        started = time.monotonic()
        box.tick()
        took = time.monotonic() - started
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        assert box.tunnels is not None and len(box.tunnels.tunnels) == pods, len(
            box.tunnels.tunnels if box.tunnels else ()
        )
        forwards = sum(len(t.forwarded) for t in box.tunnels.tunnels.values())
        ours = sum(
            stat.size
            for stat in snapshot.statistics("filename")
            if any(part in stat.traceback[0].filename for part in OURS)
        )
        transports = sum(isinstance(t, paramiko.Transport) for t in threading.enumerate())
        rss_growth = (_rss() - rss_before) / 1e6
        print(
            f"{pods} pods x {services} Services: {forwards} forwards; first sync {took:.1f} s; "
            f"reconciler threads +{transports} (one SSH transport per pod; a thread per open "
            f"connection besides); its Python memory for them {ours / 1e6:.1f} MB "
            f"({ours / pods / 1e3:.0f} kB per pod); "
            f"process RSS +{rss_growth:.0f} MB "
            f"with the simulator's side; all threads {threads_before} -> {threading.active_count()}"
        )
        return {
            "pods": pods,
            "services": services,
            "forwards": forwards,
            "first_sync_s": took,
            "transports": transports,
            "python_memory_mb": ours / 1e6,
            "python_memory_kb_per_pod": ours / pods / 1e3,
            "rss_growth_mb": rss_growth,
        }


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--services", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here (perf_record)")
    args = parser.parse_args(argv)
    run_record = perf_record.Run("tunnels", argv)
    figures = {"throughput": throughput(args.megabytes, args.rounds)}
    figures["scale"] = scale(args.pods, args.services)
    if args.json:
        run_record.write(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
