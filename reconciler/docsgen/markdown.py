"""The few Markdown pieces the generated pages are made of."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: str) -> str:
    """Text that stays inside one table cell. Outside code spans a `|` would end the cell
    and a `<...>` placeholder would be taken for an HTML tag; inside them (odd parts)
    both are text already."""
    parts = " ".join(text.split()).split("`")
    return "`".join(
        part if odd % 2 else part.replace("|", "\\|").replace("<", "&lt;")
        for odd, part in enumerate(parts)
    )


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
