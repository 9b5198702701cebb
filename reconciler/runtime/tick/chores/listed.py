"""What the tick's one list tells others: CPU pods' use for the kubelet endpoint's resource
metrics (`core/pods/usage.py`), where our instances run sshd for its exec
(`core/translate/ssh.py`), and the look-alikes it reports, kept for `state show`."""

from __future__ import annotations

import logging

from reconciler.adapters.store.repository import Store
from reconciler.core.pods.ownership import Ownership
from reconciler.core.pods.usage import UsageMeter
from reconciler.core.resources.clusters import members_by_pod
from reconciler.core.translate.ssh import SshAddresses
from reconciler.runtime.tick.chores.base import Chore, keep
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class ListedChore(Chore):
    def __init__(self, store: Store, owner_id: str) -> None:
        self.store, self.owner_id = store, owner_id
        self.usage = UsageMeter()
        """CPU pods' use for the kubelet endpoint's resource metrics, from each list."""
        self.ssh_addresses = SshAddresses()
        """Where our instances run sshd, for the kubelet endpoint's exec, from each list."""

    def observed(self, report: TickReport, owners: Ownership) -> None:
        observation = report.observation
        assert observation is not None
        self.usage.observe(observation.pods, owners.owned, report.started_at)
        members = members_by_pod(observation.gang_pods, observation.members, self.owner_id)
        self.ssh_addresses.observe({**owners.owned, **members})

    def before_apply(self, report: TickReport) -> None:
        keep(report, "look-alikes", lambda: self._record_lookalikes(report))

    def _record_lookalikes(self, report: TickReport) -> None:
        now = report.started_at
        if report.lookalikes:
            log.warning(
                "unowned, looks like ours (untagged, no row, no annotation; left alone): %s",
                ", ".join(
                    f"{i.instance_id} ({i.namespace}/{i.pod_name})" for i in report.lookalikes
                ),
            )
        self.store.namespaces.sync_lookalikes(report.lookalikes, now)
