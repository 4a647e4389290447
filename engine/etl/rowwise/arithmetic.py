"""Arithmetic as Spark computes it: integers in their type's range, doubles and floats
in IEEE 754 (a float computed in double and rounded once, which for + - * / gives the
float result), decimals exactly and then rounded half up to the result type Spark
derives (``DecimalPrecision``: precision loss allowed or not, as the session says).

Wherever Spark would raise an error under ANSI, give NULL without it, or give a value
the evaluator refuses to hold — an integer overflow, a division by zero, a double that
becomes infinite, a decimal that does not fit — the row is refused
(:class:`Unsupported`): the caller evaluates in Spark, which decides. So the result
never depends on ``spark.sql.ansi.enabled`` or ``try_*``, which the plan's JSON does
not show. Decimal division, remainder and ``div`` are not implemented.
"""

from __future__ import annotations

import decimal
import math
import operator
from collections.abc import Callable
from typing import Any

from engine.etl.rowwise.compiled import (
    Compiled,
    Compiler,
    builds,
    children,
    same_types,
    strict,
    strict2,
)
from engine.etl.rowwise.datatypes import (
    INTEGRAL_RANGE,
    LONG,
    MAX_PRECISION,
    Atomic,
    DataType,
    DecimalType,
)
from engine.etl.rowwise.java_numbers import to_float32
from engine.etl.rowwise.json_read import DECIMAL_CONTEXT, fit_decimal
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

Operation = Callable[[Any, Any], Any]


def integral_checked(name: str, operation: Operation) -> Operation:
    low, high = INTEGRAL_RANGE[name]

    def run(a: int, b: int) -> int:
        result = operation(a, b)
        if not low <= result <= high:
            raise Unsupported(f"{name} overflow")
        return result  # type: ignore[no-any-return]

    return run


def double_checked(operation: Operation) -> Operation:
    def run(a: float, b: float) -> float:
        result = operation(a, b)
        if not math.isfinite(result):
            raise Unsupported("a double that is not finite")
        return result  # type: ignore[no-any-return]

    return run


def float_checked(operation: Operation) -> Operation:
    def run(a: float, b: float) -> float:
        result = to_float32(operation(a, b))
        if not math.isfinite(result):
            raise Unsupported("a float that is not finite")
        return result

    return run


def adjust_precision_scale(precision: int, scale: int) -> DecimalType:
    """Spark's ``DecimalType.adjustPrecisionScale`` (precision loss allowed)."""
    if precision <= MAX_PRECISION:
        return DecimalType(precision, scale)
    integer_digits = precision - scale
    minimum_scale = min(scale, 6)
    return DecimalType(MAX_PRECISION, max(MAX_PRECISION - integer_digits, minimum_scale))


def _bounded(precision: int, scale: int) -> DecimalType:
    return DecimalType(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def decimal_result(name: str, a: DecimalType, b: DecimalType, loss: bool) -> DecimalType:
    """The result type of ``a <name> b`` for decimals."""
    fit = adjust_precision_scale if loss else _bounded
    if name in ("Add", "Subtract"):
        scale = max(a.scale, b.scale)
        return fit(max(a.precision - a.scale, b.precision - b.scale) + scale + 1, scale)
    if name == "Multiply":
        return fit(a.precision + b.precision + 1, a.scale + b.scale)
    raise Unsupported(f"{name} of decimals")


def decimal_checked(operation: Operation, result: DecimalType) -> Operation:
    quantum = decimal.Decimal(1).scaleb(-result.scale)

    def run(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
        exact = operation(a, b)
        if len(exact.as_tuple().digits) > MAX_PRECISION + 1:
            # Spark multiplies in a context of 39 digits: a longer product is rounded twice
            raise Unsupported("a decimal product of more than 39 digits")
        return fit_decimal(exact, quantum, result.precision)

    return run


_DECIMAL_OPERATIONS: dict[str, Operation] = {
    "Add": DECIMAL_CONTEXT.add,
    "Subtract": DECIMAL_CONTEXT.subtract,
    "Multiply": DECIMAL_CONTEXT.multiply,
}
_OPERATIONS: dict[str, Operation] = {
    "Add": operator.add,
    "Subtract": operator.sub,
    "Multiply": operator.mul,
}


@builds("Add", "Subtract", "Multiply")
def _add(node: Node, compiler: Compiler) -> Compiled:
    left, right = children(node, compiler, 2)
    if isinstance(left.type, DecimalType) and isinstance(right.type, DecimalType):
        result = decimal_result(
            node.name, left.type, right.type, compiler.session.decimal_precision_loss
        )
        operation = decimal_checked(_DECIMAL_OPERATIONS[node.name], result)
        return strict2(operation, left, right, result)
    data_type = same_types(node, [left, right])
    return strict2(_numeric(node, data_type, _OPERATIONS[node.name]), left, right, data_type)


def _numeric(node: Node, data_type: DataType, operation: Operation) -> Operation:
    name = data_type.name if isinstance(data_type, Atomic) else ""
    if name in INTEGRAL_RANGE:
        return integral_checked(name, operation)
    if name == "double":
        return double_checked(operation)
    if name == "float":
        return float_checked(operation)
    raise Unsupported(f"{node.name} over {data_type}")


def _nonzero(operation: Operation) -> Operation:
    def run(a: Any, b: Any) -> Any:
        if b == 0:
            raise Unsupported("a division by zero")
        return operation(a, b)

    return run


@builds("Divide")
def _divide(node: Node, compiler: Compiler) -> Compiled:
    left, right = children(node, compiler, 2)
    data_type = same_types(node, [left, right])
    if data_type != Atomic("double"):
        raise Unsupported(f"Divide over {data_type}")
    return strict2(_nonzero(double_checked(operator.truediv)), left, right, data_type)


def java_remainder(a: int, b: int) -> int:
    """Java's ``a % b`` for integers: the sign of the dividend."""
    result = abs(a) % abs(b)
    return -result if a < 0 else result


@builds("Remainder")
def _remainder(node: Node, compiler: Compiler) -> Compiled:
    left, right = children(node, compiler, 2)
    data_type = same_types(node, [left, right])
    name = data_type.name if isinstance(data_type, Atomic) else ""
    operation: Operation
    if name in INTEGRAL_RANGE:
        operation = java_remainder
    elif name in ("double", "float"):
        operation = math.fmod
    else:
        raise Unsupported(f"Remainder over {data_type}")
    return strict2(_nonzero(operation), left, right, data_type)


def _integral_divide(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    result = -quotient if (a < 0) != (b < 0) else quotient
    low, high = INTEGRAL_RANGE["long"]
    if not low <= result <= high:
        raise Unsupported("long overflow")
    return result


@builds("IntegralDivide")
def _div(node: Node, compiler: Compiler) -> Compiled:
    left, right = children(node, compiler, 2)
    if left.type != LONG or right.type != LONG:
        raise Unsupported(f"div over {left.type} and {right.type}")
    return strict2(_nonzero(_integral_divide), left, right, LONG)


def _negate(data_type: DataType, node: Node) -> Callable[[Any], Any]:
    name = data_type.name if isinstance(data_type, Atomic) else ""
    if name in INTEGRAL_RANGE:
        low, high = INTEGRAL_RANGE[name]

        def negate(value: int) -> int:
            if value == low:
                raise Unsupported(f"{name} overflow")
            return -value

        return negate
    if name in ("double", "float"):
        return operator.neg
    if isinstance(data_type, DecimalType):
        return lambda value: (-value) if value else value
    raise Unsupported(f"{node.name} of {data_type}")


@builds("UnaryMinus")
def _unary_minus(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    return strict(_negate(child.type, node), child, child.type)


@builds("UnaryPositive")
def _unary_positive(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    _negate(child.type, node)  # numbers only
    return child


@builds("Abs")
def _abs(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    negate = _negate(child.type, node)
    return strict(lambda value: negate(value) if value < 0 else abs(value), child, child.type)
