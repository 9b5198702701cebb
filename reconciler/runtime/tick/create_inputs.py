"""What a pod's create needs from Kubernetes besides the pod: its Job, the Secrets and
ConfigMaps its env names, the Services it reaches (for their link variables), its pull
secrets and its claims' volumes. Read only for pods about to be created (instances and
gangs alike), never in a steady tick."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.core.domain import KubeObject
from reconciler.core.plan.observation import CreateInputs
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.translate.claims import ClaimMount, claim_mount, claim_names
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.disks import names_network_volume
from reconciler.core.translate.env import EnvSources, referenced_objects
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.pull_secrets import all_credentials, registry_credentials
from reconciler.core.translate.service_links import (
    link_variables,
    named_services,
    reachable,
    service_ports,
)

log = logging.getLogger(__name__)

SERVICES_TTL = timedelta(seconds=60)
"""How long the Services read for creates' link variables are kept: a Service made in
the minute before a pod may be missing from its variables (its names work at once, from
the hosts block the tunnels keep)."""


class CreateInputsReader:
    def __init__(
        self,
        kube: KubeClient,
        forwards_per_pod: int = 0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.kube = kube
        self.forwards_per_pod = forwards_per_pod
        self._clock = clock
        self._services: dict[tuple[str, str | None], tuple[datetime, list[KubeObject]]] = {}
        """What `_service_links` read, kept for `SERVICES_TTL` (a create costs no read
        then: churn's requests per replaced pod stay as they were)."""

    def read(self, pods: Sequence[KubeObject]) -> dict[str, CreateInputs]:
        inputs: dict[str, CreateInputs] = {}
        for pod in pods:
            try:
                inputs[podinfo.uid(pod)] = self._inputs_for(pod)
            except kube_errors.KubeError as exc:
                # Not the pod's fault: leave it for the next tick without a reason.
                log.warning(
                    "could not read what %s/%s needs: %s",
                    pod["metadata"].get("namespace"),
                    pod["metadata"]["name"],
                    exc,
                )
            except Exception as exc:  # one malformed pod never stops the tick
                log.debug(
                    "reading what %s/%s needs failed",
                    pod["metadata"].get("namespace"),
                    pod["metadata"].get("name"),
                    exc_info=True,
                )
                inputs[podinfo.uid(pod)] = CreateInputs(
                    error=TranslationError(
                        PodReason.INVALID_POD_SPEC,
                        f"the pod spec could not be read ({type(exc).__name__}: {exc})",
                        permanent=False,
                    )
                )
        return inputs

    def _inputs_for(self, pod: KubeObject) -> CreateInputs:
        job = self.kube.jobs.owning(pod)
        try:
            container = choose_container(pod)
        except TranslationError as error:
            return CreateInputs(job=job, error=error)
        namespace = pod["metadata"].get("namespace", "default")
        secret_names, config_map_names = referenced_objects(pod, container)
        secrets = self._read_all(self.kube.secrets.read, namespace, secret_names)
        config_maps = self._read_all(self.kube.cluster.read_config_map, namespace, config_map_names)
        pull_names = [ref.get("name", "") for ref in pod["spec"].get("imagePullSecrets") or ()]
        pull = self._read_all(self.kube.secrets.read, namespace, pull_names)
        try:
            claim = self._claim_mount(pod, container)
        except TranslationError as error:
            return CreateInputs(job=job, error=error)
        return CreateInputs(
            job=job,
            sources=EnvSources(secrets, config_maps, self._service_links(pod)),
            pull_secret=registry_credentials(container.get("image", ""), pull),
            pull_credentials=tuple(all_credentials(pull)),
            claim=claim,
            claim_uids=self._claim_uids(pod, job),
        )

    def _claim_uids(self, pod: KubeObject, job: KubeObject | None) -> frozenset[str]:
        """The UIDs of the namespace's claims, listed (one request) only for a pod that
        names a network volume by id: it may name only one made for them."""
        if not names_network_volume(pod, job):
            return frozenset()
        namespace = pod["metadata"].get("namespace", "default")
        claims = self.kube.storage.list_claims(namespace)
        return frozenset(str(c["metadata"]["uid"]) for c in claims)

    def _claim_mount(self, pod: KubeObject, container: KubeObject) -> ClaimMount | None:
        """The pod's claims and their PVs (a GET each, only for a pod about to be created
        that mounts claims), as the translation reads them."""
        namespace = pod["metadata"].get("namespace", "default")
        claims = {name: self.kube.storage.read_claim(namespace, name) for name in claim_names(pod)}
        bound = {c["spec"].get("volumeName") for c in claims.values() if c is not None}
        volumes = {name: self.kube.storage.read_volume(name) for name in bound if name}
        return claim_mount(pod, container, claims, volumes)

    def _service_links(self, pod: KubeObject) -> dict[str, str]:
        """The kubelet's service-link variables, for the Services that exist as the
        instance is made (a list of the pod's namespace, the `kubernetes` Service and each
        Service of another namespace the pod names)."""
        if self.forwards_per_pod == 0:
            return {}
        namespace = pod["metadata"].get("namespace", "default")
        services = list(self._services_of(namespace, None))
        wanted = {("default", "kubernetes"), *named_services(pod)}
        for other_namespace, name in sorted(wanted):
            if other_namespace != namespace:
                services += self._services_of(other_namespace, name)
        chosen = reachable(pod, services)
        return link_variables(pod, chosen, service_ports(chosen, self.forwards_per_pod, pod))

    def _services_of(self, namespace: str, name: str | None) -> list[KubeObject]:
        """A namespace's Services (name None) or one of them, read at most once per
        `SERVICES_TTL`."""
        key, now = (namespace, name), self._clock() if self._clock else None
        kept = self._services.get(key)
        if kept is not None and now is not None and now - kept[0] < SERVICES_TTL:
            return kept[1]
        if name is None:
            found = self.kube.services.in_namespace(namespace)
        else:
            one = self.kube.services.read(namespace, name)
            found = [one] if one is not None else []
        if now is not None:
            self._services[key] = (now, found)
        return found

    @staticmethod
    def _read_all(
        read: Callable[[str, str], dict[str, str] | None], namespace: str, names: Any
    ) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        for name in names:
            data = read(namespace, name)
            if data is not None:
                found[name] = data
        return found
