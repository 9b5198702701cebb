"""A throwaway self-signed certificate, so `kubectl` can talk to the simulator.

client-go sends credentials only over TLS (kubernetes/kubectl#744): against a plain
http:// server kubectl never presents its token. The Python client has no such rule,
so TLS stays optional and off by default (it costs a handshake per connection).
The certificate is made with the `openssl` command, present wherever kubectl is.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path


def make_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """Write cert.pem and key.pem for `host` (valid as IP and DNS name) into `directory`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("TLS for the Kubernetes simulator needs the openssl command")
    cert, key = directory / "cert.pem", directory / "key.pem"
    alt_names = "DNS:localhost,IP:127.0.0.1" + (f",IP:{host}" if host != "127.0.0.1" else "")
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "30",
            "-subj",
            f"/CN={host}",
            "-addext",
            f"subjectAltName={alt_names}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context
