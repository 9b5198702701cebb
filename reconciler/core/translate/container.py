"""Which container of the pod runs on RunPod, and with which start command.

A RunPod instance runs one container, and v2 has no field to replace the image's
ENTRYPOINT: its `args` string is handed to the entrypoint. A pod's `command` + `args`
are therefore joined into that string, which works for images without an ENTRYPOINT or
whose ENTRYPOINT execs its arguments (the common `exec "$@"` pattern). An image whose
ENTRYPOINT ignores or refuses its arguments cannot be driven from the pod spec.

Batch pods (restartPolicy Never or OnFailure) need one more step, because RunPod
restarts a container whose process exits and so an instance never finishes by itself.
Their start command is wrapped in a POSIX `sh -c` script that runs the command,
prints `exit_code_marker(nonce)<code>` on its own line, then stops its own instance through
the RunPod API (with curl, wget or python3, whichever the image has) using the
`RUNPOD_POD_ID` and `RUNPOD_API_KEY` variables RunPod puts in every instance. So the
image of a batch pod must have a POSIX `sh`, and one of those three tools for the pod
to end promptly; without any of them the script says so and waits, and the pod is
bounded by activeDeadlineSeconds and the reconciler's deadlines instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from reconciler.core.contract import exit_code_marker, exit_nonce
from reconciler.core.domain import USER_AGENT, KubeObject
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import DEFAULT_CONTAINER
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.expansion import expand

# Proxies injected next to the workload by service meshes; they are not the workload.
# Native sidecars are restartable init containers and never appear in spec.containers.
SIDECAR_NAMES = frozenset({"istio-proxy", "linkerd-proxy", "envoy-sidecar", "cloud-sql-proxy"})

# How often the wrapper repeats the stop call: a call lost to a network blip must not
# leave the instance billing, and a successful stop ends the container anyway.
_STOP_RETRY_SECONDS = 60

# The command runs as `exec` in a subshell: its first word is a program, as in a pod
# spec (never a shell builtin or keyword), and nothing it does can end the wrapper.
_WRAPPER = """\
(exec {command})
rc=$?
printf '%s%s\\n' '{marker}' "$rc"
{then}"""

_STOP = """\
url="${{RUNPOD_API_URL:-https://api.runpod.io}}/v2/pods/$RUNPOD_POD_ID/action"
body='{{"action":"stop"}}'
ua='{user_agent}'
while :; do
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -X POST -A "$ua" -H "Authorization: Bearer $RUNPOD_API_KEY" \\
      -H 'Content-Type: application/json' -d "$body" "$url"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O- -U "$ua" --header="Authorization: Bearer $RUNPOD_API_KEY" \\
      --header='Content-Type: application/json' --post-data="$body" "$url"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c '{python}' "$url" "$body" "$ua"
  else
    echo 'runpod-reconciler: no curl, wget or python3 to stop this instance;' \\
      'it runs until its deadline' >&2
  fi
  sleep {retry}
done
"""

# A cluster member cannot stop itself (RunPod refuses every pod action on a member, so
# a stop would only spend the account's quota on 409s): it waits for the reconciler,
# which reads rank 0's marker and deletes the whole cluster. The marker is printed again
# now and then, so that it is the log's last line again even when a process left behind
# by the command printed after it (the reconciler reads only the last line).
_WAIT = """\
while :; do
  sleep {retry}
  printf '%s%s\\n' '{marker}' "$rc"
done
"""

# urllib's default User-Agent is refused by RunPod's gateway (403, error 1010).
_PYTHON_STOP = (
    "import os, sys, urllib.request as u; "
    'u.urlopen(u.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST", '
    'headers={"Authorization": "Bearer " + os.environ.get("RUNPOD_API_KEY", ""), '
    '"Content-Type": "application/json", "User-Agent": sys.argv[3]}), timeout=30)'
)


def choose_container(pod: KubeObject) -> KubeObject:
    """The annotated default container, else the only one, else the first non-sidecar."""
    containers: list[KubeObject] = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        raise TranslationError(
            PodReason.INVALID_POD_SPEC, "the pod has no containers", permanent=True
        )
    wanted = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER)
    if wanted is not None:
        return _named(containers, wanted)
    workloads = [c for c in containers if c.get("name") not in SIDECAR_NAMES]
    return (workloads or containers)[0]


def _named(containers: list[KubeObject], name: str) -> KubeObject:
    for container in containers:
        if container.get("name") == name:
            return container
    # Annotations can be edited on a live pod, so this is fixable: not permanent.
    raise TranslationError(
        PodReason.INVALID_ANNOTATION,
        f'annotation {DEFAULT_CONTAINER}: "{name}" names no container of the pod',
        permanent=False,
    )


def is_batch(pod: KubeObject) -> bool:
    return (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure")


def start_command(container: KubeObject, env: Mapping[str, str]) -> str | None:
    """`command` + `args` with `$(VAR)` expanded, as one shell-quoted string."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    if not words:
        return None
    return shlex.join(expand(str(word), env) for word in words)


def wrap_for_batch(command: str, nonce: str, *, member: bool = False) -> str:
    """The `sh -c` invocation that runs `command` (a shell-quoted argv, as made by
    `start_command`), reports its exit code after the marker with `nonce`, then stops
    the instance; a cluster `member`, which cannot be stopped, waits instead."""
    marker = exit_code_marker(nonce)
    then = (_WAIT if member else _STOP).format(
        marker=marker, python=_PYTHON_STOP, retry=_STOP_RETRY_SECONDS, user_agent=USER_AGENT
    )
    script = _WRAPPER.format(command=command, marker=marker, then=then)
    return shlex.join(["sh", "-c", script])


def instance_args(pod: KubeObject, container: KubeObject, env: Mapping[str, str]) -> str | None:
    """The v2 `args` string; None leaves the image's own command in charge."""
    command = start_command(container, env)
    if not is_batch(pod):
        return command
    if command is None:
        # The image's default command is unknown here, so there is nothing to wrap.
        raise TranslationError(
            PodReason.BATCH_COMMAND_REQUIRED,
            "a batch pod (restartPolicy Never or OnFailure) needs an explicit command or "
            "args on RunPod, so that its end can be detected",
            permanent=True,
        )
    return wrap_for_batch(command, exit_nonce(str(pod["metadata"]["uid"])))
