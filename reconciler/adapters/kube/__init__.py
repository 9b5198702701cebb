"""The Kubernetes adapter: a thin layer over the official client."""
