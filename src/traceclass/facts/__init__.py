"""Facts: every shared computation over a :class:`~traceclass.model.Trace`, computed once, on demand.

:class:`Facts` holds one ``functools.cached_property`` per fact; rules (through
``rule.Context``) and the report read them and never recompute them. Where each fact is
computed:

========================  =====================================================
fact                      module
========================  =====================================================
``devices``, ``roof()``   :mod:`traceclass.analysis.devices`, :mod:`traceclass.facts.roof`
``gpu_family(_code)``     :mod:`traceclass.analysis.kernel_families`
``timelines``             :mod:`traceclass.analysis.gpu_timeline`
``occurrences``,          :mod:`traceclass.analysis.stages`
``stages``
``analysed``              :mod:`traceclass.facts.analysed` (the one analysed window)
``steps``, ``gpu_step``   :mod:`traceclass.facts.steps`
``gaps(device)``          :mod:`traceclass.facts.gaps`
``sync_events``           :mod:`traceclass.facts.syncs`
``host_view``             :mod:`traceclass.facts.host`
``idle_causes``           :mod:`traceclass.facts.idle_causes` (one cause per idle stretch)
``ops``                   :mod:`traceclass.analysis.ops`
``stage_roofline``        :mod:`traceclass.facts.stage_roofline`
``step_series``           :mod:`traceclass.facts.step_series`
``kernels``,              :mod:`traceclass.facts.kernels`
``kernel_families``
``memory``                :mod:`traceclass.facts.memory`
``cpu``, ``cpu_sites``    :mod:`traceclass.analysis.cpu_profile`, :mod:`traceclass.analysis.cpu_sites`
========================  =====================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceclass.facts.core import Facts, analyze

__all__ = ("Facts", "analyze")


def __getattr__(name: str) -> Any:
    # lazy: the report model imports the row types of facts/rows.py without the analyses
    if name in __all__:
        from traceclass.facts import core

        return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
