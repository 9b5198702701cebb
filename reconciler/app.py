"""The `reconciler` program: the CLI's commands, plus `reconciler demo` from the demo layer.

The one module that sees both the face and the demo world (docs/architecture.md §1): the
CLI itself never imports the simulators, and `demo` loads them only when it runs.
"""

from __future__ import annotations

from reconciler.cli.commands import main
from reconciler.demo.command import demo

main.add_command(demo)

__all__ = ["main"]
