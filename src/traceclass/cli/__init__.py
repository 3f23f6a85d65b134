"""Command-line interface. The only place that prints to the terminal or exits.

Subcommands are modules of this package that define ``COMMAND`` (its name), ``HELP`` (one
line) and ``register(parser)`` which adds arguments and sets ``func(args) -> int``. They are
discovered, so adding a command touches no central table.

Exit codes: 0 success; 1 a gate failed (``check``, or ``--fail-on``); 2 bad input, bad
configuration or a missing external tool; 130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import pkgutil
import sys
from typing import NoReturn, Sequence

from traceclass import __version__
from traceclass.errors import TraceclassError

_ORDER = ("analyze", "rules", "explain", "export", "record", "diff", "baseline", "check")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="traceclass",
        description=(
            "Turn a profiling session (torch.profiler JSON, Nsight Systems SQLite, py-spy) "
            "into a bottleneck verdict: where the time goes, what bounds it, what to fix first."
        ),
    )
    parser.add_argument("--version", action="version", version=f"traceclass {__version__}")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = []
    names = [i.name for i in pkgutil.iter_modules(__path__) if not i.name.startswith("_")]
    # import only the command being run (``compare`` and friends cost ~0.5 s to import);
    # help and errors need them all
    wanted = [a for a in (argv or []) if not a.startswith("-")][:1]
    if wanted and wanted[0] in names and not {"-h", "--help"} & set(argv or []):
        names = wanted
    for name in names:
        mod = importlib.import_module(f"{__name__}.{name}")
        if hasattr(mod, "COMMAND") and hasattr(mod, "register"):
            modules.append(mod)
    modules.sort(key=lambda m: (_ORDER.index(m.COMMAND) if m.COMMAND in _ORDER else 99, m.COMMAND))
    for mod in modules:
        p = sub.add_parser(mod.COMMAND, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.register(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        from traceclass.cli._io import dash_output, refuse_overwriting_inputs
        from traceclass.heap import avoid_compaction_stalls, steady_heap_thresholds

        avoid_compaction_stalls()  # this process is ours: numpy's huge-page requests stall here
        steady_heap_thresholds()  # and its allocator: streamed blocks fault pages in twice otherwise

        dash_output(args)
        refuse_overwriting_inputs(args)
        return int(args.func(args) or 0)
    except TraceclassError as exc:
        print(f"traceclass: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("traceclass: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, never a traceback
        if getattr(args, "debug", False):
            raise
        names = [getattr(args, k, None) for k in ("trace", "input", "baseline", "candidate")]
        names = [x for n in names for x in (n if isinstance(n, list) else [n])]
        where = " vs ".join(n for n in names if isinstance(n, str) and n)
        where = f"{where}: " if where else ""
        print(
            f"traceclass: {where}internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            "rerun with --debug for details",
            file=sys.stderr,
        )
        return 2


def entry() -> NoReturn:
    """The ``traceclass`` command: :func:`main`, then exit without tearing the interpreter
    down. Freeing every module and object one by one took 14-46 ms after a small trace's
    whole analysis of 0.3-0.5 s (alternating runs on the smallest bundled sample and the corpus
    V100 trace); the operating system reclaims the memory at once. Output is flushed and exit
    handlers (temporary folders, pools) run first; with other threads still running it exits
    the usual way, which waits for them."""
    code = main()
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass  # a reader that went away: nothing left to say to it
    except OSError as exc:  # a full disk under a redirected stdout: as Python's own exit would
        print(f"traceclass: cannot write the output ({exc.strerror})", file=sys.stderr)
        code = code or 2
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython
        sys.exit(code)
    run_exit_handlers()
    os._exit(code)
