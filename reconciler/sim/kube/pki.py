"""The simulated cluster's client CA, as kubeadm makes one: it signs the certificate the
API server presents to kubelets (`--kubelet-client-certificate`), and it is published in
the ConfigMap kube-system/extension-apiserver-authentication (`client-ca-file`) for
kubelets and extension servers to verify callers against."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

APISERVER_KUBELET_CLIENT = "kube-apiserver-kubelet-client"
_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Credential:
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[str, str]:
        """Files for an SSL context: (cert path, key path)."""
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return str(cert), str(key)


class ClientCA:
    def __init__(self, common_name: str = "kubernetes-sim-client-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue_client(self, user: str, groups: tuple[str, ...] = ()) -> Credential:
        """A client certificate: CN is the user name, each O a group (as Kubernetes reads it)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return Credential(cert.public_bytes(serialization.Encoding.PEM), key_pem)
