"""How numbers read: one rule for every number on the site, and in `make report`.

Whole numbers as whole numbers (5, not 5.00), with a thousands comma (1,672); any other number to
three significant figures (45.3, 0.0712) but never fewer digits than its whole part (2,887, not
2.89e+03), and below 0.001 as a power of ten (8.09 × 10⁻⁷); never e-notation. A quantity carries
its unit once: "0.0377 GB/s", a range "0.0315–0.0440" in the unit of the value it qualifies, a
ratio "2,528×", a share "86%". tests/site/test_built_site.py holds every built page to it.

Split out of fieldguide/measuring/timings.py (the runs' data model), which keeps the fields
these formats read (TIME_FIELDS).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fieldguide.measuring.timings import TIME_FIELDS

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
SMALLEST_PLAIN = 1e-3   # below this a number reads as a power of ten


def power_of_ten(value: float, digits: int = 3) -> str:
    """8.09e-07 -> '8.09 × 10⁻⁷'."""
    mantissa, exponent = f"{value:.{max(digits - 1, 0)}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def format_number(value: Any) -> str:
    """The site's rule for a number without a unit: 5, 1,672, 45.3, 0.0712, 8.09 × 10⁻⁷."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size < SMALLEST_PLAIN:
        return power_of_ten(value)
    digits = 2 - math.floor(math.log10(size))
    text = f"{value:.{digits}f}"
    # rounding can carry into a new digit (99.96 -> "100.0"): three figures, then
    return f"{value:,.0f}" if abs(float(text)) >= 100 else text


def format_spec(value: Any, spec: str) -> str:
    """A page's own format spec (`.1f`, `.0%`, `.1e`) under the same rule: thousands commas, and
    a power of ten instead of e-notation."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return format(value, spec)
    if spec.endswith(("e", "E")):
        return power_of_ten(value, int(spec.strip(".eE") or 6) + 1)
    if spec.endswith("g"):
        digits = int(spec.strip(".g") or 6)
        if value and abs(value) < SMALLEST_PLAIN:
            return power_of_ten(value, digits)
        if not value or abs(value) >= 10 ** digits:
            return f"{value:,.0f}"
        decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
        return f"{float(f'{value:.{digits}g}'):,.{decimals}f}"
    if "," not in spec and spec.endswith(("f", "%")):
        spec = spec.replace(".", ",.", 1) if "." in spec else spec + ","
    return format(value, spec)


@dataclass(frozen=True)
class Unit:
    """How a quantity's unit reads beside its number: ' GB/s' (a space) or '×'/'%' (glued)."""

    text: str
    scale: float = 1.0

    def number(self, value: float) -> str:
        return format_number(value if self.scale == 1 else value / self.scale)


TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def seconds_unit(seconds: float) -> Unit:
    """The unit in which `seconds` reads between 1 and 1000: 3.2 µs, 41.0 ms, 1.25 s."""
    for unit, scale in TIME_UNITS:
        if abs(seconds) >= scale:
            return Unit(f" {unit}", scale)
    return Unit(" ns", 1e-9)


def bytes_unit(nbytes: float) -> Unit:
    for unit, scale in BYTE_UNITS:
        if nbytes >= scale:
            return Unit(f" {unit}", scale)
    return Unit(" B", 1)


def format_seconds(seconds: float) -> str:
    """Seconds in the unit a reader expects: 3.2 µs, 41.0 ms, 1.25 s."""
    unit = seconds_unit(seconds)
    return unit.number(seconds) + unit.text


def format_bytes(nbytes: float) -> str:
    """1 KiB, 1.5 GiB, 256 MiB."""
    unit = bytes_unit(nbytes)
    value = nbytes / unit.scale
    return format_number(int(value) if value.is_integer() else value) + unit.text


# A derived field's unit, and a recorded field's unit from the end of its name (step_us, power_w).
FIELD_UNITS: dict[str, Unit] = {
    "bandwidth_gbs": Unit(" GB/s"), "tflops": Unit(" TFLOP/s"),
    # shares recorded as fractions read as percentages, as the pages' own `.0%` shares do
    "idle_gpu0": Unit("%", 0.01), "idle_gpu1": Unit("%", 0.01), "idle_mean": Unit("%", 0.01),
}
SUFFIXES: dict[str, Callable[[float], Unit] | Unit] = {
    "_s": seconds_unit,
    "_ms": seconds_unit,   # values in ms and µs are turned into seconds first (_TO_SECONDS)
    "_us": seconds_unit,
    "_bytes": bytes_unit,
    "_gib": Unit(" GiB"),
    "_pct": Unit("%"),
    "_w": Unit(" W"),
    "_per_s": Unit("/s"),
    "_gbs": Unit(" GB/s"),
}
# Suffixes of sizes: a byte count is what the benchmark allocated, not how fast the host was, so
# a host-bound benchmark's sizes read without its host range (fieldguide/measuring/host_bound.py).
SIZE_SUFFIXES = ("_bytes", "_gib")
# what a value in seconds-per-something suffix is multiplied by to reach seconds
_TO_SECONDS = {"_ms": 1e-3, "_us": 1e-6}


def _suffix(field: str) -> str | None:
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if field.endswith(s)), None)


def carries_unit(field: str) -> bool:
    """Whether `field`'s value reads with a unit of its own (`peak_gpu0_gib`, `step_us`,
    `bandwidth_gbs`): a page's `unit=` beside it would print the unit twice."""
    return field in (*TIME_FIELDS, "per_op", "bytes") or field in FIELD_UNITS or _suffix(field) is not None


def unit_of(field: str, value: float) -> tuple[Unit, float]:
    """(unit, the value in base units) in which `field`'s `value` reads: seconds pick ms/µs by
    the value's size, bytes KiB/MiB/GiB."""
    if field in TIME_FIELDS or field == "per_op":
        return seconds_unit(value), value
    if field == "bytes":
        return bytes_unit(value), value
    if field in FIELD_UNITS:
        return FIELD_UNITS[field], value
    suffix = _suffix(field)
    if suffix is None:
        return Unit(""), value
    value = value * _TO_SECONDS.get(suffix, 1)
    unit = SUFFIXES[suffix]
    return (unit if isinstance(unit, Unit) else unit(value)), value


def format_value(field: str, value: Any, spec: str | None = None) -> str:
    """A field's value in its unit, by the site's one rule (format_number)."""
    if spec:
        return format_spec(value, spec)
    if field == "rounds" and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    unit, base = unit_of(field, value)
    if field == "bytes" or field.endswith("_bytes"):
        return format_bytes(base)
    return unit.number(base) + unit.text


def format_range(field: str, value: Any, low: Any, high: Any, spec: str | None = None
                 ) -> tuple[str, str]:
    """(the value with its unit, the range's ends in that same unit, written once at the end
    only where it is glued to the number, '×' or '%'): ('0.0377 GB/s', '0.0315–0.0440')."""
    if spec:
        text, ends = format_spec(value, spec), [format_spec(v, spec) for v in (low, high)]
        glued = spec.endswith("%")
        return text, f"{ends[0].rstrip('%') if glued else ends[0]}–{ends[1]}"
    unit, base = unit_of(field, value)
    factor = base / value if value else 1
    if field == "bytes" or field.endswith("_bytes"):
        unit = bytes_unit(base)
    text = unit.number(base) + unit.text
    ends = [unit.number(v * factor) for v in (low, high)]
    return text, f"{ends[0]}–{ends[1]}" + (unit.text if unit.text in ("×", "%") else "")
