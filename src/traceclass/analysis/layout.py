"""Tensor memory layouts from recorded ``Input Dims`` / ``Input Strides``.

Definitions (size-1 dimensions never matter: their stride is arbitrary):

* *contiguous*: the strides equal the row-major strides of the dims;
* *channels_last*: a 4-D (NCHW dims) or 5-D tensor whose strides are row-major over the dims
  in N, spatial..., C order (``torch.channels_last`` / ``channels_last_3d``);
* *broadcast*: some dimension of size > 1 has stride 0 (an ``expand``-ed view);
* the *order* of a dense tensor is its dimensions of size > 1 sorted from largest to smallest
  stride. A copy between two tensors of the same shape whose orders differ moves every element
  to a different relative place: a transpose (``permute().contiguous()``, NCHW <-> NHWC).
  Equal orders with gaps (a slice made contiguous) are a gather, not a transpose.

``memory_format`` codes are the ``Concrete Inputs`` values of a ``memory_format`` argument
(c10::MemoryFormat): 0 contiguous, 1 preserve, 2 channels_last, 3 channels_last_3d.
"""

from __future__ import annotations

from traceclass.model import OpInputs
from traceclass.model.dtypes import canonical_dtype, dtype_size

Dims = tuple[int, ...]

CONTIGUOUS, PRESERVE, CHANNELS_LAST, CHANNELS_LAST_3D = 0, 1, 2, 3
FORMAT_NAME = {CONTIGUOUS: "contiguous", CHANNELS_LAST: "channels_last", CHANNELS_LAST_3D: "channels_last_3d"}


def row_major_strides(dims: Dims) -> Dims:
    out = []
    acc = 1
    for d in reversed(dims):
        out.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(out))


def _dense_in_order(dims: Dims, strides: Dims, order: list[int]) -> bool:
    """Strides are row-major over ``dims`` taken in ``order`` (slowest first), size-1 ignored."""
    expected = 1
    for i in reversed(order):
        if dims[i] != 1 and strides[i] != expected:
            return False
        expected *= dims[i]
    return True


def is_contiguous(dims: Dims, strides: Dims) -> bool:
    return len(dims) == len(strides) and _dense_in_order(dims, strides, list(range(len(dims))))


def is_channels_last(dims: Dims, strides: Dims) -> bool:
    n = len(dims)
    if n not in (4, 5) or len(strides) != n:
        return False
    return _dense_in_order(dims, strides, [0] + list(range(2, n)) + [1])


def is_broadcast(dims: Dims, strides: Dims) -> bool:
    return any(d > 1 and s == 0 for d, s in zip(dims, strides))


def order(dims: Dims, strides: Dims) -> tuple[int, ...]:
    """Dimensions of size > 1, slowest (largest stride) first; ties keep dimension order."""
    idx = [i for i, d in enumerate(dims) if d > 1]
    return tuple(sorted(idx, key=lambda i: (-strides[i], i)))


def is_dense(dims: Dims, strides: Dims) -> bool:
    """Non-overlapping and without gaps in some dimension order (a permuted contiguous tensor)."""
    return _dense_in_order(dims, strides, list(order(dims, strides)))


def format_name(dims: Dims, strides: Dims) -> str:
    """``contiguous``, ``channels_last``, ``ambiguous`` (both, e.g. C == 1), ``broadcast``,
    ``permuted`` (dense in another order) or ``strided`` (gaps)."""
    if is_broadcast(dims, strides):
        return "broadcast"
    c, cl = is_contiguous(dims, strides), is_channels_last(dims, strides)
    if c and cl:
        return "ambiguous"
    if c:
        return "contiguous"
    if cl:
        return "channels_last"
    return "permuted" if is_dense(dims, strides) else "strided"


def is_transpose(src: tuple[Dims, Dims], dst: tuple[Dims, Dims]) -> bool:
    """A copy from ``src`` to ``dst`` ((dims, strides) each, same shape) reorders memory.

    False for broadcasts (stride 0: an expansion, not a transpose) and for equal orders.
    """
    (sd, ss), (dd, ds) = src, dst
    if sd != dd or len(ss) != len(sd) or len(ds) != len(dd):
        return False
    if is_broadcast(sd, ss) or is_broadcast(dd, ds):
        return False
    return order(sd, ss) != order(dd, ds)


def target_strides(dims: Dims, memory_format: int) -> Dims | None:
    """Strides a tensor of ``dims`` gets in ``memory_format`` (None: preserve or not applicable)."""
    n = len(dims)
    if memory_format == CONTIGUOUS:
        return row_major_strides(dims)
    if (memory_format == CHANNELS_LAST and n == 4) or (memory_format == CHANNELS_LAST_3D and n == 5):
        perm = [0] + list(range(2, n)) + [1]
        rm = row_major_strides(tuple(dims[i] for i in perm))
        out = [0] * n
        for k, i in enumerate(perm):
            out[i] = rm[k]
        return tuple(out)
    return None


def tensor(inputs: OpInputs | None, i: int) -> tuple[Dims, Dims] | None:
    """(dims, strides) of input ``i`` when it is a recorded tensor with strides."""
    if inputs is None or inputs.strides is None or i >= len(inputs.dims) or i >= len(inputs.strides):
        return None
    d, s = inputs.dims[i], inputs.strides[i]
    if d is None or s is None or len(d) != len(s) or len(d) == 0:
        return None
    return tuple(int(x) for x in d), tuple(int(x) for x in s)


def concrete_int(inputs: OpInputs | None, i: int) -> int | None:
    if inputs is None or inputs.concrete is None or i >= len(inputs.concrete):
        return None
    text = inputs.concrete[i].strip()
    try:
        return int(text)
    except ValueError:
        return None


def nbytes(inputs: OpInputs | None, i: int) -> int | None:
    """Bytes of input ``i`` (numel x element size), None when unknown."""
    if inputs is None or i >= len(inputs.dims) or inputs.dims[i] is None:
        return None
    size = dtype_size(canonical_dtype(inputs.dtypes[i]) if i < len(inputs.dtypes) else None)
    if size is None:
        return None
    numel = 1
    for d in inputs.dims[i] or ():
        numel *= int(d)
    return int(numel * size)


# --------------------------------------------------------------------------- layout work in a trace

COPY_OPS = frozenset({"aten::copy_", "aten::contiguous", "aten::clone", "aten::to", "aten::_to_copy"})
#: ops that call a copy when their input's layout requires it; a copy inside them is theirs
WRAPPER_OPS = COPY_OPS | {"aten::reshape", "aten::flatten", "aten::unflatten", "aten::_reshape_alias",
                          "aten::reshape_as", "aten::view_as"}
CONV_OPS = frozenset({
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
    "aten::cudnn_convolution", "aten::miopen_convolution", "aten::mkldnn_convolution", "aten::_slow_conv2d_forward",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::cudnn_convolution_transpose",
    "aten::miopen_convolution_transpose", "aten::convolution_backward", "aten::_convolution_backward",
})
TRANSPOSE_OPS = frozenset({"aten::permute", "aten::transpose", "aten::t", "aten::swapaxes", "aten::swapdims",
                           "aten::movedim", "aten::numpy_T", "aten::mT", "aten::mH", "aten::adjoint"})

TRANSPOSE, MISMATCH, KERNELS = 0, 1, 2  # kinds of layout work


def copy_layouts(name: str, inputs: OpInputs | None) -> tuple[str, str] | None:
    """(source format, destination format) when copy op ``name`` on ``inputs`` reorders memory."""
    src = tensor(inputs, 1 if name == "aten::copy_" else 0)
    if src is None:
        return None
    if name == "aten::copy_":
        dst = tensor(inputs, 0)
    else:
        if name == "aten::contiguous":
            fmt = concrete_int(inputs, 1)
            fmt = CONTIGUOUS if fmt is None else fmt
        elif name == "aten::clone":
            fmt = concrete_int(inputs, 1)
        elif name in ("aten::to", "aten::_to_copy"):
            fmt = concrete_int(inputs, len(inputs.dims) - 1) if inputs is not None else None
            fmt = fmt if fmt in (CONTIGUOUS, CHANNELS_LAST, CHANNELS_LAST_3D) else None
        else:
            fmt = CONTIGUOUS  # reshape/flatten copy into a contiguous result
        if fmt in (None, PRESERVE):
            # preserve_format keeps a dense input's strides; a non-dense one comes out contiguous
            fmt = None if is_dense(*src) else CONTIGUOUS
        strides = target_strides(src[0], fmt) if fmt is not None else None
        dst = (src[0], strides) if strides is not None else None
    if dst is None or not is_transpose(src, dst):
        return None
    return format_name(*src), format_name(*dst)


def conv_formats(name: str, inputs: OpInputs | None) -> tuple[str, ...] | None:
    """Memory formats of a convolution's input and weight (and grad_output for backward) when they
    disagree (one contiguous, another channels_last); None when they agree or cannot be told."""
    idx = (0, 1, 2) if "backward" in name else (0, 1)
    fmts = []
    for i in idx:
        t = tensor(inputs, i)
        if t is not None and len(t[0]) in (4, 5):
            fmts.append(format_name(*t))
    clear = {f for f in fmts if f in ("contiguous", "channels_last")}
    return tuple(fmts) if len(clear) > 1 else None
