"""Many ranks: one trace per rank in, one cluster report out.

The work splits in two. The **map** step (:mod:`.summary`) runs the single-trace analysis on
one rank's file and keeps a compact, JSON-serialisable summary (per-step compute and
communication, the collective table, the clock anchor, the findings); it runs in local worker
processes or on Dask workers (:mod:`.engine`), so only summaries cross process boundaries and the
coordinator's memory does not grow with trace size. The **reduce** step reads the summaries:
rank identity (:mod:`.identity`), collective matching (:mod:`.match`), clock offsets
(:mod:`.clocks`), per-collective transfer/wait/bandwidth (:mod:`.collectives`), stragglers and
compute imbalance (:mod:`.stragglers`), the cluster rules (:mod:`.rules`) and the report
(:mod:`.report`).
"""
