"""Long fuzz campaign: the mutations of tests/fuzz at length, with outcome totals, peak RSS
and time percentiles.

    .venv/bin/python benchmarks/fuzz_campaign.py [--minutes 5] [--seed 1] [--timeout 60]

Each round takes one seed (every format traceclass reads: Kineto JSON and .json.gz, nsys
SQLite, py-spy speedscope and collapsed stacks, a Chrome trace, a saved JSON report and a
baseline), mutates it with ``tests/fuzz/fuzz_mutate.py`` and runs the commands of
``tests/fuzz/fuzz_contract.py`` on it (``analyze`` and ``export`` for traces, ``diff`` for
reports, ``check`` for baselines), each in a forked child of a warm parent: the child's
peak RSS comes from ``wait4`` and its time from the parent's clock. A few hostile inputs
that random mutation rarely reaches (gzip bombs, a NUL-filled sparse file, a 100,000-frame
stack, a 10 MB name) run first, once each. A run breaks the contract when it exits other
than 0/1/2, prints a traceback or an "internal error", prints more than one line when it
exits 2, changes an input or leaves a file beside it; those are listed at the end.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from fuzz_contract import check, commands  # noqa: E402
from fuzz_mutate import make_input  # noqa: E402
from fuzz_seeds import KINDS, build_seeds, kineto_doc  # noqa: E402


def _bomb(path: Path, head: bytes, total: int, fill: bytes) -> None:
    """A multi-member gzip stream: ``head``, then 64 MiB members of ``fill`` up to ``total``
    bytes inside (~1000:1; one member is compressed once and repeated)."""
    block = gzip.compress(fill * ((64 << 20) // len(fill)), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, mtime=0))
        for _ in range(total // (64 << 20)):
            f.write(block)


def hostile_inputs(folder: Path) -> list[tuple[str, Path]]:
    """(label, path) of inputs built on purpose, each a case of issue 15."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    p = folder / "bomb.json.gz"  # 4 MB of gzip -> 4 GiB of JSON whitespace
    _bomb(p, b'{"traceEvents": [', 4 << 30, b" ")
    out.append(("gzip bomb, JSON (4 GiB inside)", p))
    p = folder / "bomb.raw.txt.gz"
    _bomb(p, b"main;work 1\n", 2 << 30, b"a;")
    out.append(("gzip bomb, collapsed (2 GiB inside)", p))
    p = folder / "sparse.json"  # '[' then 2.2 GB of NUL bytes, sparse on disk
    with open(p, "wb") as f:
        f.write(b"[")
        f.truncate(2_200_000_000)
    out.append(("sparse file, '[' + 2.2 GB NUL", p))
    p = folder / "deep.raw.txt"
    p.write_text(";".join(f"f{i} (m.py:{i})" for i in range(100_000)) + " 5\nmain (m.py:1);work (m.py:2) 3\n")
    out.append(("collapsed stack of 100,000 frames", p))
    doc = kineto_doc()
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel":
            ev["name"] = "k" * 10_000_000
            break
    p = folder / "longname.json"
    p.write_text(json.dumps(doc))
    out.append(("Kineto kernel name of 10 MB", p))
    return out


def _run_forked(argv, inputs, fmt, output, timeout: int) -> tuple[str, float, int, str]:
    """(outcome class, seconds, peak RSS KiB, problem or "") of one command in a forked child."""
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        signal.alarm(timeout)
        try:
            got = check(argv, inputs, fmt, output)
            msg = json.dumps({"kind": got.kind, "problem": ""})
        except AssertionError as exc:
            msg = json.dumps({"kind": "CONTRACT BROKEN", "problem": " ".join(str(exc).split())[:300]})
        except BaseException as exc:  # noqa: BLE001
            msg = json.dumps({"kind": "CONTRACT BROKEN", "problem": f"{type(exc).__name__}: {exc}"[:300]})
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    secs = time.perf_counter() - t0
    if not data:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        kind = "TIMEOUT" if sig == signal.SIGALRM else f"CHILD DIED (signal {sig})"
        return kind, secs, usage.ru_maxrss, " ".join(argv)
    got = json.loads(data)
    return got["kind"], secs, usage.ru_maxrss, got["problem"] and f"{' '.join(argv)}: {got['problem']}"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))] if s else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per command before it counts as hung")
    ap.add_argument("--no-hostile", action="store_true", help="skip the built hostile inputs")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="traceclass-fuzz-"))
    try:
        seeds = build_seeds(tmp / "seeds")
        import traceclass.cli.analyze  # noqa: F401  (warm the parent: children start at once)
        import traceclass.compare.diff  # noqa: F401
        import traceclass.export.speedscope  # noqa: F401

        outcomes: collections.Counter[str] = collections.Counter()
        times: list[float] = []
        rss: list[int] = []
        broken: list[str] = []
        out_dir = tmp / "out"
        out_dir.mkdir()
        if not args.no_hostile:
            print("hostile inputs (one run each):")
            for label, path in hostile_inputs(tmp / "hostile"):
                argv = ["analyze", str(path), "--format", "json", "-o", str(out_dir / "r.json")]
                kind, secs, peak, problem = _run_forked(argv, [path], "json", out_dir / "r.json", args.timeout)
                print(f"  {label:40s} {kind:34s} {secs:6.2f} s  peak RSS {peak / 1024:7.1f} MiB")
                if problem:
                    broken.append(problem)
                path.unlink()
        rng = random.Random(args.seed)
        names = sorted(KINDS)
        deadline = time.monotonic() + args.minutes * 60
        inputs = 0
        while time.monotonic() < deadline:
            name = names[inputs % len(names)]
            folder = tmp / "in"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            path = make_input(rng, seeds[name], folder)
            inputs += 1
            for argv, ins, fmt, output in commands(KINDS[name], path, seeds, out_dir):
                kind, secs, peak, problem = _run_forked(argv, ins, fmt, output, args.timeout)
                outcomes[f"{argv[0]:8s} {kind}"] += 1
                times.append(secs)
                rss.append(peak)
                if problem:
                    broken.append(problem)
        runs = sum(outcomes.values())
        print(f"\nmutated inputs tried: {inputs} (seed {args.seed}, {args.minutes:g} min); command runs: {runs}")
        print("outcomes by class:")
        for k, v in sorted(outcomes.items()):
            print(f"  {k:50s} {v:6d}")
        print("time per run (s):    p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}".format(
            _pct(times, 50), _pct(times, 90), _pct(times, 99), max(times, default=float("nan"))))
        print("peak RSS per run (MiB, a forked child of a ~{:.0f} MiB parent): p50 {:.1f}  p90 {:.1f}  p99 {:.1f}  max {:.1f}".format(
            __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss / 1024,
            _pct(rss, 50) / 1024, _pct(rss, 90) / 1024, _pct(rss, 99) / 1024, max(rss, default=0) / 1024))
        print(f"contract broken: {len(broken)}")
        for b in broken[:20]:
            print(f"  {b}")
        return 1 if broken else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
