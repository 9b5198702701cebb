"""Rules that keep money from leaking: lost owner tags put back, leaks billed after a
pod ended terminated again, spend and price differences shown on the pods
(docs/architecture.md §3, Money).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.core.actions import (
    Action,
    Event,
    PatchMetadata,
    PodRef,
    RestoreTags,
    Terminate,
)
from reconciler.core.domain import (
    Instance,
    KubeObject,
)
from reconciler.core.money import charges
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import ownership, podinfo
from reconciler.core.reasons import Notice, TerminateReason


def restore_tags(
    tick: Situation, lost: Sequence[tuple[Instance, str]], pods: Mapping[str, KubeObject]
) -> list[Action]:
    """Put our tags back on owned instances that lost them; their pods carry on."""
    actions: list[Action] = []
    for instance, uid in lost:
        pod = pods.get(uid)
        ref = PodRef.of(pod) if pod is not None else None
        env = ownership.restored_env(instance, tick.settings.owner_id, uid, pod)
        actions.append(RestoreTags(instance.id, env, ref))
        if ref is not None:
            actions.append(
                Event(
                    ref,
                    Notice.TAGS_RESTORED,
                    f"RunPod instance {instance.id} lost its owner tags (its env "
                    "was replaced); put them back",
                    warning=True,
                )
            )
    return actions


def leaks(tick: Situation) -> list[Action]:
    """Instances RunPod bills after their pod ended: terminate them again, loudly."""
    if not tick.obs.billing:
        return []  # billing was not read this tick (most ticks): spare walking the rows
    return [
        Terminate(
            leak.instance_id, TerminateReason.LEAK, charges.LEAK_REASON, leaked_seconds=leak.seconds
        )
        for leak in charges.leaks(
            tick.obs.billing, tick.obs.rows, tick.settings.timing.orphan_grace_time, tick.now
        )
    ]


def spend_annotations(tick: Situation, pods: Mapping[str, KubeObject]) -> list[Action]:
    actions: list[Action] = []
    for uid, usd in sorted(tick.obs.spend.items()):
        pod = pods.get(uid)
        if pod is None or podinfo.is_deleting(pod):
            continue
        value = charges.annotation_value(usd)
        if podinfo.pod_annotations(pod).get(charges.SPEND_ANNOTATION) != value:
            actions.append(PatchMetadata(PodRef.of(pod), {charges.SPEND_ANNOTATION: value}))
    return actions


def price_differences(tick: Situation, pods: Mapping[str, KubeObject]) -> list[Action]:
    """A Warning on each pod still there whose charge newly differs from list price."""
    return [
        Event(PodRef.of(pod), Notice.CHARGE_DIFFERS, difference.message(), warning=True)
        for difference in tick.obs.price_differences
        if (pod := pods.get(difference.row.pod_uid)) is not None and not podinfo.is_deleting(pod)
    ]
