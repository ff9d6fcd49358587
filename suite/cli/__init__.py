"""``suite`` command line, one module per subcommand (``validate.py``, ``config.py``, ``run.py``, ``status.py``,
``train.py``, ``propagate.py``, ``analyze.py``, ``report.py``, ``plan.py``, ``cost.py``, ``bench.py``,
``bench_check.py``, ``schemes.py``), each with ``add_arguments(parser)`` and ``run(args) -> int``, imported lazily so
that ``suite --help`` stays fast; ``checks.py``: shared value checks and the one-line user error; ``progress_lines.py``:
``suite train``'s output without a terminal. Parsing, printing and exit codes live here and nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import os
import re
import signal
import sys
import threading
from typing import Any

from suite.interrupt import forget_caught_interrupt

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("suite.cli.train", "train one ViT from a run config and write one run folder"),
    "validate": ("suite.cli.validate", "check an ablation file without running anything"),
    "run": ("suite.cli.run", "expand an ablation file into runs and execute them (resumes)"),
    "propagate": ("suite.cli.propagate", "measure signal propagation at init and over the first steps (to depth 1000)"),
    "status": ("suite.cli.status", "where a sweep stands: done / running / pending, throughput, ETA, errors"),
    "analyze": ("suite.cli.analyze", "turn a folder of runs into tables (md, tex, csv) and figures"),
    "report": ("suite.cli.report", "one self-contained HTML page of an analysed folder"),
    "plan": ("suite.cli.plan", "how many seeds each comparison needs, planned from the runs so far"),
    "bench": ("suite.cli.bench", "measure each scheme's step-time overhead against Pre-LN (A/B rounds)"),
    "bench-check": ("suite.cli.bench_check", "the CI gate: fail if LayerScale's overhead regressed"),
    "config": ("suite.cli.config", "print the fully resolved config of a run, or of an ablation's first run"),
    "cost": ("suite.cli.cost", "estimate an ablation's steps, FLOPs and device-hours before running it"),
    "schemes": ("suite.cli.schemes", "list the residual schemes and datasets"),
}


class Parser(argparse.ArgumentParser):
    """argparse with the suite's rule for a user error: one line naming the option and the fix, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        bad = re.fullmatch(r"argument (\S+?)(?:/\S+)?: invalid (int|float) value: '(.*)'", message, re.S)
        if bad:
            flag, kind, value = bad.groups()
            fix = "a whole number written in digits" if kind == "int" else "a number"
            with contextlib.suppress(ValueError):  # 1e9 for an int flag: say what it would be in digits
                number = float(value)
                if kind == "int" and number.is_integer() and abs(number) < 1e18:
                    fix += f" ({int(number)}, not {value})"
            message = f"{flag} {value!r}: not {'a whole number' if kind == 'int' else 'a number'}; pass {fix}"
            if os.path.exists(value):  # `--watch DIR`: an option that takes an optional number swallowed the path
                message += f", or put {value!r} before {flag}"
        else:
            message = f"{message.splitlines()[0]} (see `{self.prog} --help`)"
        self.exit(2, f"error: {self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from suite import __version__

    parser = Parser(
        prog="suite",
        description="layerscale-suite: when does LayerScale let a ViT train stably at depth, and what does it cost?",
    )
    parser.add_argument("--version", action="version", version=f"suite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        # add_help=False: `suite train --help` is answered by the module's own parser below.
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.set_defaults(_module=module)
    return parser


class Terminated(BaseException):
    """SIGTERM in a command that writes its files in this process (:data:`CLEAN_ON_TERM`), raised from the handler so
    that every ``atomic_write`` on the way out removes its temp file."""


CLEAN_ON_TERM = ("analyze", "report")  # one process, no workers: a SIGTERM unwinds it like Ctrl-C


STOPS: list[int] = []  # the SIGINTs and SIGTERMs main's own handlers took during the command
STRUCK: list[tuple[Any, int]] = []  # the last one's stack: (frame, its line then), innermost first


def _on_stop(signum: int, frame: Any) -> None:
    """Record the signal and where it struck (each frame and line), then unwind (KeyboardInterrupt or
    :class:`Terminated`); if a library turns that into another exception, :func:`main` still stops in one line."""
    STOPS.append(signum)
    STRUCK.clear()
    while frame is not None:
        STRUCK.append((frame, frame.f_lineno))
        frame = frame.f_back
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt


def console() -> int:
    """``suite`` and ``python -m suite``: :func:`main`, then SIGINT ignored, so no late Ctrl-C loses stdout's buffer,
    and what is loaded frozen: the collections while the interpreter exits took a second once torch was imported."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    STOPS.clear()
    STRUCK.clear()
    # SIGINT: a recording handler in place of Python's; none where SIGINT is ignored or off the main thread
    on_main = threading.current_thread() is threading.main_thread()  # where alone Python lets a handler be set
    own = on_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if own:
        signal.signal(signal.SIGINT, _on_stop)
    try:
        return _dispatch(argv)
    except Terminated:
        return _stopped(argv, signal.SIGTERM)
    except KeyboardInterrupt:  # Ctrl-C, also while a subcommand's libraries load: finished work is kept
        return _stopped(argv, signal.SIGINT)
    except Exception as err:
        if not STOPS or not _caused_by_stop(err):
            raise  # a real error, also one after a signal a library swallowed: shown as it is
        return _stopped(argv, STOPS[-1])  # the signal's exception, turned into this one by a library
    finally:  # also for the interrupts a subcommand handles itself (`suite run`, `suite status --watch`)
        if own:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if on_main and signal.getsignal(signal.SIGTERM) is _on_stop:  # _dispatch's, for its command only
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        STRUCK.clear()  # no frames kept alive past the command
        forget_caught_interrupt()


def _caused_by_stop(err: BaseException) -> bool:
    """Whether ``err`` is the stop in another form: in the stop's ``__context__`` chain, or raised by the very call the
    signal interrupted (a C extension that replaces the pending error, as matplotlib's converters do)."""
    first = err
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, (KeyboardInterrupt, Terminated)):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    tb = first.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and any(f is tb.tb_frame and line == tb.tb_lineno for f, line in STRUCK)


def _stopped(argv: list[str], signum: int) -> int:
    """The one line a stopped command ends with; its exit status."""
    command = next((a for a in argv if a in COMMANDS), None)
    if signum == signal.SIGTERM:
        print(f"\nterminated: suite {command or ''} stopped (SIGTERM); no half-written file is left", file=sys.stderr)
        return 143
    print(f"\ninterrupted: suite {command} stopped (Ctrl-C)" if command else "\ninterrupted: suite stopped (Ctrl-C)",
          file=sys.stderr)
    return 130


def _dispatch(argv: list[str]) -> int:
    """Parse ``argv``, import the subcommand's module and run it; the user errors all share become one line."""
    parser = build_parser()
    # Two passes: find the subcommand, then let its module add its own arguments.
    known, _ = parser.parse_known_args(argv)
    if known.command is None:
        parser.print_help()
        return 0
    if known.command in CLEAN_ON_TERM and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and \
            threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_stop)
    module = importlib.import_module(known._module)
    sub = Parser(prog=f"suite {known.command}", description=COMMANDS[known.command][1])
    module.add_arguments(sub)
    rest = argv[argv.index(known.command) + 1:]
    # Commands taking key=value overrides accept them before or after options (`--out DIR train.steps=5`).
    args = sub.parse_intermixed_args(rest) if getattr(module, "INTERMIXED", False) else sub.parse_args(rest)
    from suite import store

    store.one_line_warnings()
    try:
        return int(module.run(args) or 0)
    except store.UnsafeFile as err:  # a link where the suite writes, a FIFO or device where it reads
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `suite status DIR | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except (store.DiskFull, OSError) as err:  # after BrokenPipeError and UnsafeFile, OSErrors of their own
        if store.no_space(err):
            where = err.path if isinstance(err, store.DiskFull) else err.filename or "the disk"
            print(f"error: no space left on {where}; free some space and run the same command again "
                  f"(finished runs are kept)", file=sys.stderr)
            return 2
        if isinstance(err, OSError) and err.errno in PATH_ERRORS and err.filename:  # a path the user gave
            print(f"error: {str(err.filename)[:200]}: {err.strerror}; {PATH_ERRORS[err.errno]}", file=sys.stderr)
            return 2
        raise


# OS errors that name a path the user chose (a FILE, DIR or --out), with the fix: one line, not a traceback.
PATH_ERRORS = {errno.ENAMETOOLONG: "a file or folder name has at most 255 bytes; use a shorter one",
               errno.ELOOP: "a symbolic link there points back at itself; remove the loop or name another path",
               errno.EACCES: "you may not read or write there; check its permissions or name another path",
               errno.EROFS: "that file system is read-only; name a path on a writable one"}


if __name__ == "__main__":
    raise SystemExit(console())
