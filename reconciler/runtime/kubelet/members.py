"""Where a gang pod's sshd is: its Instant Cluster member's own SSH access.

RunPod gives each cluster member what it gives a single pod: the create body's `ports`
(with `22/tcp`) and `env` (our `PUBLIC_KEY`) apply to every member, and each member's
record (`GET /v2/pods?includeClusterPods=true`, `GET /v2/clusters/{id}/pods`) has its
own `runtime.ports` entry for 22 with its public `ip` and port, as `ssh.direct` says.
Only rank 0's is also `Cluster.primary.sshEndpoint`, so it is not used.

The member comes from RunPod's record of a cluster we own, never from the pod's
annotations: the last tick's list paired each live gang pod with the member of its
gang's tag whose rank is its index (`clusters.members_by_pod`, no request); else the
cluster our own row names for the pod's Job is read by id (one request), and its member
must carry our owner tag, the row's gang tag and the pod's index as rank.
"""

from __future__ import annotations

from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.cluster_row import ClusterState
from reconciler.core.domain import InstanceStatus, KubeObject
from reconciler.core.resources import clusters
from reconciler.core.translate.ssh import SSH_PORT, SshAddress, ssh_address


class MemberUnreachable(Exception):
    """No member of ours runs the pod, or it has no SSH access: HTTP status, sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def member_address(
    pod: KubeObject, runs: str, store: Store, runpod: RunPodClient, owner_id: str | None
) -> SshAddress:
    """The sshd of the member that runs the gang pod (`runs`: its container's name),
    read by id from the cluster our row names for its Job."""
    name = str(pod["metadata"]["name"])
    job = clusters.job_uid(pod)
    rows = [
        row
        for row in store.load_clusters()
        if row.job_uid == job and row.state is ClusterState.RUNNING and row.cluster_id
    ]
    if job is None or not clusters.is_live(pod) or not rows:
        raise MemberUnreachable(400, f'container "{runs}" in pod "{name}" is not running')
    for row in rows:
        assert row.cluster_id is not None
        try:
            listed = runpod.clusters.members(row.cluster_id)
        except runpod_errors.RunPodNotFound:
            continue
        except runpod_errors.RunPodError as exc:
            raise MemberUnreachable(
                502, f"RunPod did not say where the pod's sshd is: {exc}"
            ) from exc
        member = clusters.member_for(pod, row, listed, owner_id)
        if member is None:
            continue
        if member.status is not InstanceStatus.RUNNING:
            raise MemberUnreachable(400, f'container "{runs}" in pod "{name}" is not running')
        address = ssh_address(member)
        if address is None:
            raise MemberUnreachable(
                400,
                f"cluster member {member.id} publishes no {SSH_PORT} (created without SSH "
                "access): exec needs the reconciler's SSH key (--ssh-key-secret or "
                "--ssh-key-file) set when the gang's cluster is created",
            )
        return address
    raise MemberUnreachable(400, f'container "{runs}" in pod "{name}" is not running')
