"""The one workaround for a CPython behaviour around Ctrl-C, used by ``suite.cli`` and ``python -m suite``."""


def forget_caught_interrupt() -> None:
    """Keep the exit status 130 after a caught Ctrl-C: CPython marks a KeyboardInterrupt leaving ``exec``'d code (as
    namedtuple and dataclasses run) even if caught, and under ``python -m`` the process then kills itself with SIGINT
    at exit; an empty ``exec`` clears the mark."""
    exec("")
