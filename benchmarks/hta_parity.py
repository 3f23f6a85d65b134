"""Record HTA's temporal breakdown for the corpus traces (needs HTA in a separate venv).

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install HolisticTraceAnalysis==0.5.0
    /tmp/hta/bin/python benchmarks/hta_parity.py ../shared/corpus/torch/gpu/*.json.gz \
        > tests/data/hta_0.5.0_temporal_breakdown.json

tests/test_hta_parity.py compares traceclass against the recorded numbers, once with HTA's
inclusion and rounding rules applied (must agree within 1 percentage point) and once exactly.
"""

import json
import logging
import os
import shutil
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

from hta.trace_analysis import TraceAnalysis  # noqa: E402

out = {}
for f in sys.argv[1:]:
    d = tempfile.mkdtemp()
    shutil.copy(f, os.path.join(d, os.path.basename(f)))
    try:
        ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
        out[os.path.basename(f)] = ta.get_temporal_breakdown(visualize=False).to_dict(orient="records")
    except Exception as e:  # HTA fails on several real traces; record how
        out[os.path.basename(f)] = "ERROR %s: %s" % (type(e).__name__, str(e)[:200])
    finally:
        shutil.rmtree(d, ignore_errors=True)
print(json.dumps(out, indent=1, default=str))
