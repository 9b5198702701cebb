"""What a pod's create needs from Kubernetes besides the pod: its Job, the Secrets and
ConfigMaps its env names, its pull secrets and its claims' volumes. Read only for pods
about to be created (instances and gangs alike), never in a steady tick."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.core.domain import KubeObject
from reconciler.core.plan.observation import CreateInputs
from reconciler.core.pods import facts as podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.translate.claims import ClaimMount, claim_mount, claim_names
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.disks import names_network_volume
from reconciler.core.translate.env import EnvSources, referenced_objects
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.pull_secrets import all_credentials, registry_credentials

log = logging.getLogger(__name__)


class CreateInputsReader:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

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
            sources=EnvSources(secrets, config_maps),
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
