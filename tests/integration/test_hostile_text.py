"""Control characters in users' values, through both simulators over real HTTP: an
annotation with a newline and an escape sequence reaches an Event escaped, and
`reconciler state show` prints every row on its own line, escaped."""

from __future__ import annotations

import json

from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.core.money.namespace_caps import MAX_INSTANCES_ANNOTATION
from reconciler.demo.sandbox import Sandbox

FORGED = "A100\nnamespace  forged  running  fake-id\x1b[2J\u202e"


def test_an_annotation_with_control_characters_is_escaped_in_its_event(box: Sandbox) -> None:
    box.add_pod("web", annotations={"runpod.io/cloud-type": FORGED})
    box.add_pod("gpu", annotations={"runpod.io/gpu-types": FORGED})
    box.tick()
    for name, reason in (("web", "InvalidAnnotation"), ("gpu", "InvalidAnnotation")):
        told = [e for e in box.events(name) if e["reason"] == reason]
        assert told, box.events(name)
        message = told[0]["message"]
        assert "\n" not in message and "\x1b" not in message and "\u202e" not in message
        assert "A100\\nnamespace" in message and "\\x1b[2J" in message


def test_state_show_escapes_control_characters(box: Sandbox) -> None:
    box.add_pod("web", annotations={"runpod.io/gpu-types": FORGED})
    box.ensure_namespace("team-a")
    namespace = box.kube_sim.get("namespaces", None, "team-a") or {}
    namespace["metadata"]["annotations"] = {MAX_INSTANCES_ANNOTATION: "1\nforged row\x1b[2J"}
    box.kube_sim.put("namespaces", namespace)
    box.add_pod("capped", namespace="team-a")
    box.tick()
    shown = CliRunner().invoke(main, ["--database-url", box.database_url, "state", "show"])
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output and "\u202e" not in shown.output
    assert not any(line.startswith("forged") for line in shown.output.splitlines())
    assert "forged row" in shown.output  # shown, escaped, on the namespace's own line
    as_json = CliRunner().invoke(
        main, ["--database-url", box.database_url, "state", "show", "-o", "json"]
    )
    assert as_json.exit_code == 0 and json.loads(as_json.output)
