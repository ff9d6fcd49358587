"""Whether starting worker processes would run the calling script again: ``spawn`` and ``forkserver`` import
``__main__`` in every worker, so an unguarded ``run_sweep`` call would start the sweep again in each."""

from __future__ import annotations

import ast
import os
import sys
import tokenize


def unguarded_call() -> str | None:
    """``"PATH:LINE"`` of the ``__main__`` script's unguarded top-level statement calling us, or None."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return None  # multiprocessing does not import a package's __main__ again
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None  # no file to import again (python -c, a notebook), or IPython's, which it skips
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:  # not called while the script's top level runs (a thread, a callback)
        return None
    try:
        with tokenize.open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return None if _only_as_main(stmt, line) else f"{path}:{line}"
    return None


def _only_as_main(stmt: ast.stmt, line: int) -> bool:
    """Whether ``line`` of top-level ``stmt`` runs only when the module is ``__main__``."""
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return False
    sides = [test.left, test.comparators[0]]
    names = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    if not (names and main):
        return False
    branch = stmt.body if isinstance(test.ops[0], ast.Eq) else stmt.orelse
    return any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in branch)
