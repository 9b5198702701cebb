"""How one setting is declared: its flag, environment variable, help, range and rules
(`setting`), and how a value is checked against its range. The settings themselves are
declared in `reconciler.core.config`."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from dataclasses import Field, dataclass, field
from typing import Any

Limits = tuple[float, float, str]
"""(lowest, highest, what the number is). Every value must also be finite: a NaN compares
false with everything, so it would pass any check written as `x < limit`."""


def envvar_of(flag: str) -> str:
    """The environment variable of a flag: `--max-instances` is RECONCILER_MAX_INSTANCES."""
    return "RECONCILER_" + flag.lstrip("-").replace("-", "_").upper()


@dataclass(frozen=True)
class Flag:
    """How one setting is given on the command line and in the environment."""

    flag: str
    help: str
    limits: Limits | None = None
    """The range of a number; checked after parsing, naming the flag."""
    parse: Callable[[str], Any] | None = None
    """Turns a text setting's value into the one kept (ValueError: not a valid value)."""
    check: Callable[[Any], str | None] | None = None
    """Why a value cannot work, or None; for rules a range cannot say."""
    fallback_env: str | None = None
    """A variable read when neither the flag nor its own variable is set (one the pod's
    downward API sets)."""

    @property
    def name(self) -> str:
        """The setting's flat name, the CLI parameter and the key of `Settings.of`:
        `--kubelet-port` is kubelet_port (the field in its group may be shorter: `port`)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def envvar(self) -> str:
        return envvar_of(self.flag)


def setting(
    default: Any,
    flag: str,
    help: str,
    *,
    limits: Limits | None = None,
    parse: Callable[[str], Any] | None = None,
    check: Callable[[Any], str | None] | None = None,
    fallback_env: str | None = None,
) -> Any:
    """A `Settings` field with its flag: the one declaration of a setting."""
    return field(
        default=default, metadata={"flag": Flag(flag, help, limits, parse, check, fallback_env)}
    )


def flat_name(item: Field[Any]) -> str:
    """A setting's name outside its group: its flag's, or for a value derived at start
    (no flag) the one its declaration gives (`metadata={"name": ...}`)."""
    if "flag" in item.metadata:
        return str(item.metadata["flag"].name)
    return str(item.metadata["name"])


def out_of_range(value: float, limits: Limits) -> str | None:
    """Why `value` breaks `limits`, or None when it is finite and within them."""
    low, high, what = limits
    if not math.isfinite(value) or not low <= value <= high:
        if math.isinf(high):
            return f"{value!r} is not {what} of at least {_number(low)}"
        return f"{value!r} is not {what} from {_number(low)} to {_number(high)}"
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def ip_address(text: str) -> str:
    """An InternalIP must be an IP: the API server dials it for logs and exec."""
    text = text.strip()
    if not text:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None


def seconds(low: float, high: float) -> Limits:
    return (low, high, "a number of seconds")
