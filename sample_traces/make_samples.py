"""Record the bundled sample traces of traceclass with torch.profiler on CPU.

Usage (from the repository root, with the pinned CPU torch of the project, ``torch==2.13.0``)::

    .venv/bin/python sample_traces/make_samples.py            # all traces
    .venv/bin/python sample_traces/make_samples.py dataloader # only some (names below)

Every trace is recorded the same way::

    torch.profiler.profile(activities=[CPU], record_shapes=True, with_stack=True,
                           profile_memory=True, with_modules=True,
                           schedule=schedule(wait=1, warmup=1, active=N, repeat=1))

with ``prof.step()`` after each training/inference step (``N`` = 3; 6 for the diff pair),
exported with ``prof.export_chrome_trace`` to a temporary ``.json``, scrubbed of identity
data (see :func:`scrub`), and written gzip-compressed (``mtime=0``, no file name in the gzip
header) next to this script as ``<name>.json.gz``.

Determinism: fixed seeds (``torch.manual_seed(0)``, seeded DataLoader generator), fixed
sizes, ``torch.set_num_threads(1)`` (one intra-op thread: timings depend less on what else
runs on the machine, and the op structure does not depend on the core count). Op names,
shapes, strides and counts are reproducible; timestamps, durations, pids/tids, ``trace_id``
and the ``0x...`` object addresses inside some ``<built-in method ...>`` names are not.

Traces (name -> workload):

* ``transformer_block``: one pre-LN transformer block (LayerNorm, QKV linear, two
  ``scaled_dot_product_attention`` calls, one of them causal, MLP with GELU) trained with AdamW.
  The input arrives features-first and is made token-major with ``permute(0, 2, 1).contiguous()``
  right before the input-projection matmul (an implicit transpose), and a small conv stage
  applies a ``channels_last`` conv weight to an NCHW image (layout mismatch).
* ``tiny_ops_loop``: a Python loop of 200 tiny element-wise ops per step (100 x ``mul`` +
  100 x ``add`` on 16-element tensors) and one ``.item()`` per step.
* ``dataloader``: a small CNN trained from a ``DataLoader`` (``num_workers=0``) whose
  ``__getitem__`` decodes each sample in pure Python; ``next(iter)`` runs in ``stage:data``.
* ``diff_baseline`` / ``diff_candidate``: the same inference model and inputs; the baseline
  copies the 8 MiB ``[8, 512, 512]`` input with ``permute(0, 2, 1).contiguous()`` before a
  ``bmm``, the candidate passes the permuted view to ``bmm`` directly. The only op-level
  difference is that ``aten::contiguous -> aten::clone -> aten::copy_``.
"""

from __future__ import annotations

import argparse
import getpass
import gzip
import json
import os
import re
import socket
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPT_REL = "sample_traces/make_samples.py"
NUM_THREADS = 1
DATALOADER_WORKERS = 0  # --dataloader-workers


# --------------------------------------------------------------------------------------------
# recording, scrubbing, writing


def record(name: str, step_fn, active: int = 3, out_dir: Path = HERE) -> Path:
    """Run ``step_fn(i)`` for wait + warmup + active steps under the profiler; write the trace."""
    torch.manual_seed(0)
    sched = schedule(wait=1, warmup=1, active=active, repeat=1)
    exported: list[str] = []
    tmpdir = tempfile.mkdtemp(prefix="traceclass_samples_")

    def on_ready(prof) -> None:
        path = os.path.join(tmpdir, f"{name}.json")
        prof.export_chrome_trace(path)
        exported.append(path)

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        with_modules=True,
        schedule=sched,
        on_trace_ready=on_ready,
    ) as prof:
        for i in range(1 + 1 + active):
            step_fn(i)
            prof.step()
    if len(exported) != 1:
        raise RuntimeError(f"{name}: expected one exported trace, got {exported}")
    raw = Path(exported[0]).read_text(encoding="utf-8")
    os.remove(exported[0])
    os.rmdir(tmpdir)
    out_name = f"torch_cpu_{name}.json.gz"
    text, changes = scrub(raw, out_name)
    out = out_dir / out_name
    with open(out, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    print(f"{out_name}: {out.stat().st_size:,} bytes; scrubbed: {changes}")
    return out


def _path_prefixes() -> list[tuple[str, str]]:
    """Absolute path prefixes of this machine -> replacement (longest first)."""
    pairs = {str(REPO) + "/": "", str(Path.home()) + "/": "~/"}
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        pairs.setdefault(p.rstrip("/") + "/", "<python>/")
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def scrub(text: str, out_name: str) -> tuple[str, dict[str, int]]:
    """Remove identity data from an exported Kineto JSON text; return (text, what changed).

    Works on the text, so everything torch wrote stays byte-identical except:

    * top-level ``"host_name"`` -> ``"host"``;
    * top-level ``"traceName"`` (the temporary export path) -> ``"sample_traces/<out_name>"``;
    * absolute path prefixes of the recording machine in any string (``<repo>/`` -> ``""``,
      ``$HOME/`` -> ``"~/"``, the Python installation prefix -> ``"<python>/"``);
    * frames of this script, which torch names by the path relative to ``sys.path[0]``
      (``make_samples.py(LINE): fn``), -> ``sample_traces/make_samples.py(LINE): fn``.

    Then checks that neither the host name, the user name, the home directory nor the repository
    path is left anywhere in the text; raises if one is.
    """
    changes: dict[str, int] = {}

    def sub(pattern: str, repl: str, key: str, flags: int = 0) -> None:
        nonlocal text
        text, n = re.subn(pattern, repl, text, flags=flags)
        if n:
            changes[key] = changes.get(key, 0) + n

    sub(r'"host_name"\s*:\s*"[^"]*"', '"host_name": "host"', "host_name")
    sub(r'"traceName"\s*:\s*"[^"]*"', f'"traceName": "sample_traces/{out_name}"', "traceName")
    for prefix, repl in _path_prefixes():
        sub(re.escape(prefix), repl.replace("\\", r"\\"), f"path prefix {prefix!r}")
    # torch strips the sys.path[0] prefix from this script's frames: make them repo-relative
    sub(r'"make_samples\.py\(', f'"{SCRIPT_REL}(', "script frame names")

    leaks = []
    host, user, home = socket.gethostname(), getpass.getuser(), str(Path.home())
    for label, needle in (("repository path", str(REPO)), ("home directory", home + "/")):
        if needle in text:
            leaks.append(label)
    # short names ("vm", "root") occur inside ordinary words: look for them as whole strings
    # and as path components
    for label, value in (("host name", host), ("user name", user)):
        if re.search(r'"%s"|/%s/' % (re.escape(value), re.escape(value)), text):
            leaks.append(label)
    if leaks:
        raise RuntimeError(f"{out_name}: identity data left after scrubbing: {leaks}")
    json.loads(text)  # still valid JSON
    return text, changes


# --------------------------------------------------------------------------------------------
# a. transformer block


class TransformerBlock(nn.Module):
    """Pre-LN block: x + Attn(LN(x)), then x + MLP(LN(x)); attention heads are averaged over a
    bidirectional and a causal ``scaled_dot_product_attention`` call."""

    def __init__(self, d_in: int = 96, d: int = 128, heads: int = 4, mlp: int = 512) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(d_in, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, mlp)
        self.fc2 = nn.Linear(mlp, d)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        x = self.embed(x) + cond[:, None, :]
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        full = F.scaled_dot_product_attention(q, k, v)
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = (0.5 * (full + causal)).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ConvStem(nn.Module):
    """Image -> conditioning vector: conv (weight in channels_last) + global average pool."""

    def __init__(self, d: int = 128) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.fc = nn.Linear(32, d)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.conv(img)).mean(dim=(2, 3)))


def transformer_block_steps():
    torch.manual_seed(0)
    block = TransformerBlock()
    stem = ConvStem().to(memory_format=torch.channels_last)  # weights channels_last ...
    opt = torch.optim.AdamW(list(block.parameters()) + list(stem.parameters()), lr=1e-3)
    # features-first input [batch, features, tokens] (e.g. the output of a 1-D conv front end)
    raw = torch.randn(8, 96, 128)
    img = torch.randn(8, 3, 32, 32)  # ... applied to a plain NCHW (contiguous) image
    target = torch.randn(8, 128, 128)

    def step(i: int) -> None:
        with record_function("stage:preprocess"):
            feats = (raw - raw.mean(dim=2, keepdim=True)) / (raw.std(dim=2, keepdim=True) + 1e-5)
            x = feats.permute(0, 2, 1).contiguous()  # implicit transpose before the embed matmul
        with record_function("stage:conv"):
            cond = stem(img)
        with record_function("stage:forward"):
            y = block(x, cond)
            loss = F.mse_loss(y, target)
        with record_function("stage:backward"):
            loss.backward()
        with record_function("stage:optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    return step


# --------------------------------------------------------------------------------------------
# b. tiny-op storm + host sync


def tiny_ops_loop_steps():
    torch.manual_seed(0)
    model = nn.Linear(64, 16)
    batch = torch.randn(32, 64)
    decay = 0.9

    def step(i: int) -> None:
        with torch.no_grad():
            with record_function("stage:forward"):
                out = model(batch)
                v = out.mean(dim=0)  # 16 elements
            with record_function("stage:tiny_ops"):
                acc = torch.zeros(16)
                for _ in range(100):  # 100 x (mul + add) = 200 tiny element-wise ops
                    acc = acc * decay + v
            with record_function("stage:sync"):
                _ = acc.sum().item()  # host sync (on a GPU this would block the CPU)

    return step


# --------------------------------------------------------------------------------------------
# c. data loading


class EncodedImages(torch.utils.data.Dataset):
    """Samples are stored compressed and decoded in pure Python: a deliberately slow loader."""

    def __init__(self, n: int = 512, side: int = 40) -> None:
        g = torch.Generator().manual_seed(0)
        self.side = side
        self.blobs = [
            zlib.compress(torch.randint(0, 256, (3 * side * side,), generator=g, dtype=torch.uint8).numpy().tobytes())
            for _ in range(n)
        ]

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        data = zlib.decompress(self.blobs[i])
        # per-byte Python "colour transform": the slow part (no function call per element,
        # so the trace stays small)
        pixels = [((b * 7 + 3) % 256) / 255.0 for b in data]
        img = torch.tensor(pixels, dtype=torch.float32).view(3, self.side, self.side)
        return img, i % 10


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 10 * 10, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def dataloader_steps(num_workers: int = 0):
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    dl = torch.utils.data.DataLoader(
        EncodedImages(), batch_size=16, shuffle=True, num_workers=num_workers,
        generator=torch.Generator().manual_seed(0),
    )
    it = iter(dl)

    def step(i: int) -> None:
        with record_function("stage:data"):
            imgs, labels = next(it)
        with record_function("stage:forward"):
            loss = F.cross_entropy(model(imgs), labels)
        with record_function("stage:backward"):
            loss.backward()
        with record_function("stage:optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    return step


# --------------------------------------------------------------------------------------------
# d. diff pair


class SeqClassifier(nn.Module):
    """Channels-first sequence [B, C, L] -> per-position projection (bmm) -> GELU -> LN -> head."""

    def __init__(self, c: int = 512, d: int = 64, classes: int = 10, copy_input: bool = True) -> None:
        super().__init__()
        self.copy_input = copy_input
        self.w = nn.Parameter(torch.randn(c, d) / c**0.5)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, _ = x.shape
        xt = x.permute(0, 2, 1)  # [B, L, C] view
        if self.copy_input:
            xt = xt.contiguous()  # baseline: materialise the transpose (the copy the candidate drops)
        h = torch.bmm(xt, self.w.expand(b, c, self.w.shape[1]))
        h = self.ln(F.gelu(h))
        return self.head(h.mean(dim=1))


def diff_steps(copy_input: bool):
    torch.manual_seed(0)
    model = SeqClassifier(copy_input=copy_input).eval()
    x = torch.randn(8, 512, 512)

    def step(i: int) -> None:
        with torch.no_grad():
            with record_function("stage:forward"):
                logits = model(x)
            with record_function("stage:postprocess"):
                _ = logits.argmax(dim=1)

    return step


# --------------------------------------------------------------------------------------------
# summary


def summarize(path: Path) -> dict:
    """Facts for the README: steps (ms), op counts, total aten::copy_ time (ms)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        d = json.load(f)
    ev = d["traceEvents"]
    steps = sorted((e["name"], e["dur"] / 1e3) for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    copies = [e["dur"] for e in ops if e["name"] == "aten::copy_"]
    return {
        "events": len(ev),
        "cpu_ops": len(ops),
        "python_functions": sum(e.get("cat") == "python_function" for e in ev),
        "memory_events": sum(e.get("cat") == "cpu_instant_event" for e in ev),
        "step_ms": {n: round(t, 2) for n, t in steps},
        "copy_count": len(copies),
        "copy_ms": round(sum(copies) / 1e3, 3),
    }


TRACES = {
    "transformer_block": (transformer_block_steps, 3),
    "tiny_ops_loop": (tiny_ops_loop_steps, 3),
    "dataloader": (lambda: dataloader_steps(DATALOADER_WORKERS), 3),
    "diff_baseline": (lambda: diff_steps(copy_input=True), 6),
    "diff_candidate": (lambda: diff_steps(copy_input=False), 6),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"traces to record, from {', '.join(TRACES)} (default: all)")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: next to this script)")
    ap.add_argument("--dataloader-workers", type=int, default=0,
                    help="num_workers of the dataloader trace (the committed file uses 0)")
    args = ap.parse_args()
    global DATALOADER_WORKERS
    DATALOADER_WORKERS = args.dataloader_workers
    unknown = [n for n in args.names if n not in TRACES]
    if unknown:
        ap.error(f"unknown trace name(s) {unknown}; choose from {list(TRACES)}")
    torch.set_num_threads(NUM_THREADS)
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, {torch.get_num_threads()} thread(s), "
          f"{time.strftime('%Y-%m-%d')}")
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in args.names or list(TRACES):
        make, active = TRACES[name]
        path = record(name, make(), active=active, out_dir=args.out)
        results[name] = summarize(path)
        print(f"  {json.dumps(results[name])}")
    if "diff_baseline" in results and "diff_candidate" in results:
        print("\ndiff pair (per active step, ms; total aten::copy_ over all active steps, ms):")
        for name in ("diff_baseline", "diff_candidate"):
            r = results[name]
            print(f"  {name}: steps {list(r['step_ms'].values())}, "
                  f"aten::copy_ x{r['copy_count']} = {r['copy_ms']} ms")


if __name__ == "__main__":
    main()
