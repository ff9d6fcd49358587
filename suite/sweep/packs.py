"""Which runs of a sweep train together as one pack (``suite run --pack N``; :mod:`suite.engine.pack`)."""

from __future__ import annotations

from suite.sweep.spec import Run


def group(todo: list[Run], size: int) -> list[list[Run]]:
    """``todo`` as packs of at most ``size`` runs that may share one (same :func:`pack_key`, each
    :func:`packable`, training runs), in the order of their first run; every other run alone."""
    if size <= 1:
        return [[run] for run in todo]
    from suite.engine.pack import pack_key, packable

    open_packs: dict[str, list[Run]] = {}
    out: list[list[Run]] = []
    for run in todo:
        if run.kind != "train" or packable(run.cfg) is not None:
            out.append([run])
            continue
        key = pack_key(run.cfg)
        current = open_packs.get(key)
        if current is None or len(current) == size:
            current = open_packs[key] = []
            out.append(current)
        current.append(run)
    return out
