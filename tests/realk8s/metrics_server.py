"""metrics-server in the plane, as a cluster runs it, so that `kubectl top` goes the real
way: kubectl asks kube-apiserver for `metrics.k8s.io/v1beta1`, the aggregation layer
proxies the request to metrics-server (vouched for by the front-proxy client certificate,
which metrics-server checks against the CA kube-apiserver publishes in
`kube-system/extension-apiserver-authentication`), and metrics-server answers from its
scrapes of each node's kubelet endpoint `/metrics/resource`, at the node's InternalIP and
daemonEndpoints port, with its ServiceAccount's token.

Everything is on loopback. An EndpointSlice may not hold a loopback address, so the
Service is of type ExternalName `localhost`: the aggregator's default (cluster) resolver
routes an ExternalName Service to that name and the APIService's port
(k8s.io/apiserver `proxy.ResolveCluster`), and its availability check looks for endpoints
only for a ClusterIP Service. The APIService trusts metrics-server's serving certificate
through `caBundle` (issued by the plane's CA for `metrics-server.kube-system.svc`, the name
the aggregator verifies), not `insecureSkipTLSVerify`.

The RBAC is the upstream manifest's (`manifests/base/rbac.yaml`): read pods and nodes,
get `nodes/metrics` (which our kubelet endpoint checks with a SubjectAccessReview),
delegate authentication and authorization, read the authentication ConfigMap. Its
identity is that ServiceAccount's token, never the admin's.
"""

from __future__ import annotations

import base64
from pathlib import Path

NAME = "metrics-server"
NAMESPACE = "kube-system"
APISERVICE = "v1beta1.metrics.k8s.io"
METRIC_RESOLUTION = "10s"
"""The shortest metrics-server allows: a pod's first figures show within about 20 s."""
SERVICE_DNS = f"{NAME}.{NAMESPACE}.svc"


def manifest(port: int, ca: Path) -> str:
    ca_bundle = base64.b64encode(ca.read_bytes()).decode()
    return f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {NAME}, namespace: {NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: "system:{NAME}"}}
rules:
  - {{apiGroups: [""], resources: [nodes/metrics], verbs: [get]}}
  - {{apiGroups: [""], resources: [pods, nodes], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "system:aggregated-metrics-reader"
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
  - {{apiGroups: [metrics.k8s.io], resources: [pods, nodes], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "system:{NAME}"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:{NAME}"}}
subjects: [{{kind: ServiceAccount, name: {NAME}, namespace: {NAMESPACE}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "{NAME}:system:auth-delegator"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}}
subjects: [{{kind: ServiceAccount, name: {NAME}, namespace: {NAMESPACE}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {NAME}-auth-reader, namespace: {NAMESPACE}}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects: [{{kind: ServiceAccount, name: {NAME}, namespace: {NAMESPACE}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {NAME}, namespace: {NAMESPACE}}}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{{name: https, port: {port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {{name: {NAME}, namespace: {NAMESPACE}, port: {port}}}
  caBundle: {ca_bundle}
"""


def arguments(port: int, kubeconfig: Path, cert: Path, key: Path) -> tuple[str, ...]:
    return (
        # Its API client, its kubelet client (the token) and its delegated checks of
        # the aggregator's requests, all as its ServiceAccount.
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        # Our kubelet endpoint's serving certificate is self-signed (the usual setting
        # of a test cluster; upstream's manifest leaves it out).
        "--kubelet-insecure-tls",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        f"--metric-resolution={METRIC_RESOLUTION}",
        # It must be under 90 % of the resolution (10 s by default).
        "--kubelet-request-timeout=5s",
    )
