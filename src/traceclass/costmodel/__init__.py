"""Per-op cost model: FLOPs and ideal bytes moved from recorded op inputs.

``estimate(op_name, inputs)`` reads an op's ``Input Dims``/``Input type`` (plus strides and
Concrete Inputs where they matter) and returns an :class:`OpCost`, or None when the op has no
model or its inputs were not recorded. Numbers are never invented: an ambiguous record gives
None, a documented assumption is spelled out in ``OpCost.note``.

Families and the modules that own them: ``gemm`` (:mod:`.matmul`), ``conv`` (:mod:`.conv`),
``attention`` (:mod:`.attention`), ``elementwise`` (:mod:`.pointwise`), ``softmax``
(:mod:`.softmax`), ``norm`` (:mod:`.norm`), ``reduction`` (:mod:`.reduction`), ``copy`` and
``embedding`` (:mod:`.memory`). Each module's docstring states its formulas and constants.

Wrapper ops (``aten::linear`` over ``aten::addmm``, ``aten::conv2d`` over
``aten::convolution`` ...) are modelled with the same numbers as the work they delegate;
:func:`is_composite` marks them so that a caller summing costs counts each piece of work once.
"""

from __future__ import annotations

from traceclass.costmodel import attention, conv, matmul, memory, norm, pointwise, reduction, softmax  # noqa: F401
from traceclass.costmodel.cost import FAMILIES, OpCost
from traceclass.costmodel.registry import estimate, families, is_composite

__all__ = ["FAMILIES", "OpCost", "estimate", "families", "is_composite"]
