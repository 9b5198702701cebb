"""Kubernetes resource quantities in the canonical form the API server stores.

The server reads `4000` and keeps `4k`; `2048Mi` becomes `2Gi`, `0.5` becomes `500m`.
Writing the canonical form ourselves means the Node we read back equals the Node we
meant, so an unchanged heartbeat writes nothing. The rules are apimachinery's
`resource.Quantity`: the suffix sets the format (binary `Ki`…`Ei`, decimal SI `n`…`E`,
or an `e<N>` exponent); decimal forms print an integer mantissa with the largest
exponent that is a multiple of three; binary forms print the largest power of 1024
dividing the value, and turn decimal when the value is under 1024 or not whole.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_UP, Decimal, InvalidOperation, localcontext

_SYNTAX = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_BINARY_POWERS = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_SI_EXPONENTS = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SI_SUFFIXES = {exponent: suffix for suffix, exponent in _SI_EXPONENTS.items()} | {0: ""}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def canonical_quantity(text: str) -> str:
    """The API server's spelling of `text`; ValueError when it is not a quantity."""
    value, suffix = _parse(text)
    with localcontext() as context:
        context.prec = 80
        if value == 0:
            return "0"
        if suffix in _BINARY_POWERS and abs(value) >= 1024 and value == int(value):
            return _binary(int(value))
        return _decimal(value, exponent_form=suffix[:1] in ("e", "E"))


def quantity_value(text: str) -> Decimal:
    """The number `text` stands for (cores, bytes); ValueError when it is not a quantity."""
    return _parse(text)[0]


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> tuple[Decimal, str]:
    """Remembered: each tick reads the same few spellings on every claim and PV."""
    match = _SYNTAX.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (such as 4, 500m, 16Gi)")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    with localcontext() as context:
        context.prec = 80
        try:
            value = Decimal(sign + number)
        except InvalidOperation as error:
            raise ValueError(f"{text!r} is not a Kubernetes quantity") from error
        if suffix in _BINARY_POWERS:
            value *= Decimal(1024) ** _BINARY_POWERS[suffix]
        elif suffix[:1] in ("e", "E"):
            value = value.scaleb(int(suffix[1:]))
        elif suffix:
            value = value.scaleb(_SI_EXPONENTS[suffix])
        return value.quantize(Decimal("1e-9"), rounding=ROUND_UP), suffix  # nano precision


def _binary(value: int) -> str:
    power = 0
    while power < len(_BINARY_SUFFIXES) - 1 and value % 1024 == 0:
        value, power = value // 1024, power + 1
    return f"{value}{_BINARY_SUFFIXES[power]}"


def _decimal(value: Decimal, exponent_form: bool) -> str:
    sign, digits, exponent = value.normalize().as_tuple()
    mantissa = int("".join(str(d) for d in digits))
    exponent = int(exponent)
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    text = f"{'-' if sign else ''}{mantissa}"
    if not exponent_form and exponent in _SI_SUFFIXES:
        return text + _SI_SUFFIXES[exponent]
    return text + (f"e{exponent}" if exponent else "")
