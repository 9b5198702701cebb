"""The kubelet endpoint's TLS: its serving certificate and the CA its callers' client
certificates are checked against.

Serving certificate: from a `kubernetes.io/tls` Secret the user names (`tls.crt`,
`tls.key`, e.g. made by cert-manager), else a self-signed one made at start for the
node's address. An API server started with `--kubelet-certificate-authority` verifies
it: give it a certificate signed by that CA, for the address the node advertises.

Client CA: the cluster's, from the ConfigMap kube-system/extension-apiserver-
authentication (`client-ca-file`), which the API server publishes for exactly this.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from reconciler.adapters.kube.client import KubeClient

log = logging.getLogger(__name__)

AUTH_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")
CLIENT_CA_KEY = "client-ca-file"
_SELF_SIGNED_DAYS = 365


class TlsSetupError(RuntimeError):
    """The named Secret is missing or unusable: a one-line start-up error."""


def serving_pair(
    kube: KubeClient, secret: str, default_namespace: str, node_name: str, address: str
) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM): from `secret` ("[namespace/]name") if given."""
    if not secret:
        return self_signed(node_name, address)
    namespace, _, name = secret.rpartition("/")
    data = kube.secrets.read(namespace or default_namespace, name)
    if data is None:
        raise TlsSetupError(f"the kubelet serving certificate Secret {secret} does not exist")
    if "tls.crt" not in data or "tls.key" not in data:
        raise TlsSetupError(f"the Secret {secret} needs tls.crt and tls.key")
    return data["tls.crt"].encode(), data["tls.key"].encode()


def self_signed(node_name: str, address: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{node_name}@runpod")])
    names: list[x509.GeneralName] = [x509.DNSName(node_name)]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(address)))
    except ValueError:
        if address:
            names.append(x509.DNSName(address))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def client_ca(kube: KubeClient) -> str | None:
    """The cluster's client CA bundle, or None (then only bearer tokens authenticate)."""
    data = kube.cluster.read_config_map(*AUTH_CONFIG_MAP)
    bundle = (data or {}).get(CLIENT_CA_KEY)
    if not bundle:
        log.warning(
            "no %s in %s/%s: client certificates will not be accepted",
            CLIENT_CA_KEY,
            *AUTH_CONFIG_MAP,
        )
    return bundle or None


def server_context(cert_pem: bytes, key_pem: bytes, ca_bundle: str | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # load_cert_chain reads files only; the key never outlives this call on disk.
    with tempfile.TemporaryDirectory(prefix="kubelet-tls-") as directory:
        cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        cert_file.write_bytes(cert_pem)
        context.load_cert_chain(cert_file, key_file)
    if ca_bundle:
        context.load_verify_locations(cadata=ca_bundle)
        # A client may come with a certificate (the API server) or a token (anyone else).
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
