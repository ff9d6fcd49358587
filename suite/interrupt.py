"""The one workaround for a CPython behaviour around Ctrl-C, used by ``suite.cli`` and ``python -m suite``."""


def forget_caught_interrupt() -> None:
    """Keep the exit status 130 after a caught Ctrl-C: CPython marks a KeyboardInterrupt that leaves code run
    by ``exec`` of a string (as namedtuple, dataclasses and scipy.stats do while loading) even if caught,
    and under ``python -m`` such a process kills itself with SIGINT at exit; an empty ``exec`` clears it."""
    exec("")
