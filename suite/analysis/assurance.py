"""The honest chance that a rerun decides a declared question: assurance, the power averaged over the posterior of the
effect and SD, decided by Holm (docs/statistics.md#the-honest-chance-of-a-rerun)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats as sps

from suite.config import DEPTH

ALPHA = 0.05


@dataclass(frozen=True)
class Evidence:
    """One paired question's per-seed differences: mean, SD, count; ``scale`` and ``sd_scale`` multiply mean and SD."""

    mean: float
    sd: float
    n: int
    scale: float = 1.0
    sd_scale: float = 1.0

    @classmethod
    def of(cls, diffs: Sequence[float], scale: float = 1.0, sd_scale: float = 1.0) -> "Evidence":
        x = np.asarray(diffs, float)
        x = x[np.isfinite(x)]
        if x.size < 2:
            raise ValueError(f"assurance needs at least 2 per-seed differences, got {x.size}")
        return cls(float(x.mean()), float(x.std(ddof=1)), int(x.size), scale, sd_scale)

    def draw(self, sims: int, rng: np.random.Generator, uncertain: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(true mean, true SD), each (sims,): fixed at the estimate, or drawn from the reference posterior."""
        if not uncertain:
            return np.full(sims, self.scale * self.mean), np.full(sims, self.sd_scale * self.sd)
        df = self.n - 1
        sd = self.sd * np.sqrt(df / rng.chisquare(df, sims))
        mean = self.mean + sd / np.sqrt(self.n) * rng.standard_normal(sims)
        return self.scale * mean, self.sd_scale * sd


def paired_p(x: np.ndarray) -> np.ndarray:
    """Two-sided paired-t p-value of each row of ``x`` (studies x seeds)."""
    n = x.shape[1]
    t = x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))
    return 2 * sps.t.sf(np.abs(t), n - 1)


def holm_decided(p: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Which questions Holm decides in each study: boolean, shaped like ``p`` (studies x questions)."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    passes = np.cumprod(ranked < alpha / (m - np.arange(m)), axis=1).astype(bool)
    decided = np.zeros_like(passes)
    np.put_along_axis(decided, order, passes, axis=1)
    return decided


def assurance(evidence: Sequence[Evidence], n: int, sims: int = 20_000, seed: int = 0, uncertain: bool = True,
              alpha: float = ALPHA) -> np.ndarray:
    """The share of simulated reruns on ``n`` fresh seeds that decide each question of a Holm family: (questions,)."""
    rng = np.random.default_rng(seed)
    ps = []
    for ev in evidence:
        mean, sd = ev.draw(sims, rng, uncertain)
        ps.append(paired_p(mean[:, None] + sd[:, None] * rng.standard_normal((sims, n))))
    return holm_decided(np.stack(ps, 1), alpha).mean(0)


def change_assurance(base: Evidence, share: float, sd_scale: float, n: int, sims: int = 20_000, seed: int = 0,
                     uncertain: bool = True, alpha: float = ALPHA) -> np.ndarray:
    """Share of reruns on ``n`` seeds deciding, as one Holm family, (a) a new cell's gain and (b) its change from the
    base cell; the new cell's true gain and SD are ``share`` and ``sd_scale`` times the base's (share 1: (b) null)."""
    rng = np.random.default_rng(seed)
    m0, s0 = base.draw(sims, rng, uncertain)
    g0 = m0[:, None] + s0[:, None] * rng.standard_normal((sims, n))
    g1 = share * m0[:, None] + sd_scale * s0[:, None] * rng.standard_normal((sims, n))
    return holm_decided(np.stack([paired_p(g1), paired_p(g1 - g0)], 1), alpha).mean(0)


def seed_gains(runs: list[dict[str, Any]], scheme: str, baseline: str, depths: Sequence[int]) -> dict[int, np.ndarray]:
    """Per depth, ``scheme``'s test score minus ``baseline``'s in points, over the seeds run at every depth.
    AnalysisError for a cell (variant, depth, seed) that holds several runs (several rates: which is the arm's?)."""
    from suite.results import AnalysisError, score

    cell: dict[tuple, float] = {}
    for r in runs:
        if r.get("status") == "error" or r.get("variant") not in (scheme, baseline) or score(r) is None:
            continue
        key = (r["variant"], r.get(DEPTH), r.get("seed"))
        if key in cell:
            raise AnalysisError(f"{key[0]} at depth {key[1]}, seed {key[2]}, has several runs (several learning "
                                f"rates?); pass a folder with one run per arm, depth and seed")
        cell[key] = score(r)
    seeds = sorted({s for (_, _, s) in cell if all((v, d, s) in cell for v in (scheme, baseline) for d in depths)})
    return {d: np.array([100 * (cell[scheme, d, s] - cell[baseline, d, s]) for s in seeds]) for d in depths}
