"""The client reads its proxy settings from the environment once, when it is made (per
request, that reading cost more CPU than the request itself): a proxy the environment
names carries every request, NO_PROXY still exempts the host, and the API key's header is
what reaches RunPod even when ~/.netrc holds credentials for the host."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, ClientFactory


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy for plain HTTP: it notes each target URL and passes it on."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)  # a proxy is sent the absolute URL
        direct = requests.Session()
        direct.trust_env = False  # not through itself
        answer = direct.get(
            self.path,
            headers={k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"},
            timeout=5,
        )
        self.send_response(answer.status_code)
        for name in ("Content-Type", "RateLimit", "RateLimit-Policy"):
            if name in answer.headers:
                self.send_header(name, answer.headers[name])
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *_args: object) -> None:
        """Quiet."""


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Proxy", (_Proxy,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def test_a_proxy_in_the_environment_carries_every_request(
    monkeypatch: pytest.MonkeyPatch,
    proxy: tuple[str, list[str]],
    sim: RunPodSimulator,
    make_client: ClientFactory,
) -> None:
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", address)
    client = make_client()
    assert client.instances.list() == []
    assert client.instances.list() == []
    host = urlsplit(sim.base_url).netloc
    assert [urlsplit(url).netloc for url in seen] == [host, host]


def test_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch, proxy: tuple[str, list[str]], make_client: ClientFactory
) -> None:
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", address)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert make_client().instances.list() == []
    assert seen == []


def test_a_netrc_entry_does_not_replace_the_api_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    sim: RunPodSimulator,
    make_client: ClientFactory,
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password other-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert make_client().instances.list() == []  # 401 if Basic credentials replaced the key
    assert sim.requests[-1].status == 200
    assert API_KEY not in str(netrc.read_text())
