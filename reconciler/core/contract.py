"""What both sides of the wire agree on: the env tags of our instances and the batch
wrapper's exit-code line.

The simulators import this module and nothing else of the product (docs/architecture.md
§1), so they cannot come to share our clients' other assumptions.
"""

from __future__ import annotations

import hashlib

# Carried in the env of every instance we create: how we recognise our own instances in
# the account (docs/architecture.md §3). Anything without our owner tag is invisible.
OWNER_ENV = "RUNPOD_RECONCILER_OWNER"
POD_UID_ENV = "RUNPOD_RECONCILER_POD_UID"
# Carried instead of POD_UID_ENV by the members of an Instant Cluster, which share one
# env: the gang (an Indexed Job's pods of one attempt) the cluster runs.
GANG_ENV = "RUNPOD_RECONCILER_GANG"
# Set on batch pods whose start command is wrapped to stop the instance when the
# process exits; its value is the instance's nonce. The wrapper prints
# `exit_code_marker(nonce)` followed by the exit code: a line the process prints cannot
# pass for it without the nonce.
STOP_ON_EXIT_ENV = "RUNPOD_RECONCILER_STOP_ON_EXIT"
EXIT_CODE_MARKER = "RUNPOD_RECONCILER_EXIT_CODE="


LEGACY_NONCE = "1"
"""What STOP_ON_EXIT_ENV held before the marker had a nonce: such an instance's wrapper
prints the bare EXIT_CODE_MARKER (an instance started before an upgrade)."""


def exit_code_marker(nonce: str) -> str:
    """What the wrapper prints right before the exit code."""
    return EXIT_CODE_MARKER if nonce == LEGACY_NONCE else f"{EXIT_CODE_MARKER}{nonce}:"


def exit_nonce(pod_uid: str) -> str:
    """The batch wrapper's nonce for a pod: in its exit-code marker, so that no line the
    process prints (say, a request path a web server logs) passes for the marker. Derived
    from the pod's UID, so every reader of the log knows it without asking RunPod; the
    pod's own process can see it, but it sets its own exit code anyway."""
    return hashlib.sha256(f"runpod-reconciler exit marker {pod_uid}".encode()).hexdigest()[:20]
