"""The one workaround for a CPython behaviour around Ctrl-C, used by ``suite.cli`` and ``python -m suite``."""


def forget_caught_interrupt() -> None:
    """Keep the exit status after a caught Ctrl-C. CPython marks a KeyboardInterrupt that leaves code run
    by ``exec``/``eval`` of a string as unhandled (namedtuple, dataclasses and scipy.stats build functions
    that way while they load), even when it is caught further up; under ``python -m`` a process so marked
    kills itself with SIGINT at exit (status -2, not 130). Running a string of no code clears the mark:
    CPython resets it before each such run and sets it only if one fails."""
    exec("")
