"""The engine's money chores: billing reads, namespace caps, the hourly ghost-charge audit."""
