"""Run a Python script or module under torch.profiler (``traceclass record --torch``).

Started by path as ``python _torch_child.py OUT.json script.py args...`` (or ``-m module
args...``), so it needs only the standard library and torch in the child's interpreter, not
traceclass itself. The trace is written when the program ends, also when it exits with an
error or calls ``sys.exit``. Everything the program runs is profiled, so keep recordings short.
"""

import os
import runpy
import sys


def main(argv: list) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: _torch_child.py OUT.json (script.py | -m module) [args...]\n")
        return 2
    out, rest = argv[0], argv[1:]
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError as exc:
        sys.stderr.write(f"traceclass record --torch: torch is not importable in {sys.executable} ({exc})\n")
        return 2
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    module = None
    if rest[0] == "-m" and len(rest) > 1:
        module, args = rest[1], rest[2:]
        sys.argv = [module] + args
    else:
        script, args = rest[0], rest[1:]
        sys.argv = [script] + args
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    prof = profile(activities=activities, record_shapes=True, with_stack=True)
    prof.start()
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    finally:
        prof.stop()
        prof.export_chrome_trace(out)
        sys.stderr.write(f"traceclass record --torch: wrote {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
