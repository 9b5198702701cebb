"""Users' text made safe to show (`core.printable`) and Kubernetes names (`core.kubenames`):
whatever the input, the escaped form prints on one line and leaves printable text as it
is; a name check refuses anything a selector or a path could be smuggled through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.kubenames import name_problem
from reconciler.core.printable import SHOWN_CHARACTERS, escaped, quoted


@given(st.text())
def test_escaped_text_prints_on_one_line(text: str) -> None:
    shown = escaped(text)
    assert shown.isprintable() and len(shown.splitlines()) <= 1
    if text.isprintable():
        assert shown == text


def test_escapes_read_as_python_writes_them() -> None:
    assert escaped("a\nb\x1b[2J\u202e\x00") == "a\\nb\\x1b[2J\\u202e\\x00"
    assert quoted("x" * 200) == '"' + "x" * SHOWN_CHARACTERS + '…"'


@given(st.text(max_size=300))
def test_a_valid_pod_name_has_nothing_to_smuggle(name: str) -> None:
    if name_problem("pod name", name) is None:
        assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-.") and len(name) <= 253


def test_names() -> None:
    assert name_problem("pod name", "talker") is None
    assert name_problem("pod name", "web-0.shard") is None
    assert name_problem("namespace", "web.shard") is not None
    problem = name_problem("pod name", "talker,metadata.namespace=default")
    assert problem is not None and "is not a valid pod name" in problem
    assert name_problem("container name", "main\n") is not None
