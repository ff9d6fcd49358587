"""When a run has diverged: pure rules over its per-step training loss, fed one step at a time to :meth:`Watch.observe`
(docs/training.md, "When a run has diverged"). Its state is plain numbers, kept in checkpoints."""

from __future__ import annotations

import math
from dataclasses import dataclass

EMA = 0.9  # smoothing of the loss for the spike and collapse rules (and the summary's final_train_loss)
# torch.amp.GradScaler's defaults, passed to it explicitly (suite.engine.loop): the host's scale follows the device's.
SCALER = {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}
REASONS = ("nonfinite", "spike", "collapse", "scale_collapse")


@dataclass(frozen=True)
class Rules:
    """The thresholds of the rules (the ``train.*`` keys of the same names); ``chance`` is ln C."""

    chance: float
    spike_factor: float = 4.0
    spike_after: int = 5
    spike_window: int = 20
    collapse_below: float = 0.8
    collapse_within: float = 0.05
    collapse_window: int = 50
    scale_max_skips: int = 20
    scale_min: float = 1e-4

    @classmethod
    def of(cls, train_cfg, chance: float) -> "Rules":
        """The rules of a run's ``train`` config."""
        return cls(chance, **{k: getattr(train_cfg, k) for k in
                              ("spike_factor", "spike_after", "spike_window", "collapse_below", "collapse_within", "collapse_window",
                               "scale_max_skips", "scale_min")})


@dataclass(frozen=True)
class Verdict:
    """A rule fired at ``step`` (for ``collapse``, the step it returned to chance); ``detail`` says what was seen."""

    reason: str
    step: int
    detail: str


@dataclass
class Watch:
    """The rules' running state over the steps seen so far (every field a plain number or None)."""

    seen: int = 0  # steps observed
    ema: float | None = None
    best_ema: float = math.inf  # the spike rule's reference
    learned_at: int | None = None  # first step with ema <= collapse_below x ln C
    returned_at: int | None = None  # first step of the current run of steps back near chance
    near: int = 0  # steps seen in that run (fp16's skipped steps are not seen)
    skipped: int = 0  # fp16: steps the loss scaler skipped, in all
    skip_run: int = 0  # ... in a row, up to now
    good_run: int = 0  # ... steps in a row without a skip (the scaler grows its scale after enough)
    scale: float = SCALER["init_scale"]
    spike_at: int | None = None  # first step of the spike still open, if one is
    spike_steps: int = 0  # steps seen since it opened
    spike_detail: str = ""
    spikes_recovered: int = 0  # spikes whose loss came back under the threshold within the window

    def observe(self, rules: Rules, step: int, loss: float, grad_norm: float, skipped: bool = False) -> Verdict | None:
        """Feed step ``step`` (after ``step`` updates; ``skipped``: by fp16's scaler); the first verdict, or None."""
        if not math.isfinite(loss) or (not math.isfinite(grad_norm) and not skipped):
            what = "loss" if not math.isfinite(loss) else "gradient norm"
            return Verdict("nonfinite", step, f"the {what} is {loss if what == 'loss' else grad_norm}")
        if skipped:
            return self._skip(rules, step)
        self.skip_run = 0
        self.good_run += 1
        if self.good_run >= SCALER["growth_interval"]:
            self.scale *= SCALER["growth_factor"]
            self.good_run = 0
        self.seen += 1
        self.ema = loss if self.ema is None else EMA * self.ema + (1 - EMA) * loss
        verdict = self._spike(rules, step, loss)
        if verdict is not None:
            return verdict
        self.best_ema = min(self.best_ema, self.ema)
        return self._collapse(rules, step)

    def _spike(self, rules: Rules, step: int, loss: float) -> Verdict | None:
        above = self.seen > rules.spike_after and loss > rules.spike_factor * self.best_ema and loss > rules.chance
        if self.spike_at is not None:
            if not above:
                self.spikes_recovered += 1
                self.spike_at, self.spike_steps = None, 0
                return None
            self.spike_steps += 1
        elif above:
            self.spike_at, self.spike_steps = step, 0
            self.spike_detail = (f"loss {loss:.4g} > {rules.spike_factor:g} x the best smoothed loss {self.best_ema:.4g}"
                                 + (f", still above after {rules.spike_window} steps" if rules.spike_window else ""))
        if self.spike_at is not None and self.spike_steps >= rules.spike_window:
            return Verdict("spike", self.spike_at, self.spike_detail)
        return None

    def _skip(self, rules: Rules, step: int) -> Verdict | None:
        self.skipped += 1
        self.skip_run += 1
        self.good_run = 0
        self.scale *= SCALER["backoff_factor"]
        if self.skip_run >= rules.scale_max_skips:
            return Verdict("scale_collapse", step, f"the loss scaler skipped {self.skip_run} steps in a row")
        if self.scale < rules.scale_min:
            return Verdict("scale_collapse", step, f"the loss scale fell to {self.scale:.3g} < {rules.scale_min:g}")
        return None

    def _collapse(self, rules: Rules, step: int) -> Verdict | None:
        if self.learned_at is None:
            if self.ema <= rules.collapse_below * rules.chance:
                self.learned_at = step
            return None
        if self.ema < (1 - rules.collapse_within) * rules.chance:
            self.returned_at, self.near = None, 0
            return None
        if self.returned_at is None:
            self.returned_at = step
        self.near += 1
        if self.near >= rules.collapse_window:
            return Verdict("collapse", self.returned_at,
                           f"the smoothed loss reached {rules.collapse_below:g} x ln C by step {self.learned_at}, "
                           f"then returned to within {rules.collapse_within:.0%} of ln C = {rules.chance:.3f} at step "
                           f"{self.returned_at} and stayed there for {rules.collapse_window} steps")
        return None
