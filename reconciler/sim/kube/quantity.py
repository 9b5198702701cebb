"""resource.Quantity as the API server parses and stores it.

The server never keeps the string a client sent: it parses the quantity and serialises it
in canonical form (`4000` becomes `4k`, `2048Mi` becomes `2Gi`, `0.5` becomes `500m`), so a
client comparing what it wrote with what it reads back must write the canonical form or
compare values. The rules, from apimachinery's `resource.Quantity`:
- the suffix fixes the format: binary (`Ki`…`Ei`), decimal SI (`n`…`E`, or none), or a
  decimal exponent (`e3`);
- precision finer than a nano-unit is rounded up;
- decimal forms print the integer mantissa with the largest exponent that is a multiple
  of three (`1500` stays `1500`, `4000` is `4k`);
- binary forms print the largest power of 1024 that divides the value, and fall back to
  decimal SI when the value is below 1024 or not a whole number.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Decimal, localcontext

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(QUANTITY_PATTERN)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_NANO = Decimal("1e-9")


class QuantityError(ValueError):
    """Not a quantity: Go's decoder refuses it before validation runs (a 400)."""


def parse(text: object) -> tuple[Decimal, str]:
    """The value and its format ("BinarySI", "DecimalSI" or "DecimalExponent")."""
    raw = str(text).strip()
    match = _QUANTITY.fullmatch(raw)
    if match is None or raw.count(".") > 1 or not any(c.isdigit() for c in match.group(1)):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number, suffix = match.groups()
    with localcontext() as context:
        context.prec = 80
        value = Decimal(number)
        if suffix in _BINARY:
            value, fmt = value * (Decimal(2) ** _BINARY[suffix]), "BinarySI"
        elif suffix in _DECIMAL:
            value, fmt = value.scaleb(_DECIMAL[suffix]), "DecimalSI"
        elif suffix[:1] in ("e", "E") and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
            value, fmt = value.scaleb(int(suffix[1:])), "DecimalExponent"
        else:
            raise QuantityError(f"unable to parse quantity's suffix: {suffix!r}")
        return value.quantize(_NANO, rounding=ROUND_UP), fmt


def canonical(text: object) -> str:
    """The string the API server stores for this quantity."""
    value, fmt = parse(text)
    if value == 0:
        return "0"
    if fmt == "BinarySI" and abs(value) >= 1024 and value == value.to_integral_value():
        return _binary(int(value))
    return _decimal(value, "DecimalExponent" if fmt == "DecimalExponent" else "DecimalSI")


def _binary(value: int) -> str:
    power = 0
    while power < len(_BINARY_SUFFIX) - 1 and value % 1024 == 0:
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIX[power]}"


def _decimal(value: Decimal, fmt: str) -> str:
    sign, digits, exponent = value.normalize().as_tuple()
    mantissa = int("".join(map(str, digits)))
    assert isinstance(exponent, int)
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    text = f"{'-' if sign else ''}{mantissa}"
    if fmt == "DecimalSI" and exponent in _DECIMAL_SUFFIX:
        return text + _DECIMAL_SUFFIX[exponent]
    return text + (f"e{exponent}" if exponent else "")


def is_whole(text: object) -> bool:
    value, _ = parse(text)
    return value == value.to_integral_value()


def is_negative(text: object) -> bool:
    value, _ = parse(text)
    return value < 0
