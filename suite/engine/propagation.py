"""Signal propagation at initialisation and over the first optimizer steps, without a training run: block by block,
what makes a deep stack fail, in fp32 (docs/propagation.md, "The quantities")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from suite import store
from suite.config import RunConfig, dump_yaml, flatten, to_dict
from suite.data import TrainStream, load_dataset
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import fill_model_shape
from suite.engine.optim import build_optimizer, lr_at, set_lr
from suite.engine.probes import finite_or_none as _finite, probe
from suite.models import build_model, count_params

RECORDS = "propagation.jsonl"
KIND = "propagation"


def pairwise_cosine(vectors: torch.Tensor) -> float:
    """Mean cosine similarity over the B(B-1) ordered pairs of distinct rows of ``vectors`` (B, C); nan for B < 2."""
    v = F.normalize(vectors.float(), dim=-1)
    b = v.shape[0]
    if b < 2:
        return math.nan
    gram = v @ v.T
    return float((gram.sum() - gram.diagonal().sum()) / (b * (b - 1)))


def cls_cosine(tokens: torch.Tensor) -> float:
    """Mean cosine similarity between different images' class tokens (position 0 of ``tokens`` (B, N, C))."""
    return pairwise_cosine(tokens[:, 0])


def mean_cosine(tokens: torch.Tensor) -> float:
    """Mean cosine similarity between images' token-averaged representations: the rank-collapse score."""
    return pairwise_cosine(tokens.float().mean(dim=1))


@torch.no_grad()
def forward_records(model: nn.Module, x: torch.Tensor) -> list[dict[str, Any]]:
    """Per block: stream_rms, attn_ratio, mlp_ratio, scale_mean, cls_cos, mean_cos (eval mode, no gradients)."""
    cos: list[tuple[float, float]] = []
    records = probe(model, x, on_output=lambda i, out: cos.append((cls_cosine(out), mean_cosine(out))))
    return [{"block": r["block"], "stream_rms": r["out_rms"], "attn_ratio": r["attn_ratio"],
             "mlp_ratio": r["mlp_ratio"], "scale_mean": r["scale_mean"], "cls_cos": _finite(c), "mean_cos": _finite(m)}
            for r, (c, m) in zip(records, cos)]


def unmeasurable(cfg: RunConfig) -> str | None:
    """Why ``cfg`` cannot be measured as its config says (said before any run starts), or None."""
    if cfg.train.precision in ("bf16", "fp16"):
        return f"train.precision {cfg.train.precision}: propagation is measured in fp32; set it to fp32 or auto"
    if cfg.model.drop_path:  # the forward records are of the whole network, the steps would drop blocks at random
        return (f"model.drop_path {cfg.model.drop_path:g}: propagation measures the network as initialised, every "
                f"block in; set it to 0")
    return None


def backward_records(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                     smoothing: float = 0.0) -> tuple[list[dict[str, Any]], float]:
    """Per block, the loss's gradient norm at the stream after it and at its parameters; (records, loss)."""
    grads: list[float | None] = [None] * len(model.blocks)

    def keep(i: int):
        def hook(mod, args, out):
            out.register_hook(lambda g: grads.__setitem__(i, float(g.float().norm())))
        return hook

    handles = [b.register_forward_hook(keep(i)) for i, b in enumerate(model.blocks)]
    try:
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y, label_smoothing=smoothing)
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    records = []
    for i in range(len(model.blocks)):
        sq = sum(float(g.float().pow(2).sum()) for g in (p.grad for p in model.blocks[i].parameters()) if g is not None)
        records.append({"block": i, "grad_stream": _finite(grads[i]) if grads[i] is not None else None,
                        "grad_params": _finite(math.sqrt(sq))})
    return records, float(loss.detach())


def _block_vectors(model: nn.Module) -> list[torch.Tensor]:
    return [torch.cat([p.detach().float().flatten() for p in block.parameters()]) for block in model.blocks]


def step_records(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: RunConfig) -> list[dict[str, Any]]:
    """``cfg.train.steps`` AdamW steps on the batch; per step the loss, the logits' change and each block's ‖ΔW‖/‖W‖."""
    tc = cfg.train
    optimizer = build_optimizer(model, tc, cfg.model)
    with torch.no_grad():
        logits0 = model(x).float()
    records = []
    for step in range(tc.steps):
        before = _block_vectors(model)
        set_lr(optimizer, lr_at(step, tc.steps, tc))
        loss = F.cross_entropy(model(x), y, label_smoothing=tc.label_smoothing)  # the training loss, as `train`'s
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        optimizer.step()
        after = _block_vectors(model)
        ratios = [float((a - b).norm() / b.norm().clamp_min(1e-30)) for a, b in zip(after, before)]
        with torch.no_grad():
            logits = model(x).float()
        change = float((logits - logits0).norm() / logits0.norm().clamp_min(1e-30))
        finite = [r for r in ratios if math.isfinite(r)]
        records.append({"step": step + 1, "loss": _finite(float(loss.detach())), "lr": lr_at(step, tc.steps, tc),
                        "logit_change": _finite(change), "update_ratio_max": max(finite) if finite else None,
                        "update_ratio_mean": sum(finite) / len(finite) if finite else None,
                        "update_ratio": [_finite(r) for r in ratios]})
    return records


def summarize(forward: list[dict], backward: list[dict], steps: list[dict]) -> dict[str, Any]:
    """The scalar summaries of one run (documented in docs/propagation.md)."""
    first, last = forward[0], forward[-1]
    g_first, g_last = backward[0]["grad_stream"], backward[-1]["grad_stream"]
    ratio = g_first / g_last if g_first is not None and g_last else None  # 0: the gradient vanished at block 0
    maxima = [s["update_ratio_max"] for s in steps if s["update_ratio_max"] is not None]
    return {
        "stream_rms_first": first["stream_rms"], "stream_rms_last": last["stream_rms"],
        "stream_growth": (last["stream_rms"] / first["stream_rms"]
                          if first["stream_rms"] and last["stream_rms"] is not None else None),
        "cls_cos_last": last["cls_cos"], "rank_collapse": last["mean_cos"],
        "grad_stream_first": g_first, "grad_stream_last": g_last, "grad_ratio": None if ratio is None else _finite(ratio),
        "update_ratio_max": max(maxima) if maxima else None,
        "logit_change_last": steps[-1]["logit_change"] if steps else None,
        "loss_init": None, "loss_last": steps[-1]["loss"] if steps else None,
    }


def propagate(cfg: RunConfig, out_dir: str | Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure one config into ``config.yaml``, ``propagation.jsonl`` and ``summary.json`` (returned). Raises DiskFull
    when the disk fills."""
    with RunFolder(cfg, out_dir, extra) as run:
        summary = run.summary
        summary["kind"] = KIND
        if problem := unmeasurable(cfg):
            raise ValueError(problem)
        cfg, device = run.start(cfg, precision_on="cpu")  # `auto` is fp32 here, on every device
        data = load_dataset(cfg.data)
        cfg = fill_model_shape(cfg, data)
        summary.update({k: v for k, v in flatten(to_dict(cfg)).items() if k.startswith("model.")})
        store.atomic_write_text(run.out / store.CONFIG, dump_yaml(cfg))
        x, y = next(TrainStream(data, cfg.train.batch_size, cfg.seed, device, False, cfg.data.device_max_mb,
                                cfg.data.num_workers).batches(0, 1))
        torch.manual_seed(cfg.seed)
        model = build_model(cfg.model).to(device).train()
        summary["num_params"] = count_params(model)
        forward = forward_records(model, x)
        backward, loss0 = backward_records(model, x, y, cfg.train.label_smoothing)
        steps = step_records(model, x, y, cfg)
        lines = [store.metrics_line({"kind": "forward", **r}) for r in forward]
        lines += [store.metrics_line({"kind": "backward", **r}) for r in backward]
        lines += [store.metrics_line({"kind": "step", **r}) for r in steps]
        store.atomic_write_text(run.out / RECORDS, "".join(lines))
        summary.update(summarize(forward, backward, steps))
        summary["loss_init"] = _finite(loss0)
        summary["steps_done"] = len(steps)
        # The bad quantity's step: the updates behind it (a record's loss is taken before its update, its logits after).
        bad = next((s["step"] - (s["loss"] is None) for s in steps if s["loss"] is None or s["logit_change"] is None),
                   None)
        if bad is not None or not math.isfinite(loss0):
            summary.update(status="diverged", diverged_step=0 if not math.isfinite(loss0) else bad,
                           diverged_reason="nonfinite")
        else:
            summary["status"] = "ok"
    return run.summary
