"""The backends by name: ``--backend NAME`` picks one of :data:`BACKENDS`, each a ``launcher.Backend``."""

from __future__ import annotations

from suite.sweep.folder import RunnerError
from suite.sweep.launcher import Backend
from suite.sweep.local import LocalBackend
from suite.sweep.ray_backend import RayBackend
from suite.sweep.slurm_backend import SlurmBackend

BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (LocalBackend, RayBackend, SlurmBackend)}


def backend(name: str) -> Backend:
    """The backend called ``name``; :class:`RunnerError` if none is."""
    if name not in BACKENDS:
        raise RunnerError(f"--backend {name}: unknown; use {', '.join(BACKENDS)}")
    return BACKENDS[name]()
