"""Comparing two runs: ``traceclass diff``, ``baseline save`` and ``check``.

* :mod:`.run` — what a comparison reads from a report (or its JSON form);
* :mod:`.noise` — the statistic deciding "beyond noise" (Mann-Whitney U / Welch, 95%);
* :mod:`.match` — pairing stages, op groups, kernel families, findings; setup differences;
* :mod:`.diff` — the :class:`~traceclass.compare.diff.DiffReport` and its JSON form;
* :mod:`.gate` — the regression gate of ``check``; :mod:`.baseline` — baseline files.

Nothing here prints, reads traces or exits; the CLI does. Renderers receive the plain dicts.
"""
