"""Name vocabularies shared by readers: kernel display names and annotation roles."""

from __future__ import annotations

import re

from traceclass.model.enums import AnnotationKind

_ANON = "(anonymous namespace)"

#: Characters of a name that classification and shortening look at. Real kernel names, long
#: templates included, stay far below; a hostile 10 MB name would otherwise be walked in full
#: by every pattern (seconds per pass).
NAME_SCAN_LIMIT = 1 << 16


def short_kernel_name(full: str, limit: int = 120) -> str:
    """Readable kernel name: no return type, template arguments or parameter list.

    ``void at::native::(anonymous namespace)::CatArrayBatchedCopy<...>(...)`` ->
    ``at::native::(anonymous namespace)::CatArrayBatchedCopy``. Names without C++ decoration
    (``nvjet_tst_128x64``, ``Memcpy HtoD (Pinned -> Device)``) come back unchanged.
    """
    s = full[:NAME_SCAN_LIMIT].strip()
    if s.startswith("Memcpy") or s.startswith("Memset"):
        return s if len(s) <= limit else s[: limit - 1] + "…"
    if s.startswith("void "):
        s = s[5:]
    out = []
    depth = 0
    i = 0
    n = len(s)
    while i < n:
        if s.startswith(_ANON, i) and depth == 0:
            out.append(_ANON)
            i += len(_ANON)
            continue
        c = s[i]
        if c == "<":
            if depth == 0 and s.startswith("<lambda", i):
                pass
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
            i += 1
            continue
        elif c == "(" and depth == 0:
            break
        if depth == 0:
            out.append(c)
        i += 1
    name = "".join(out).strip() or s
    # "std::enable_if<...>::type kernel" style return types leave a space-separated prefix;
    # the space inside "(anonymous namespace)" is not one
    protected = name.replace(_ANON, "\0")
    if " " in protected and "::" in protected.split(" ")[-1]:
        name = protected.split(" ")[-1].replace("\0", _ANON)
    if len(name) > limit:
        name = name[: limit - 1] + "…"
    return name


_STEP = re.compile(r"^ProfilerStep#\d+$")


def annotation_kind(name: str) -> AnnotationKind:
    """Role of a named range from its name (torch built-ins; everything else is USER)."""
    if _STEP.match(name):
        return AnnotationKind.STEP
    if name.startswith("enumerate(DataLoader)") or "DataLoader" in name.split("#")[0]:
        return AnnotationKind.DATALOADER
    if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
        return AnnotationKind.OPTIMIZER
    if name.startswith(("nccl:", "gloo:", "mpi:", "ucc:", "xccl:")) or name.startswith("c10d::"):
        return AnnotationKind.COMMUNICATION
    if name.startswith("nn.Module:"):
        return AnnotationKind.MODULE
    if name.startswith(("## Call CompiledFxGraph", "Torch-Compiled Region", "CompiledFunction")):
        return AnnotationKind.COMPILED
    if name.startswith(("PyTorch Profiler", "__cupti_profiler__")):
        return AnnotationKind.INTERNAL
    return AnnotationKind.USER


_STEP_NUMBER = re.compile(r"#(\d+)$")


def step_number(name: str) -> int | None:
    m = _STEP_NUMBER.search(name)
    return int(m.group(1)) if m else None
