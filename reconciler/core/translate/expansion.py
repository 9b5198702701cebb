"""`$(VAR)` references, expanded exactly as the kubelet expands them.

The kubelet's rules (third_party/forked/golang/expansion): `$(NAME)` becomes NAME's
value when NAME is defined and stays as written when it is not; `$$` becomes a literal
`$`, so `$$(NAME)` yields the text `$(NAME)`; a `$` followed by anything else, or a
`$(` never closed, is kept as written. There is no shell involved: no `${NAME}`, no `$NAME`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")


def expand(text: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        return env.get(match.group(2), match.group(0))

    return _REFERENCE.sub(replace, text)
