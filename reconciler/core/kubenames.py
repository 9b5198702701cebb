"""Whether a string is a Kubernetes object name, as the API server validates them.

A name that reaches us from a URL or a command line is checked before it reaches a
path or a selector: `talker,metadata.namespace=default` is not a pod name but a second
field-selector term.
"""

from __future__ import annotations

import re

from reconciler.core.printable import quoted

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")

# (pattern, most characters, what the rule is called) for each kind of name we take in.
_RULES = {
    "namespace": (_DNS_LABEL, 63, "a DNS label"),
    "pod name": (_DNS_SUBDOMAIN, 253, "a DNS subdomain"),
    "container name": (_DNS_LABEL, 63, "a DNS label"),
}


def name_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot be a `kind` ("namespace", "pod name", "container name"), or None."""
    pattern, most, rule = _RULES[kind]
    if len(value) <= most and pattern.fullmatch(value):
        return None
    return (
        f"{quoted(value)} is not a valid {kind}: it must be {rule} (at most {most} "
        "lower-case letters, digits and '-'"
        + (" or '.'" if rule == "a DNS subdomain" else "")
        + ", starting and ending with a letter or digit)"
    )
