"""Command line entry point (filled in by the foundation work)."""

import click

from reconciler import __version__


@click.group(context_settings={"auto_envvar_prefix": "RECONCILER"})
@click.version_option(__version__, prog_name="reconciler")
def main() -> None:
    """Reconcile Kubernetes pods with RunPod instances."""
