"""A pack's training step as one program over device tensors (:class:`PackState`) with no per-step Python number, so
``torch.compile`` makes it one graph that never recompiles and a CUDA graph can replay; ``torch.func.grad`` of the
``[N, P]`` stack keeps the backward in the graph. More: docs/backends/local.md ("Packed runs")."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import warnings
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from suite import store
from suite.engine import steplog
from suite.engine.compiled import CUDA_GRAPH_MODES
from suite.engine.optim import stacked_adamw_


@dataclasses.dataclass(frozen=True, eq=False)
class StepSpec:
    """A packed step's constants: ``base``, the model's code (meta device); the parameters in stack order."""

    base: nn.Module
    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    bf16: bool
    casts: frozenset[str]
    device_type: str
    betas: tuple[float, float]
    eps: float
    clip: float  # inf: no clipping
    label_smoothing: float

    @property
    def sizes(self) -> list[int]:
        return [s.numel() for s in self.shapes]


@dataclasses.dataclass
class PackState:
    """Every tensor a packed step reads or writes, never replaced (a CUDA graph keeps their addresses)."""

    flat: torch.Tensor  # [N, P] parameters (each member's parameters are views of its row)
    exp_avg: torch.Tensor  # [N, P]
    exp_avg_sq: torch.Tensor  # [N, P]
    step: torch.Tensor  # [] int64: the pack's optimizer steps done
    lrs: torch.Tensor  # [T, N] each member's learning rate at every step (suite.engine.optim.lr_table)
    weight_decay: torch.Tensor  # [N, 1]
    decay: torch.Tensor  # [P] 1.0 where a parameter decays
    lr_scale: torch.Tensor  # [P] the learning-rate factor of each parameter's group
    live: torch.Tensor  # [N] bool: the member is still training
    log: torch.Tensor  # [W, N, 2] the step log's values (suite.engine.steplog)
    bad: torch.Tensor  # [N] the step log's sticky non-finite flags
    buffers: dict[str, torch.Tensor]  # the model's buffers, stacked [N, ...]

    def args(self) -> tuple[Any, ...]:
        return (self.flat, self.exp_avg, self.exp_avg_sq, self.step, self.lrs, self.weight_decay, self.decay,
                self.lr_scale, self.live, self.log, self.bad, self.buffers)

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in self.args() if isinstance(t, torch.Tensor)] + list(self.buffers.values())


def cast_names(base: nn.Module) -> frozenset[str]:
    """Parameters a bf16 pack casts itself, unseen by autocast under vmap: linear biases, convolutions' parameters."""
    names = set()
    for mod, module in base.named_modules():
        prefix = f"{mod}." if mod else ""
        if isinstance(module, nn.Linear) and module.bias is not None:
            names.add(f"{prefix}bias")
        if isinstance(module, nn.Conv2d):
            names.update(f"{prefix}{k}" for k in ("weight", "bias") if getattr(module, k) is not None)
    return frozenset(names)


def unflatten(spec: StepSpec, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """The ``[N, P]`` stack as the members' parameters, ``name -> [N, *shape]`` views (one split)."""
    n = flat.shape[0]
    return {k: t.view(n, *s) for k, t, s in zip(spec.names, flat.split(spec.sizes, dim=1), spec.shapes)}


def forward(spec: StepSpec, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor,
            shared_input: bool = False) -> torch.Tensor:
    """Logits ``[N, B, classes]`` of every member on its own ``x[i]`` (or all on one ``x``)."""
    if spec.bf16:
        params = {k: v.to(torch.bfloat16) if k in spec.casts else v for k, v in params.items()}
        x = x.to(torch.bfloat16)  # the convolution's input, as autocast gives a solo run's
    with torch.autocast(spec.device_type, dtype=torch.bfloat16, enabled=spec.bf16):
        return vmap(lambda p, b, xi: functional_call(spec.base, (p, b), (xi,)),
                    in_dims=(0, 0, None if shared_input else 0), randomness="error")(params, buffers, x)


def attention() -> contextlib.AbstractContextManager:
    """The math attention, which vmaps (the CPU's fused one has no vmap rule, CUDA's efficient one refuses vmap)."""
    return sdpa_kernel(SDPBackend.MATH)


def make_step(spec: StepSpec) -> Callable[..., None]:
    """The packed step of :meth:`PackState.args` and a batch ``(x [N, B, ...], y [N, B])``, in place: loss, gradient,
    clipping and step log per member, one stacked AdamW update; no output (a CUDA graph's next replay overwrites it)."""
    def losses(flat: torch.Tensor, buffers: dict, x: torch.Tensor,
               y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = forward(spec, unflatten(spec, flat), buffers, x).float()
        n, b = y.shape
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none",
                               label_smoothing=spec.label_smoothing).view(n, b).mean(1)
        return loss.sum(), loss  # each member's rows get the gradient of its own loss

    def step(flat: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, count: torch.Tensor,
             lrs: torch.Tensor, weight_decay: torch.Tensor, decay: torch.Tensor, lr_scale: torch.Tensor,
             live: torch.Tensor, log: torch.Tensor, bad: torch.Tensor, buffers: dict, x: torch.Tensor,
             y: torch.Tensor) -> None:
        grad, loss = torch.func.grad(losses, has_aux=True)(flat, buffers, x, y)  # [N, P], [N]
        norm = torch.linalg.vector_norm(grad, dim=1)
        grad.mul_((spec.clip / (norm + 1e-6)).clamp(max=1.0)[:, None])  # as clip_grad_norm_, per member
        steplog.write(log, bad, count % log.shape[0], loss, norm)
        lr = lrs.index_select(0, count.clamp(max=lrs.shape[0] - 1).reshape(1))[0]  # [N]
        count.add_(1)
        stacked_adamw_(flat, grad, exp_avg, exp_avg_sq, lr, live & (bad == 0), count, weight_decay, decay,
                       lr_scale, spec.betas, spec.eps)

    return step


def compile_mode(setting: bool | str, device_type: str) -> str | None:
    """A pack's ``train.compile`` as a mode (None: eager); ``true`` is ``reduce-overhead`` on CUDA, else ``default``."""
    if setting is False:
        return None
    if setting is True:
        return "reduce-overhead" if device_type == "cuda" else "default"
    return str(setting)


NO_CUDA_GRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


class Program:
    """The packed step of ``spec``, eager or compiled with ``mode``; failing to capture CUDA graphs, it warns why in one
    line and recompiles without them."""

    def __init__(self, spec: StepSpec, mode: str | None, warn: Callable[[str], None] | None = None,
                 **options: Any) -> None:
        self.spec, self.calls, self.options = spec, 0, options  # options: the tests' backend
        self.warn = warn or (lambda line: warnings.warn(line, store.SuiteWarning, stacklevel=2))
        if mode in CUDA_GRAPH_MODES and spec.device_type != "cuda":
            self.warn(f"pack: train.compile {mode} captures CUDA graphs, which exist on CUDA only; on "
                      f"{spec.device_type} the step is compiled without them")
            mode = NO_CUDA_GRAPHS[mode]
        self.mode = mode
        self.fn = self._build(mode)

    def _build(self, mode: str | None) -> Callable[..., None]:
        step = make_step(self.spec)
        if mode is None:
            return step

        options: dict[str, Any] = {"fullgraph": True, "dynamic": False, **self.options}
        if mode in CUDA_GRAPH_MODES:
            # Capture must succeed or raise (not skip silently), so that the fallback can say why.
            inductor = {"triton.cudagraphs": True, "triton.cudagraph_or_error": True}
            if mode == "max-autotune":
                inductor.update({"max_autotune": True, "coordinate_descent_tuning": True})
            return torch.compile(step, options=inductor, **options)
        if "backend" in options:  # a test's backend takes no inductor mode
            return torch.compile(step, **options)
        return torch.compile(step, mode=None if mode == "default" else mode, **options)

    def uses_cuda_graphs(self) -> bool:
        return self.mode in CUDA_GRAPH_MODES

    def __call__(self, state: PackState, x: torch.Tensor, y: torch.Tensor) -> None:
        self.calls += 1
        with attention():
            if self.uses_cuda_graphs() and self.spec.device_type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()  # a new step: no output of the last one is kept
            if not self.uses_cuda_graphs() or self.calls > 3:  # cudagraph trees warm up, then record
                return self.fn(*state.args(), x, y)
            try:
                return self.fn(*state.args(), x, y)
            except Exception as err:  # noqa: BLE001  (any failure to capture: the reason is in its message)
                if not _capture_failure(err):
                    raise
                reason = _first_line(err)
            self.warn(f"pack: the compiled step runs without CUDA graphs ({reason}); its host time per step "
                      f"is that of the compiled graph's kernel launches")
            from torch import _dynamo

            _dynamo.reset()
            self.mode = NO_CUDA_GRAPHS[self.mode]
            self.fn = self._build(self.mode)
            return self.fn(*state.args(), x, y)


# What torch says when it skips a CUDA graph under cudagraph_or_error ("skipping cudagraphs due to ...", "disabling
# cudagraphs ...") or when CUDA refuses a capture (cudaErrorStreamCapture*: "... when stream is capturing").
CAPTURE_FAILURE = re.compile(r"\b(skipping|disabling) cudagraphs?\b|stream is capturing|during (stream )?capture|"
                             r"cudaErrorStreamCapture|graph capture (failed|invalidated)", re.IGNORECASE)


def _capture_failure(err: BaseException) -> bool:
    """Whether ``err`` says a CUDA graph could not be captured (:data:`CAPTURE_FAILURE`), not that the step failed."""
    return any(CAPTURE_FAILURE.search(str(e)) for e in _chain(err))


def _chain(err: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while err is not None and err not in seen:
        seen.append(err)
        err = err.__cause__ or err.__context__
    return seen


def _first_line(err: BaseException) -> str:
    """The innermost cause's message, first line, without dynamo's wrapping."""
    for e in reversed(_chain(err)):
        line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        if line:
            return line[:200]
    return type(err).__name__


def mark_static(state: PackState) -> None:
    """Mark the state's tensors static, so a CUDA graph updates them in place rather than copying at each replay."""
    from torch import _dynamo

    for t in state.tensors():
        _dynamo.mark_static_address(t)
