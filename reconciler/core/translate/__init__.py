"""Pure translation between a Kubernetes pod and a RunPod instance.

One concept per module: `request` turns a pod into ranked create requests (using
`container`, `env`, `ports`, `storage`, `names` and `registry`), `status` turns an
instance back into a pod status, `annotations` and `errors` are shared by all. Nothing
here does I/O or reads the clock; the engine passes in whatever the translation needs.
"""
