"""An instance whose JSON is unchanged since the last list is not parsed again, and the
list's answer is always what a fresh parse gives: the uptime moves with the clock, and any
other change is parsed anew."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from reconciler.adapters.runpod import unchanged
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.errors import RunPodError
from reconciler.adapters.runpod.parse import parse_instance
from reconciler.adapters.runpod.unchanged import UnchangedInstances
from reconciler.core.domain import InstanceStatus
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator


def test_a_second_list_over_http_reparses_nothing_and_moves_the_uptime(
    sim: RunPodSimulator,
    client: RunPodClient,
    clock: SimClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = [sim.add_instance(f"steady-{i}", ports=["22/tcp"]) for i in range(3)]
    first = {i.id: i for i in client.instances.list()}
    parsed: list[object] = []
    monkeypatch.setattr(unchanged, "parse_instance", lambda raw: parsed.append(raw) or 1 / 0)
    clock.advance(15)
    second = {i.id: i for i in client.instances.list()}
    assert parsed == []
    for ident in ids:
        runtime, before = second[ident].runtime, first[ident].runtime
        assert runtime is not None and before is not None
        assert runtime.uptime_seconds == before.uptime_seconds + 15
        assert runtime.ports == before.ports
        assert second[ident].created_at == first[ident].created_at


def test_a_changed_instance_is_parsed_again(sim: RunPodSimulator, client: RunPodClient) -> None:
    ident = sim.add_instance("moving")
    assert client.instances.list()[0].status is InstanceStatus.RUNNING
    sim.set_instance_fields(ident, {"desiredStatus": "EXITED", "status": "EXITED"})
    assert client.instances.list()[0].status is InstanceStatus.EXITED


def test_a_runtime_that_gains_its_uptime_gains_its_runtime() -> None:
    """The uptime's value is left out of the digest, its presence is not: a runtime of
    `{}` is no runtime, one with an uptime is."""
    memo = UnchangedInstances()
    assert memo.parse([{"id": "a", "runtime": {}}])[0].runtime is None
    runtime = memo.parse([{"id": "a", "runtime": {"uptime": 7}}])[0].runtime
    assert runtime is not None and runtime.uptime_seconds == 7


def test_the_same_json_in_another_list_is_not_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decoder shares a document's repeated strings between its objects: what else the
    list holds changes which objects are shared, never the digest of an unchanged one."""
    one = '{"id": "a", "env": {"K": "v"}, "runtime": {"uptime": 1, "gpus": [{"util": 0}]}}'
    other = '{"id": "b", "env": {"K": "w"}, "runtime": {"uptime": 2, "gpus": [{"util": 3}]}}'
    memo = UnchangedInstances()
    memo.parse(json.loads(f"[{one}]"))
    monkeypatch.setattr(unchanged, "parse_instance", lambda raw: 1 / 0 if raw["id"] == "a" else 0)
    memo.parse(json.loads(f"[{other}, {one}]"))


_ATOMS: list[Any] = [
    None, "", "x", "12", -1, 0, 1, 1.0, 3, 150, 2.5, float("nan"), True, "RUNNING", "EXITED",
    "2026-01-01T00:00:00Z", {}, [], {"util": 40},
]  # fmt: skip


def _instance(rng: random.Random) -> dict[str, Any]:
    raw: dict[str, Any] = {"id": rng.choice(["a", "b", "c", 5, ""])}
    for key in ("name", "status", "cost", "createdAt", "cloud", "dataCenterId"):
        if rng.random() < 0.6:
            raw[key] = rng.choice(_ATOMS)
    if rng.random() < 0.8:
        raw["runtime"] = {
            key: rng.choice(_ATOMS)
            for key in ("uptime", "ports", "cpu", "memory", "gpus")
            if rng.random() < 0.7
        }
    if rng.random() < 0.5:
        raw["gpu"] = {"id": rng.choice(_ATOMS), "count": rng.choice(_ATOMS)}
    return raw


def _fresh(raw: dict[str, Any]) -> object:
    try:
        return repr(parse_instance(raw))
    except RunPodError as exc:
        return str(exc)


def _remembered(memo: UnchangedInstances, raw: dict[str, Any]) -> object:
    try:
        return repr(memo.parse([raw])[0])
    except RunPodError as exc:
        return str(exc)


def _next(rng: random.Random, before: dict[str, Any] | None) -> dict[str, Any]:
    """A new instance, or the one before unchanged, or with only its uptime moved."""
    if before is None or rng.random() < 0.4:
        return _instance(rng)
    raw = {**before}
    if isinstance(raw.get("runtime"), dict) and rng.random() < 0.7:
        raw["runtime"] = {**raw["runtime"], "uptime": rng.choice(_ATOMS)}
    return raw


def test_whatever_the_lists_say_the_answer_is_a_fresh_parse() -> None:
    rng = random.Random(43)
    memo = UnchangedInstances()
    raw: dict[str, Any] | None = None
    for _ in range(20_000):
        raw = _next(rng, raw)
        assert _remembered(memo, raw) == _fresh(raw), raw
