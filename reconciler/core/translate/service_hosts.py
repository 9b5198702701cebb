"""The names of the Services a pod reaches, as its instance resolves them: a block of
`/etc/hosts` the reconciler keeps.

A pod on a node resolves `svc` (its own namespace), `svc.ns`, `svc.ns.svc` and
`svc.ns.svc.<cluster domain>` through the cluster's DNS and its search path. An
instance on RunPod has no cluster DNS and its resolver is RunPod's: a hosts file is
what every libc, busybox and language runtime reads first without asking anything of
the image, and the names then lead to 127.0.0.1, where the forwards listen
(`service_links`). Only the block between the markers is ours; the rest of the file is
the image's and stays. Docker bind-mounts `/etc/hosts`, so the file is rewritten in
place (`cat > /etc/hosts`), never renamed over (a rename onto a mount point fails).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.core.translate.service_links import LOOPBACK, ServicePort

BEGIN = "# BEGIN runpod-reconciler services"
END = "# END runpod-reconciler services"
# The block comes on stdin; sed drops the old one, the copy goes back in place.
INSTALL_COMMAND = (
    "t=$(mktemp) && "
    f"sed '/^{BEGIN}$/,/^{END}$/d' /etc/hosts > \"$t\" && "
    'cat >> "$t" && cat "$t" > /etc/hosts; s=$?; rm -f "$t"; exit $s'
)


def names(namespace: str, service: str, pod_namespace: str, domain: str) -> list[str]:
    """The names a pod of `pod_namespace` may use for the Service."""
    full = [
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{domain}",
    ]
    return [service, *full] if namespace == pod_namespace else full


def hosts_block(ports: Sequence[ServicePort], pod_namespace: str, domain: str) -> str:
    """The block for the pod's reachable Services, a line each."""
    services = sorted({(p.namespace, p.service) for p in ports})
    lines = [BEGIN]
    for namespace, service in services:
        lines.append(f"{LOOPBACK}\t{' '.join(names(namespace, service, pod_namespace, domain))}")
    lines.append(END)
    return "\n".join(lines) + "\n"
