"""Serialization on the critical thread: encoding or decoding JSON, pickle, YAML, checkpoints in the loop.

What it finds
    In a sampled CPU profile, the time the critical thread of each process spends serializing:
    any stack through ``json``, ``pickle``, ``copyreg``, ``marshal``, ``yaml``, ``msgpack``,
    ``msgspec``, ``orjson``, ``cloudpickle``, ``dill``, ``protobuf``, ``safetensors`` or
    ``torch/serialization.py`` (``torch.save``/``torch.load``), and leaf lines that call
    ``json.dumps``/``pickle.loads``/``torch.save``... (C-accelerated codecs have no frame of
    their own). Kinds from :mod:`traceclass.analysis.frame_kinds`; the critical thread is the
    main thread unless it mostly hands off to another thread (see
    :mod:`traceclass.analysis.cpu_sites` and TC503).

    Grouped by the program's function that serializes (innermost frame outside the standard
    library and installed packages), one finding each; the serializer named is the outermost
    serialization module under that function (``json``, ``pickle``, ``torch.serialization``).
    Data decoding (images, tokenizers, DataLoader) is TC506.

Why it matters
    Serialization is pure CPU work on the critical path: logging metrics as JSON every step,
    pickling objects to send to workers or over the network, saving checkpoints synchronously.
    The standard library's codecs are far from the fastest, and the work can usually move off
    the critical thread.

How to fix
    JSON: ``orjson`` or ``msgspec.json`` (several times faster than ``json``, bytes out), encode
    once per batch rather than per item. pickle: ``protocol=pickle.HIGHEST_PROTOCOL`` (5, with
    out-of-band buffers), do not pickle large arrays or tensors to other processes (shared
    memory, ``torch.multiprocessing`` shares tensors). Checkpoints: save less often and in the
    background (copy the state to CPU, write it in a thread, or
    ``torch.distributed.checkpoint.async_save``); load with ``safetensors`` (memory-mapped, no
    unpickling). YAML: ``yaml.CSafeLoader``/``CSafeDumper`` (libyaml), parse once and cache.

Example
    ``tests/data/pyspy/loader_json.py``, a training loop that encodes its whole metrics history
    with ``json.dumps`` every step: ``main (loader_json.py:25)`` in ``json/encoder.py`` for
    24.1 % of the main thread's samples (206 of 856); the fix is to write only the new values,
    with ``orjson``.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC504``).

    Severity: the time against the critical thread's sampled time (10 % / 3 % steps).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC504", name="serialization-on-critical-thread", family=Family.CPU,
                summary="the critical thread encodes/decodes JSON, pickle, YAML or checkpoints (sampled profiles)",
                needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_share_pct', 5.0, '%',
                              "the share of the run at which TensorBoard's profiler starts recommending a fix for "
                              'DataLoader time (its "> 5 % of the step" rule); the same bar for other host work on the '
                              'critical path. None of the shared corpus workloads serialize (0 % in every file); the '
                              'recording in ``tests/data/pyspy`` 24 %.'),
                    Threshold('min_time_ms', 200.0, 'ms',
                              "20 samples at py-spy's default 100 Hz (applies when the profile's time is known)."),
                    Threshold('min_samples_count', 20, 'count',
                              'fewer samples give a share with more than ~22 % relative error (1/sqrt(n)); the floor '
                              '``cpu_profile`` uses to infer idle sampling. Applies to sampled profiles.'),
                ))

#: files of serialization modules (the frame_kinds stack rule's list)
LIBRARY = re.compile(
    r"(^|/)(json|msgspec|orjson|ujson|yaml|ruamel|msgpack|cloudpickle|dill|simplejson|safetensors|protobuf)/"
    r"|(^|/)google/protobuf/|(^|/)(pickle|copyreg|marshal|pickletools|_compat_pickle)\.py$|(^|/)torch/serialization\.py$")
#: calls on a leaf line (C-accelerated codecs have no frame)
CALL = re.compile(r"\b(json|pickle|cloudpickle|dill|msgspec|orjson|ujson|yaml|msgpack|marshal|torch)\."
                  r"(json\.|msgpack\.)?(dumps?|loads?|encode|decode|safe_load|safe_dump|packb|unpackb|save|load)\(")
FIXES = {
    "json": "JSON: use orjson or msgspec.json (several times faster than json, bytes out), encode once per batch "
            "instead of per item, and log only what changed.",
    "pickle": "pickle: protocol=pickle.HIGHEST_PROTOCOL (5, out-of-band buffers); do not pickle large arrays or "
              "tensors to other processes (shared memory; torch.multiprocessing shares tensors).",
    "torch": "Checkpoints: save less often and in the background (copy the state to CPU and write it in a thread, "
             "or torch.distributed.checkpoint.async_save); load with safetensors (memory-mapped, no unpickling).",
    "yaml": "YAML: use yaml.CSafeLoader / CSafeDumper (libyaml), parse once and cache the result.",
    "other": "Move the encoding off the critical thread (a writer thread or process), encode less often or less "
             "data, and use a compiled codec (orjson, msgspec, libyaml).",
}
_FAMILY = {"json": "json", "simplejson": "json", "ujson": "json", "orjson": "json", "msgspec": "json",
           "pickle": "pickle", "copyreg": "pickle", "cloudpickle": "pickle", "dill": "pickle",
           "_compat_pickle": "pickle", "pickletools": "pickle", "marshal": "pickle", "torch": "torch",
           "safetensors": "torch", "yaml": "yaml", "ruamel": "yaml"}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    for sel, value, run, share in cpuf.critical_sites(cs, ("serialization",), th["min_share_pct"],
                                                      th["min_time_ms"], th["min_samples_count"]):
        yield _finding(cs, th, sel, value, run, share)


def _serializer(cs: cpus.CpuSites, sel: np.ndarray) -> str:
    """The serialization module most of ``sel`` runs in: ``json``, ``torch.serialization``..."""
    outer = cpuf.outermost_below_user(cs, sel, cpuf.file_mask(cs, LIBRARY))
    t = cpuf.tally(outer, cs.value[sel], cs.count[sel])
    for k in t.keys.tolist():
        if k >= 0:
            return cpuf.module_name(cs.file(k))
        break
    for f in cpuf.tally(cs.leaf[sel], cs.value[sel], cs.count[sel]).keys.tolist():
        m = CALL.search(cs.source_text(f))
        if m:
            return m.group(1)
    return ""


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], sel: np.ndarray, value: int, run: int,
             share: float) -> Finding:
    lines = cpuf.lines(cs, sel, 20)
    f0, g0, _, _ = lines[0]
    site = int(cpuf.site_frames(cs, sel[:1])[0])
    function, file = cpuf.enclosing(cs.function(site)), cs.file(site)
    codec = _serializer(cs, sel)
    family = _FAMILY.get(codec.split(".")[0], "other")
    where = cpuf.where_phrase(cs, sel, lines)
    message = ("Serialization" + (f" with {codec}" if codec else "")
               + f" on {cpuf.critical_phrase(cs.groups[g0])}: {cs.amount(value)} in {function} at "
               f"{cs.location(f0)}{where}, {share:.1f}% of its {cs.amount(run)} (threshold "
               f"{th['min_share_pct']:g}%)" + cpuf.timed_note(cs))
    evidence = tuple(
        Evidence(what=f"{cs.groups[g].label} serializes at {cs.frame_label(f)}", duration_ns=cs.ns(v),
                 count=cs.samples(v), source=cs.location(f),
                 values={"value": v, "pct_of_thread": round(cpuf.pct(v, cs.groups[g].value), 2)})
        for f, g, v, _ in lines
    )
    ns = cs.ns(value)
    return Finding(
        severity=severity_for(value, run), message=message, recoverable_ns=ns or 0,
        estimate=("upper bound: the critical thread's time serializing here; moving it to another thread removes "
                  "it from the critical path if that thread keeps up, a faster codec removes part of it. Time: "
                  + cs.time_basis + ("" if ns is not None else "; no time, so recoverable_ns is 0")),
        fix=FIXES[family], location=f"{function} ({file})" if file else function, evidence=evidence,
        values={"function": function, "file": file, "line": cs.line(f0), "serializer": codec, "time_ns": ns,
                "value": value, "unit": cs.unit, "samples_count": cs.samples(value), "pct_of_run": round(share, 2),
                "threshold_pct": th["min_share_pct"], "time_basis": cs.time_basis},
    )
