"""Op name -> estimator table, and the dispatch that reads a recorded op through it."""

from __future__ import annotations

from typing import Callable

from traceclass.costmodel.args import Args
from traceclass.costmodel.cost import FAMILIES, OpCost
from traceclass.model.strings import OpInputs

Estimator = Callable[[str, Args], "OpCost | None"]

_TABLE: dict[str, tuple[str, Estimator]] = {}
_COMPOSITE: set[str] = set()


def register(family: str, *names: str, composite: bool = False) -> Callable[[Estimator], Estimator]:
    """Register ``fn`` for ``names`` (``aten::mm``); ``fn(op_name, args)`` returns an OpCost or None.

    ``composite`` marks ops whose work is done by a child op that is modelled too
    (``aten::linear`` runs ``aten::addmm``): callers summing costs must count one of them.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")

    def deco(fn: Estimator) -> Estimator:
        for n in names:
            if n in _TABLE:
                raise ValueError(f"duplicate cost model for {n}")
            _TABLE[n] = (family, fn)
            if composite:
                _COMPOSITE.add(n)
        return fn

    return deco


def _canonical(op_name: str) -> str:
    name = op_name.strip()
    if name in _TABLE:
        return name
    # "aten::add.Tensor" (overload suffix) and "add" (no namespace) as some exporters write them
    if "::" in name:
        ns, _, rest = name.partition("::")
        base = f"{ns}::{rest.split('.', 1)[0]}"
    else:
        base = f"aten::{name.split('.', 1)[0]}"
    return base


def estimate(op_name: str, inputs: OpInputs | None) -> OpCost | None:
    """FLOPs and ideal bytes of one op call, or None when the op or its inputs are not modelled.

    None also when shapes were not recorded (``record_shapes=False``) or do not fit the op's
    schema: a malformed or unexpected record is "no model", never a crash or a guess.
    """
    if inputs is None or not inputs.dims:
        return None
    entry = _TABLE.get(_canonical(op_name))
    if entry is None:
        return None
    family, fn = entry
    try:
        return fn(_canonical(op_name), Args(inputs))
    except (IndexError, ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError):
        # traces are arbitrary input: an inconsistent record means "no model", not a crash
        return None


def families() -> dict[str, list[str]]:
    """Op names each family covers (sorted), for docs and tests."""
    out: dict[str, list[str]] = {f: [] for f in FAMILIES}
    for name, (family, _) in _TABLE.items():
        out[family].append(name)
    return {f: sorted(v) for f, v in out.items()}


def is_composite(op_name: str) -> bool:
    """True for ops whose work a modelled child op performs (count the child, not both)."""
    return _canonical(op_name) in _COMPOSITE
