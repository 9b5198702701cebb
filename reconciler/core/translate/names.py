"""The readable name of the instance created for a pod.

`<namespace>-<pod name>` cut to fit, then `-<first 8 characters of the pod uid>`, so that
two pods of the same name in different generations stay apart at a glance. Names are
for people only (RunPod names are not unique; identity is the owner and pod-uid tags).
The whole name is kept to 63 characters, a DNS label's length: it stays readable in the
RunPod console and usable wherever a tool treats it as a hostname.
"""

from __future__ import annotations

from reconciler.core.domain import KubeObject

MAX_NAME_LENGTH = 63
UID_PREFIX_LENGTH = 8


def instance_name(pod: KubeObject) -> str:
    metadata = pod.get("metadata") or {}
    suffix = "-" + str(metadata.get("uid") or "")[:UID_PREFIX_LENGTH]
    base = f"{metadata.get('namespace') or 'default'}-{metadata.get('name') or ''}"
    # A cut can end on a separator; drop it so the name never shows "--" or ".-".
    return base[: MAX_NAME_LENGTH - len(suffix)].rstrip("-.") + suffix
