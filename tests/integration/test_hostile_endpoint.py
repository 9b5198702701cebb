"""The kubelet endpoint against a tenant or a stranger who wants it for themselves, over
real TLS on loopback through the simulators: one namespace's log follows leave every
other namespace room (its documented 32, then a sentence), and the node caps them all;
connections that trickle their headers neither keep `kubectl logs` out nor stay past
the header deadline, while a slow head within it is read; the 33rd unauthenticated
connection closes the oldest, and only it; heads at the header caps are read and beyond
them get 431; callers authenticated but not authorized count as strangers; memory
before authentication stays bounded; and a log read holds none of a long backfill it
does not show (memory measured with tracemalloc, bounds asserted)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.kubelet.server import EndpointLimits

from .test_hostile_kubelet import eventually, get, running_pod

# These callers play the API server, which does not verify a kubelet's serving
# certificate unless started with --kubelet-certificate-authority (self-signed here).
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

MIB = 1 << 20
LOGS = "/containerLogs/{}/{}/main"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.start_kubelet()
        yield sandbox


@pytest.fixture
def admin(box: Sandbox, tmp_path: Path) -> tuple[str, str]:
    return box.kube_sim.client_ca.issue_client("ops", ("system:masters",)).write(tmp_path, "ops")


def stranger(port: int) -> ssl.SSLSocket:
    """A TLS connection with no client certificate: never authenticated."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw)


def slow_get(box: Sandbox, cert: tuple[str, str], path: str, **params: str) -> requests.Response:
    """A read that may take long: a tail reads the whole backfill (so did any read once)."""
    return requests.get(
        f"https://127.0.0.1:{box.settings.kubelet.port}{path}",
        params=params,
        verify=False,
        timeout=300,
        cert=cert,
    )


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed the connection (waits up to the socket's timeout)."""
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def test_one_namespaces_follows_leave_the_others_room(box: Sandbox, admin: tuple[str, str]) -> None:
    running_pod(box, "train")
    box.add_pod("other", namespace="team-b", command=["python", "train.py"])
    box.tick()
    box.advance(30)
    box.tick()
    url = f"https://127.0.0.1:{box.settings.kubelet.port}"
    with contextlib.ExitStack() as stack:
        statuses = []
        for _ in range(50):
            follow = stack.enter_context(
                requests.get(
                    url + LOGS.format("default", "train"),
                    params={"follow": "true"},
                    verify=False,
                    timeout=10,
                    cert=admin,
                    stream=True,
                )
            )
            statuses.append(follow.status_code)
        with requests.get(
            url + LOGS.format("team-b", "other"),
            params={"follow": "true"},
            verify=False,
            timeout=10,
            cert=admin,
            stream=True,
        ) as theirs:
            assert theirs.status_code == 200, theirs.text
        assert statuses.count(200) == 32 and statuses.count(400) == 50 - 32  # the documented cap
        refused = get(box, admin, LOGS.format("default", "train"), follow="true")
        assert "--kubelet-max-follows-per-namespace" in refused.text


def test_the_node_caps_follows_of_every_namespace_together(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    running_pod(box, "train")
    box.kubelet.stop()
    box.start_kubelet(limits=EndpointLimits(max_follows=1))
    url = f"https://127.0.0.1:{box.settings.kubelet.port}" + LOGS.format("default", "train")
    with requests.get(
        url, params={"follow": "true"}, verify=False, timeout=10, cert=admin, stream=True
    ) as first:
        assert first.status_code == 200
        second = get(box, admin, LOGS.format("default", "train"), follow="true")
        assert second.status_code == 400 and "--kubelet-max-follows" in second.text


def test_trickling_strangers_do_not_keep_kubectl_logs_out(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    """200 unauthenticated TLS connections, each partway through its headers: the
    API server's next `kubectl logs` is served all the same."""
    running_pod(box, "train")
    port = box.settings.kubelet.port
    strangers = []
    try:
        for _ in range(200):
            sock = stranger(port)
            with contextlib.suppress(OSError):  # closed already for a newer one
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            strangers.append(sock)
        answer = get(box, admin, LOGS.format("default", "train"))
        assert answer.status_code == 200
    finally:
        for sock in strangers:
            sock.close()


def test_callers_without_rights_do_not_keep_the_api_server_out(
    box: Sandbox, admin: tuple[str, str], tmp_path: Path
) -> None:
    """Any pod's credentials authenticate; kept-alive connections of a caller the node
    does not authorize are closed for a newer one like a stranger's."""
    running_pod(box, "train")
    box.kubelet.stop()
    server = box.start_kubelet(limits=EndpointLimits(max_connections=3))
    nobody = box.kube_sim.client_ca.issue_client("nobody", ()).write(tmp_path, "nobody")
    sessions = [requests.Session() for _ in range(3)]
    try:
        for session in sessions:
            answer = session.get(
                f"https://127.0.0.1:{server.port}" + LOGS.format("default", "train"),
                verify=False,
                timeout=10,
                cert=nobody,
            )
            assert answer.status_code == 403  # and the connection is kept alive
        eventually(lambda: server.connections == 3)
        assert get(box, admin, LOGS.format("default", "train")).status_code == 200
    finally:
        for session in sessions:
            session.close()


def test_a_trickled_head_is_closed_at_the_header_deadline(box: Sandbox) -> None:
    """A byte every 50 ms is never idle; the whole head has a deadline of its own."""
    box.kubelet.stop()
    server = box.start_kubelet(limits=EndpointLimits(idle_timeout=60, header_timeout=1))
    sock = stranger(server.port)
    sock.settimeout(0.05)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        for _ in range(400):  # 20 s, far past the deadline, far short of the idle timeout
            if closed(sock):
                break
            with contextlib.suppress(OSError):
                sock.sendall(b"X")
        else:
            pytest.fail("a head trickled for 20 s was still being read")
    finally:
        sock.close()
    eventually(lambda: server.connections == 0)


def test_the_33rd_stranger_closes_the_oldest(box: Sandbox) -> None:
    """32 unauthenticated connections are held (the documented cap); a 33rd closes the
    oldest of them, and only that one."""
    assert box.kubelet is not None
    box.kubelet.stop()  # the header deadline far away: only the cap closes anything here
    box.configure(kubelet_idle_timeout=600, kubelet_request_header_timeout=600)
    port = box.start_kubelet().port
    strangers = [stranger(port) for _ in range(32)]
    try:
        for sock in strangers:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert box.kubelet is not None
        eventually(lambda: box.kubelet is not None and box.kubelet.connections == 32)
        for sock in strangers:
            sock.settimeout(0.05)
        assert not any(closed(sock) for sock in strangers)
        strangers.append(stranger(port))
        strangers[0].settimeout(10)
        assert closed(strangers[0])
        assert not any(closed(sock) for sock in strangers[1:32])
    finally:
        for sock in strangers:
            sock.close()


def head_answer(port: int, headers: list[str]) -> str:
    """What the endpoint answers a stranger's head of these headers (after Host)."""
    sock = stranger(port)
    try:
        head = "GET /healthz HTTP/1.1\r\nHost: x\r\n" + "".join(h + "\r\n" for h in headers)
        with contextlib.suppress(OSError):  # answered before all of it was read
            sock.sendall((head + "\r\n").encode())
        sock.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    finally:
        sock.close()
    return answer.decode()


def test_heads_at_the_caps_are_read(box: Sandbox) -> None:
    """64 headers, and headers of 65536 bytes with their line ends and the blank line
    (the documented caps), are read: the stranger gets the endpoint's 401."""
    port = box.settings.kubelet.port
    assert head_answer(port, [f"X-Pad-{n}: x" for n in range(63)]).startswith("HTTP/1.1 401")
    host, blank = len("Host: x\r\n"), 2
    pad = 65536 - host - blank - 2 * len("X-Pad-0: \r\n")
    headers = [f"X-Pad-0: {'x' * (pad // 2)}", f"X-Pad-1: {'x' * (pad - pad // 2)}"]
    assert head_answer(port, headers).startswith("HTTP/1.1 401")
    headers[1] += "x"
    assert head_answer(port, headers).startswith("HTTP/1.1 431")


def test_a_slow_head_within_the_deadline_is_read(box: Sandbox) -> None:
    """The deadline ends heads that take too long, not heads that take a while."""
    assert box.kubelet is not None
    box.kubelet.stop()
    box.configure(kubelet_request_header_timeout=6)
    sock = stranger(box.start_kubelet().port)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        for n in range(20):  # 2 s, a third of the deadline
            time.sleep(0.1)
            sock.sendall(f"X-Slow-{n}: x\r\n".encode())
        sock.sendall(b"Host: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 401")
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ([f"X-Pad-{n}: x" for n in range(64)], "more than 64 request headers"),
        ([f"X-Pad-{n}: {'x' * 40_000}" for n in range(2)], "above 65536 bytes"),
    ],
    ids=["count", "bytes"],
)
def test_heads_beyond_the_caps_get_a_431(box: Sandbox, headers: list[str], says: str) -> None:
    sock = stranger(box.settings.kubelet.port)
    try:
        head = "GET /healthz HTTP/1.1\r\nHost: x\r\n" + "".join(h + "\r\n" for h in headers)
        with contextlib.suppress(OSError):  # answered before all of it was read
            sock.sendall((head + "\r\n").encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    finally:
        sock.close()
    text = answer.decode()
    assert text.startswith("HTTP/1.1 431"), text
    assert says in text and "--kubelet-max-header-bytes" in text


def test_memory_before_authentication_is_bounded(box: Sandbox) -> None:
    """100 strangers each sending 99 headers of 64 KB, and holding on: 625 MiB once."""
    port = box.settings.kubelet.port
    line = b"X-Pad: " + b"x" * 65_000 + b"\r\n"
    strangers = [stranger(port) for _ in range(100)]

    def send(sock: ssl.SSLSocket) -> None:
        with contextlib.suppress(OSError):  # cut off: the point
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            for _ in range(99):
                sock.sendall(line)

    tracemalloc.start()
    try:
        senders = [threading.Thread(target=send, args=(sock,)) for sock in strangers]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        for sock in strangers:
            sock.close()
    assert peak < 32 * MIB, f"{peak / MIB:.0f} MiB held before anyone was authenticated"


def test_a_bounded_read_of_a_long_log_holds_none_of_it(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    """`kubectl logs --since=87600h --limit-bytes=100` (and `--tail=3`) on a 100 MB log."""
    instance = running_pod(box, "train")
    lines = [f"{n:08d} " + "x" * 991 for n in range(100_000)]  # 1000 bytes a line
    box.runpod_sim.logs.write_container(instance, lines)
    shown = "".join(line + "\n" for line in box.runpod_sim.logs.container_lines(instance)[:2])
    path = LOGS.format("default", "train")
    since = str(87600 * 3600)
    tracemalloc.start()
    try:
        first = slow_get(box, admin, path, sinceSeconds=since, limitBytes="100")
        first_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        last = slow_get(box, admin, path, sinceSeconds=since, tailLines="3")
        last_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.status_code == 200 and first.content == shown.encode()[:100]
    assert last.status_code == 200 and last.text.splitlines() == lines[-3:]
    assert first_peak < 16 * MIB, f"a 100-byte read held {first_peak / MIB:.0f} MiB"
    assert last_peak < 16 * MIB, f"a 3-line read held {last_peak / MIB:.0f} MiB"
