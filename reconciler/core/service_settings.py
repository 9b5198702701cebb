"""The settings of cluster Services for pods on RunPod (a group of `config.Settings`,
declared here to keep config.py one page)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from reconciler.core.setting import ip_address, setting


class ServiceBackends(enum.StrEnum):
    """Which addresses a Service's backend may be at for the reconciler to dial it."""

    CLUSTER = "cluster"
    """Not loopback, link-local or unspecified: the reconciler's own ports and the
    machine's metadata service stay out of a tenant's reach (an FQDN EndpointSlice may
    name anything)."""
    ANY = "any"
    """Loopback too: the demo and the tests, whose backends listen on 127.0.0.1."""


@dataclass(frozen=True)
class ServiceSettings:
    """Cluster Services for pods on RunPod, both ways over the instances' SSH."""

    forwards_per_pod: int = setting(
        32,
        "--service-forwards-per-pod",
        "How many Service ports a pod on RunPod reaches at most, oldest Services first "
        "(0: none; the pod gets an Event naming those left out).",
        limits=(0, 1000, "a count"),
    )
    """Each is one remote forward on the pod's SSH connection."""

    connections_per_pod: int = setting(
        64,
        "--service-connections-per-pod",
        "Open connections through a pod's tunnels at most, each way; more are refused.",
        limits=(1, 100_000, "a count"),
    )
    """Each open connection is a thread of the reconciler and an SSH channel."""

    cluster_domain: str = setting(
        "cluster.local",
        "--cluster-domain",
        "The cluster's DNS domain, for the Service names pods on RunPod resolve.",
    )

    endpoint_address: str = setting(
        "",
        "--service-endpoint-address",
        "The address the cluster reaches this reconciler at, published in the "
        "EndpointSlices of Services selecting pods on RunPod (default: $POD_IP; empty: "
        "none published).",
        parse=ip_address,
        fallback_env="POD_IP",
    )

    listen_address: str = setting(
        "0.0.0.0",
        "--service-listen-address",
        "Where the reconciler listens for the cluster's connections to pods on RunPod.",
        parse=ip_address,
    )

    backends: ServiceBackends = setting(
        ServiceBackends.CLUSTER,
        "--service-backends",
        "Which backend addresses of a Service the reconciler dials for a pod on RunPod: "
        "cluster (never loopback or link-local) or any (tests and the demo).",
    )
