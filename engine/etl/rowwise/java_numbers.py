"""Doubles and floats as the JVM writes them (``Double.toString``, ``Float.toString``):
what Jackson writes in Spark's ``to_json`` and what ``CAST(x AS STRING)`` gives.

Layout: ``1234.5``, ``0.001``, ``1.0E7``, ``1.0E-4`` — plain between 10^-3 and 10^7,
otherwise one digit, a point, at least one more digit and ``E`` with the exponent.

Digits: the shortest decimal that identifies the value, the closest of those. Java 19+
renders exactly that (Raffaello Giulietti's algorithm); Java 17, which Spark runs on
here, renders it with the older ``FloatingDecimal``, which differs from it in known
places. The digits here are Python's shortest ``repr`` (the same definition), and a
value is rendered only where both JVM algorithms give those digits; elsewhere
:class:`Unsupported`:

* subnormal values (Java 19+ then prefers two digits to one);
* integers from 2^54 (doubles) or 2^25 (floats) below 2^63: Java 17 prints their
  exact integer digits rounded at a precision estimated from the exponent;
* a shortest decimal on or beyond the bound of the *open* interval of values that round
  to x (Java 17's bound; for a power of two, the narrower lower half-gap on both sides),
  a value halfway between two decimals of that length (the algorithms break such ties
  their own ways), or a shortest decimal above the value whose truncation at the same length is inside
  that interval too (Java 17 then does not always round up to the closer one:
  2.3851136372966235E25 comes out as 2.3851136372966234E25) — checked exactly wherever
  they are possible (16 and more digits, powers of two, values from 2^53).

NaN and infinities never reach here (the reader and the arithmetic refuse them).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from functools import lru_cache

from engine.etl.rowwise.unsupported import Unsupported

_F32 = struct.Struct("<f")
_MIN_NORMAL_DOUBLE = 2.2250738585072014e-308
_MIN_NORMAL_FLOAT = 1.1754943508222875e-38


def to_float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float (ties to even), as Java's
    ``(float) d``; Unsupported beyond the float range."""
    try:
        return _F32.unpack(_F32.pack(value))[0]  # type: ignore[no-any-return]
    except OverflowError:
        raise Unsupported(f"{value!r} overflows a float") from None


def double_text(value: float) -> str:
    """``Double.toString(value)``."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _double_text(value)


def float_text(value: float) -> str:
    """``Float.toString(value)`` of a value a 32-bit float holds."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _float_text(value)


@lru_cache(maxsize=8192)
def _double_text(value: float) -> str:
    magnitude = abs(value)
    if not math.isfinite(value):
        raise Unsupported(f"the double {value!r}")
    if magnitude < _MIN_NORMAL_DOUBLE:
        raise Unsupported(f"the subnormal double {value!r}")
    if 2.0**54 <= magnitude < 2.0**63:
        raise Unsupported(f"the double {value!r} (Java 17 prints integers this large its own way)")
    digits, dec_exp = _shortest(repr(magnitude))
    mantissa, exponent = math.frexp(magnitude)  # magnitude = mantissa * 2**exponent
    power_of_two = mantissa == 0.5
    if len(digits) >= 16 or power_of_two or magnitude >= 2.0**53:
        truncating = exponent - 1 in _TRUNCATING_DOUBLE_EXPONENTS
        _check_exact(magnitude, digits, dec_exp, exponent - 53, power_of_two, truncating)
    return _layout(digits, dec_exp, value < 0)


@lru_cache(maxsize=8192)
def _float_text(value: float) -> str:
    magnitude = abs(value)
    if not math.isfinite(value):
        raise Unsupported(f"the float {value!r}")
    if magnitude < _MIN_NORMAL_FLOAT:
        raise Unsupported(f"the subnormal float {value!r}")
    if 2.0**25 <= magnitude < 2.0**63:
        raise Unsupported(f"the float {value!r} (Java 17 prints integers this large its own way)")
    text = _float32_shortest(magnitude)
    digits, dec_exp = _shortest(text)
    mantissa, exponent = math.frexp(magnitude)
    power_of_two = mantissa == 0.5
    if len(digits) >= 8 or power_of_two or magnitude >= 2.0**24:
        _check_exact(magnitude, digits, dec_exp, exponent - 24, power_of_two, truncating=True)
    return _layout(digits, dec_exp, value < 0)


def _float32_shortest(magnitude: float) -> str:
    """The shortest decimal (at most 9 digits) that reads back as the float."""
    for places in range(9):
        text = f"{magnitude:.{places}e}"
        read = float(text)
        if is_float32_midpoint(read):
            raise Unsupported(f"the float {magnitude!r} (a decimal on a rounding midpoint)")
        if to_float32(read) == magnitude:
            return text
    raise Unsupported(f"the float {magnitude!r}")  # pragma: no cover - 9 digits always do


def is_float32_midpoint(value: float) -> bool:
    """Whether a double lies exactly halfway between two 32-bit floats (where rounding
    it again may differ from rounding the decimal it came from)."""
    if value == 0.0 or not math.isfinite(value):
        return False
    mantissa, exponent = math.frexp(abs(value))
    scaled = mantissa * 2.0**25  # 25 bits: the float's 24 and the half
    return scaled == math.floor(scaled) and int(scaled) % 2 == 1


def _shortest(text: str) -> tuple[str, int]:
    """``(digits, dec_exp)`` of a positive decimal text: value = 0.digits × 10^dec_exp,
    digits without leading or trailing zeros."""
    mantissa, _, exp_text = text.lower().partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    every = whole + fraction
    stripped = every.lstrip("0")
    lead = len(every) - len(stripped)
    digits = stripped.rstrip("0")
    return digits, len(whole) - lead + exponent


def _layout(digits: str, dec_exp: int, negative: bool) -> str:
    """Java's layout of 0.digits × 10^dec_exp."""
    if 0 < dec_exp < 8:
        if len(digits) <= dec_exp:
            text = digits + "0" * (dec_exp - len(digits)) + ".0"
        else:
            text = digits[:dec_exp] + "." + digits[dec_exp:]
    elif -3 < dec_exp <= 0:
        text = "0." + "0" * (-dec_exp) + digits
    else:
        text = f"{digits[0]}.{digits[1:] or '0'}E{dec_exp - 1}"
    return "-" + text if negative else text


#: Where Java 17 may take the truncation though rounding up is closer: doubles of
#: binary exponent 84 (its 64-bit arithmetic overflows there), measured over every
#: exponent (tests/integration/test_rowwise_json.py repeats a sample of the measure).
#: Floats were seen to at exponents 82 and 85: for them every such case is refused.
_TRUNCATING_DOUBLE_EXPONENTS = frozenset({84})


def _check_exact(
    magnitude: float,
    digits: str,
    dec_exp: int,
    ulp_exp: int,
    power_of_two: bool,
    truncating: bool,
) -> None:
    """Unsupported unless the decimal lies strictly inside Java 17's interval around the
    value and, where Java 17 may truncate (``truncating``), is not a rounding up whose
    truncation lies inside too."""
    exact = Fraction(magnitude)
    unit_exp = dec_exp - len(digits)  # the last digit's place: 10^unit_exp
    unit = Fraction(10) ** unit_exp
    chosen = int(digits) * unit
    half_gap = Fraction(2) ** (ulp_exp - (2 if power_of_two else 1))
    distance = abs(chosen - exact)
    if distance >= half_gap:
        raise Unsupported(f"the number {magnitude!r} (its shortest decimal is on the bound)")
    other = chosen - unit if chosen > exact else chosen + unit
    if abs(other - exact) == distance:
        raise Unsupported(f"the number {magnitude!r} (halfway between two decimals)")
    if chosen > exact and other > exact - half_gap and truncating:
        raise Unsupported(f"the number {magnitude!r} (rounded up, with its truncation inside)")
