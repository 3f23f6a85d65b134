"""Run a Python program for ``traceclass record``: learn its exit status, optionally under torch.profiler.

py-spy exits with status 0 whatever the program it ran did, so ``record`` starts Python programs
through this wrapper, which runs them in its own interpreter and writes what happened to a
small JSON status file::

    python [interpreter flags] _torch_child.py STATUS.json TORCH_OUT.json|- (script.py | -m module | -c code) [args...]

``TORCH_OUT.json`` (``traceclass record --torch``) runs the program under torch.profiler and
writes the trace there when it ends, also when it fails or calls ``sys.exit``; ``-`` runs it
plainly. The status file holds ``{"ran": true, "exit": N}`` (N as the shell would see it: 0,
the ``sys.exit`` code, 1 for an uncaught exception, 130 for Ctrl-C) plus ``exception`` (its
type name) and ``torch_trace``; or ``{"ran": false, "error": "..."}`` when the program could
not start (torch missing). A program that ends through ``os._exit`` or a signal writes none.

The program runs as ``python script.py`` would run it: ``sys.argv``, ``sys.path[0]`` (the
script's directory; the current directory for ``-m`` and ``-c``), ``__name__ == "__main__"``;
``SystemExit`` and ``KeyboardInterrupt`` are re-raised; another uncaught exception is printed by
``sys.excepthook`` without the wrapper's frames and the wrapper exits with 1, as Python would.
The wrapper's frames and runpy's are at the root of every sample py-spy takes of the main
thread: ``record`` removes them and leaves out the wrapper's own work (importing torch,
starting and stopping the profiler, writing files) as tool overhead.

Started by path, it needs only the standard library (and torch for ``--torch``) in the
program's interpreter, not traceclass itself.
"""

import json
import os
import runpy
import sys


def _exit_code(code):
    """The process status ``sys.exit(code)`` gives."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    return 1  # sys.exit("message"): Python prints it and exits with 1


def _write_status(path, status):
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(status, fh)
    except OSError as exc:
        sys.stderr.write(f"traceclass record: cannot write the exit status to {path} ({exc})\n")


def main(argv):
    if len(argv) < 3 or argv[2] in ("-m", "-c") and len(argv) < 4:
        sys.stderr.write("usage: _torch_child.py STATUS.json TORCH_OUT.json|- (script.py | -m module | -c code) "
                         "[args...]\n")
        return 2
    status_path, out, rest = argv[0], argv[1], argv[2:]
    prof = None
    if out != "-":
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile
        except ImportError as exc:
            error = f"torch is not importable in {sys.executable} ({exc})"
            sys.stderr.write(f"traceclass record --torch: {error}\n")
            _write_status(status_path, {"ran": False, "error": error})
            return 2
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        prof = profile(activities=activities, record_shapes=True, with_stack=True)
    mode, target, args = "script", rest[0], rest[1:]
    if rest[0] in ("-m", "-c"):
        mode, target, args = rest[0], rest[1], rest[2:]
    # sys.path[0] is this wrapper's directory now: make it what python would have put there
    if mode == "script":
        sys.argv = [target] + args
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    else:
        sys.argv = [mode] + args  # runpy sets argv[0] to the module's file for -m
        sys.path[0] = os.getcwd()
    status = {"ran": True}
    failed = None
    if prof is not None:
        prof.start()
    try:
        if mode == "-m":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif mode == "-c":
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        status["exit"] = _exit_code(exc.code)
        raise
    except KeyboardInterrupt:
        status["exit"], status["exception"] = 130, "KeyboardInterrupt"
        raise
    except BaseException as exc:
        status["exit"], status["exception"] = 1, type(exc).__name__
        failed = exc
    else:
        status["exit"] = 0
    finally:
        if prof is not None:
            try:
                prof.stop()
                prof.export_chrome_trace(out)
                status["torch_trace"] = out
                sys.stderr.write(f"traceclass record --torch: wrote {out}\n")
            except Exception as exc:  # noqa: BLE001 - report, keep the program's own outcome
                sys.stderr.write(f"traceclass record --torch: no trace written ({type(exc).__name__}: {exc})\n")
        _write_status(status_path, status)
    if failed is not None:
        # Python's own report, without the wrapper's and runpy's frames; the same exit status
        tb = _program_traceback(failed.__traceback__)
        sys.excepthook(type(failed), failed.with_traceback(tb), tb)
        return 1
    return 0


def _program_traceback(tb):
    """The traceback from the program's first frame on (the wrapper's and runpy's dropped)."""
    here = os.path.abspath(__file__)
    while tb is not None and tb.tb_next is not None:
        name = tb.tb_frame.f_code.co_filename
        if os.path.abspath(name) != here and os.path.basename(name) not in ("runpy.py", "<frozen runpy>"):
            break
        tb = tb.tb_next
    return tb


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
