"""Kill-anywhere and fault campaign against both simulators."""
