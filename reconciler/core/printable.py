"""User text made safe to show: control characters escaped, long values cut.

Annotations, pod names and log options are anyone's to write. Shown raw, a newline
forges a row in a table and an escape sequence drives the reader's terminal; shown
whole, a 256 KiB annotation floods an Event. Text output and Events show them through
here; JSON output escapes on its own.
"""

from __future__ import annotations

SHOWN_CHARACTERS = 80
"""How much of a user's value a message quotes."""


def escaped(text: str) -> str:
    """`text` with every control, format and separator character but the space written
    as a Python escape (`\\n`, `\\x1b`, `\\u202e`), so that it prints on one line as is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def quoted(value: str, most: int = SHOWN_CHARACTERS) -> str:
    """A user's value for a message: escaped, in double quotes, cut to `most` characters."""
    cut = value if len(value) <= most else value[:most] + "…"
    return f'"{escaped(cut)}"'


def _escape(character: str) -> str:
    escape = repr(character)[1:-1]
    if escape == character:  # printable to repr() but not to isprintable()
        return f"\\u{ord(character):04x}"
    return escape
