"""Bound mix and the ten largest "at stake" op rows of each corpus GPU trace (issue 11 figures).

    .venv/bin/python benchmarks/roofline_stakes.py ../shared/corpus/torch/gpu [FILE.json.gz ...]

On code with achievable stakes it lists ``stake_ns`` with its basis and the datasheet gap next
to it; on older code (no ``stake_ns``) the datasheet gap is what "at stake" meant, and is listed.
It also counts op rows whose achieved rate is above the roof they are judged against.
"""
import sys, pathlib
from traceclass.ingest import load
from traceclass.engine import run
from traceclass.config import load_config
from traceclass.render.verdict import bound_mix
from traceclass import units

corpus = pathlib.Path(sys.argv[1])
names = sys.argv[2:] or sorted(p.name for p in corpus.glob("*.json.gz"))
for n in names:
    tr = load(str(corpus / n))
    a, rep = run(tr, load_config())
    mix = bound_mix(rep)
    print(f"## {n}")
    print("bound mix: " + ", ".join(f"{k} {v:.1f}%" for k, v in mix.items()))
    new = hasattr(rep.ops[0], "stake_ns") if rep.ops else False
    key = (lambda o: o.stake_ns or 0) if new else (lambda o: o.gap_ns or 0)
    rows = sorted([o for o in rep.ops if key(o) > 0], key=lambda o: -key(o))[:10]
    for o in rows:
        basis = o.stake_basis if new else "datasheet roof (gap to lower bound)"
        print(f"  {units.duration(key(o)):>8}  {o.name} {o.shapes[:55]} [{o.precision} {o.unit}, {o.bound}, "
              f"{o.pct_of_roof:.0f}% of roof]  basis: {basis}; datasheet gap {units.duration(o.gap_ns or 0)}")
    over = [o for o in rep.ops if (o.pct_of_roof or 0) > 100]
    print(f"  op rows with achieved > attainable: {len(over)}")
