"""SyncEvents: the blocking calls of chosen events, found by binary search."""

from __future__ import annotations

import numpy as np

from traceclass.facts.syncs import SyncEvents
from traceclass.model.strings import StringTable


def _events() -> SyncEvents:
    strings = StringTable(["cudaStreamSynchronize", "cudaMemcpyAsync", "cudaDeviceSynchronize"])
    z = np.zeros(5, np.int64)
    # calls are stored event by event: event 0 has two calls, 1 one, 2 none, 3 three, 4 one
    call_event = np.array([0, 0, 1, 3, 3, 3, 4])
    call_name = np.array([0, 1, 0, 2, 2, 1, 0])
    return SyncEvents(z, z, z, z, z, z, z, z, call_event, call_name, strings)


def test_call_counts_of_some_events() -> None:
    ev = _events()
    assert ev.call_counts(np.array([3, 0, 0])) == {"cudaDeviceSynchronize": 2, "cudaMemcpyAsync": 2,
                                                   "cudaStreamSynchronize": 1}
    assert list(ev.call_counts(np.array([3, 0]))) == ["cudaMemcpyAsync", "cudaDeviceSynchronize",
                                                      "cudaStreamSynchronize"]  # ties by name code
    assert ev.call_counts(np.array([2])) == {}
    assert ev.call_counts(np.zeros(0, np.int64)) == {}


def test_calls_of_one_event_in_order_each_once() -> None:
    ev = _events()
    assert ev.calls(3) == ("cudaDeviceSynchronize", "cudaMemcpyAsync")
    assert ev.calls(0) == ("cudaStreamSynchronize", "cudaMemcpyAsync")
    assert ev.calls(2) == ()
