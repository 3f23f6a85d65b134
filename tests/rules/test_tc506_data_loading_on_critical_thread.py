"""TC506 data-loading-on-critical-thread: decoding in the loop vs waiting for DataLoader workers."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import BOOT, collapsed, source
from traceclass.ingest import load

APP = source({10: "total += step()", 20: "img = Image.open(self.paths[i]).convert('RGB')", 40: "for x, y in loader:",
              50: "main()"})
MAIN = "thread (100): MainThread;<module> (app.py:50)"
NEXT = ("train (app.py:40);_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:631);"
        "_SingleProcessDataLoaderIter._next_data (torch/utils/data/dataloader.py:675)")
WORKERS = ("train (app.py:40);_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:631);"
           "_MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py:1329);"
           "_MultiProcessingDataLoaderIter._get_data (torch/utils/data/dataloader.py:1295);"
           "_MultiProcessingDataLoaderIter._try_get_data (torch/utils/data/dataloader.py:1133);"
           "Queue.get (multiprocessing/queues.py:113);Connection.poll (multiprocessing/connection.py:257);"
           "Connection._poll (multiprocessing/connection.py:440);wait (multiprocessing/connection.py:948);"
           "PollSelector.select (selectors.py:415)")


def test_decoding_in_the_loop(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};train (app.py:10)", 55),
        (f"{MAIN};{NEXT};_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:51);Images.__getitem__ (app.py:20)",
         25),
        (f"{MAIN};{NEXT};_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:51);default_collate "
         "(torch/utils/data/_utils/collate.py:277)", 20),
    ], {"app.py": APP})
    decode, loop = findings_for(t, "TC506")
    assert decode.location == "Images.__getitem__ (app.py)" and decode.values["value"] == 25
    assert decode.values["pct_of_run"] == 25.0 and decode.recoverable_ns == 250_000_000
    assert decode.values["waiting_ns"] == 0 and decode.values["work_ns"] == 250_000_000
    assert "num_workers > 0" in decode.fix
    assert loop.location == "train (app.py)" and loop.values["value"] == 20
    assert loop.evidence[0].source == "app.py:40"
    assert "(mostly in default_collate (torch/utils/data/_utils/collate.py:277))" in loop.message


def test_waiting_for_workers(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};train (app.py:10)", 70),
        (f"{MAIN};{WORKERS}", 30),
        (f"thread (101): pin_memory;{BOOT};_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:52)", 100),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC506")
    assert f.location == "train (app.py)" and f.values["value"] == 30  # the pin-memory thread is not critical
    assert f.values["waiting_ns"] == 300_000_000 and f.values["work_ns"] == 0
    assert "0 ns (0 samples) decoding/transforming on this thread, 300 ms (30 samples) waiting for workers" in f.message
    assert "prefetch_factor" in f.fix


def test_a_little_data_loading_is_silent(tmp_path):
    t = collapsed(tmp_path, [(f"{MAIN};train (app.py:10)", 96), (f"{MAIN};{WORKERS}", 4)], {"app.py": APP})
    assert findings_for(t, "TC506") == []


def test_corpus_workloads_do_not_load_data():
    for name in ("cpu_lock.idle_threads.raw.txt", "torch_train.default.raw.txt", "sleep_io.idle.raw.txt"):
        assert findings_for(load(corpus("pyspy", name)), "TC506") == []


def test_dataloader_worker_processes_are_not_critical(tmp_path):
    parent = 'process 10:"python app.py";thread (10): MainThread;<module> (app.py:50)'
    worker = ('process 10:"python app.py";process 11:"";thread (11): MainThread;<module> (<string>:1);'
              "spawn_main (multiprocessing/spawn.py:120);_main (multiprocessing/spawn.py:133);"
              "BaseProcess._bootstrap (multiprocessing/process.py:314);BaseProcess.run (multiprocessing/process.py:108);"
              "_worker_loop (torch/utils/data/_utils/worker.py:308);"
              "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:51)")
    t = collapsed(tmp_path, [
        (f"{parent};train (app.py:10)", 60),
        (f"{parent};{WORKERS}", 40),
        (f"{worker};Images.__getitem__ (app.py:20)", 90),
        (f"{worker};Images.__getitem__ (app.py:20);Image.open (PIL/Image.py:3200);_open_core (PIL/Image.py:3300)", 10),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC506")  # the worker's decoding is what workers are for
    assert f.location == "train (app.py)" and f.values["waiting_ns"] == 400_000_000
    assert f.values["pct_of_run"] == 40.0  # of the parent's 100 samples, not of both processes
    hot, loop = findings_for(t, "TC501")  # the worker's hot line is worth knowing, at no run time of its own
    assert loop.location == "train (app.py:10)" and loop.values["self_pct"] == 100.0  # the queue wait is no CPU
    assert hot.location == "Images.__getitem__ (app.py:20)" and hot.values["self_pct"] == 90.0
    assert hot.values["kind"] == "data" and hot.recoverable_ns == 0 and "Pillow-SIMD" in hot.fix
