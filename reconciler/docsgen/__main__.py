"""`python -m reconciler.docsgen [--check]`, run from the repository's root."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from reconciler.docsgen.pages import REGENERATE, stale, write


@click.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if a page is stale.")
def main(check: bool) -> None:
    """Write the generated reference pages under docs/reference/."""
    root = Path.cwd()
    if not (root / "mkdocs.yml").exists():
        raise click.ClickException("run this from the repository's root (where mkdocs.yml is)")
    if check:
        pages = stale(root)
        for path in pages:
            click.echo(f"stale: {path} (run `{REGENERATE}`)", err=True)
        sys.exit(1 if pages else 0)
    for path in write(root):
        click.echo(f"wrote {path}")


if __name__ == "__main__":
    main()
