"""The reference pages of the docs site, generated from the code (docs/reference/).

Commands and flags from the click commands, annotations from their catalogue beside the
constants the code reads, pod and Event reasons from `core/reasons.py` with what to do,
metrics from the metrics registry, the chart's values from its schema and values file.
`python -m reconciler.docsgen` (from the repository's root) writes the pages;
`tests/unit/docsgen/test_docs_reference.py` fails when one is stale or when the code has a flag,
annotation, reason or metric the pages do not name.

A module outside the layers, like `reconciler.app`: it reads the whole program.
"""
