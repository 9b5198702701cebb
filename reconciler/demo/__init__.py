"""The demo world: the product wired to the built-in simulators."""
