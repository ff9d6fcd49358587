"""The stacked AdamW of a pack and its learning-rate table, against torch's AdamW and lr_at."""

from __future__ import annotations

import math

import pytest
import torch

from suite.config import TrainConfig
from suite.engine.optim import lr_at, lr_table, stacked_adamw_


@pytest.mark.parametrize("total", [1, 7, 160])
def test_the_lr_table_is_lr_at_of_each_member(total):
    tcs = [TrainConfig(lr=1e-3, warmup_steps=20, min_lr=1e-6), TrainConfig(lr=3e-2, warmup_steps=0, min_lr=0.0),
           TrainConfig(lr=5e-3, warmup_steps=100, min_lr=5e-3), TrainConfig(lr=2e-3, warmup_steps=200, min_lr=1e-5)]
    table = lr_table(total, tcs)
    assert table.shape == (total, 4) and table.dtype == torch.float32
    expected = torch.tensor([[lr_at(s, total, tc) for tc in tcs] for s in range(total)], dtype=torch.float32)
    assert torch.equal(table, expected)


def _members(n: int, p: int, seed: int = 0):
    """N members' [P] parameters and a policy: two decayed columns blocks, one with an lr scale."""
    gen = torch.Generator().manual_seed(seed)
    flat = torch.randn(n, p, generator=gen)
    decay = (torch.arange(p) % 3 != 0).float()  # 1 where a parameter decays
    lr_scale = torch.where(torch.arange(p) < p // 2, 1.0, 0.25)
    lr = torch.tensor([1e-3 * 4**i for i in range(n)])
    wd = torch.tensor([0.05 * (i + 1) for i in range(n)])
    return flat, decay, lr_scale, lr, wd, gen


def test_the_stacked_update_is_torch_adamw_per_member_and_skips_the_members_not_kept():
    """Five steps of N = 3 members, each against its own torch.optim.AdamW with two parameter groups
    per (decay, lr scale) column set; member 1 is skipped at step 3 (its gradient NaN there): it
    neither moves nor updates its moments, and the next step's bias correction counts the step as
    torch's does when a found_inf skips it (step count still advances)."""
    n, p, betas, eps = 3, 12, (0.9, 0.999), 1e-8
    flat, decay, lr_scale, lr, wd, gen = _members(n, p)
    exp_avg, exp_avg_sq = torch.zeros(n, p), torch.zeros(n, p)
    refs, opts = [], []
    for i in range(n):
        params = [torch.nn.Parameter(flat[i, j:j + 1].clone()) for j in range(p)]
        groups = {}
        for j, q in enumerate(params):
            groups.setdefault((float(decay[j]), float(lr_scale[j])), []).append(q)
        opts.append(torch.optim.AdamW([{"params": qs, "weight_decay": float(wd[i]) * d, "lr": float(lr[i]) * s,
                                        "s": s} for (d, s), qs in groups.items()], betas=betas, eps=eps,
                                      foreach=False))
        refs.append(params)
    flat = flat.clone()
    for step in range(1, 6):
        grad = torch.randn(n, p, generator=gen)
        keep = torch.ones(n, dtype=torch.bool)
        if step == 3:
            grad[1] = math.nan
            keep[1] = False
        stacked_adamw_(flat, grad.clone(), exp_avg, exp_avg_sq, lr, keep, torch.tensor(step), wd[:, None], decay,
                       lr_scale, betas, eps)
        for i in range(n):
            if not keep[i]:
                continue
            for j, q in enumerate(refs[i]):
                q.grad = grad[i, j:j + 1].clone()
            for g in opts[i].param_groups:
                g["lr"] = float(lr[i]) * g["s"]
                for q in g["params"]:
                    if opts[i].state[q]:  # the stack counts a skipped step too
                        opts[i].state[q]["step"] = torch.tensor(float(step - 1))
            opts[i].step()
        expected = torch.stack([torch.cat([q.detach() for q in refs[i]]) for i in range(n)])
        assert torch.allclose(flat, expected, rtol=1e-6, atol=1e-7), step
    assert torch.isfinite(flat).all() and torch.isfinite(exp_avg).all() and torch.isfinite(exp_avg_sq).all()


def test_the_stacked_update_equals_the_one_it_replaced():
    """The update the pack ran before (26 ops, 15 [N, P] temporaries, a stored [N, P] decay), kept here
    as the reference: equal to fp32 rounding over 10 steps, with a member skipped at step 4."""
    n, p, betas, eps = 4, 50, (0.9, 0.95), 1e-6
    flat, decay, lr_scale, lr, wd, gen = _members(n, p, seed=1)
    old = {"flat": flat.clone(), "m": torch.zeros(n, p), "v": torch.zeros(n, p)}
    new = {"flat": flat.clone(), "m": torch.zeros(n, p), "v": torch.zeros(n, p)}
    stored_decay = decay[None, :] * wd[:, None]
    for step in range(1, 11):
        grad = torch.randn(n, p, generator=gen) * 10 ** (step % 3 - 1)
        keep = torch.tensor([True, step != 4, True, True])
        b1, b2 = betas
        bc1, bc2 = 1 - b1**step, 1 - b2**step
        k = keep[:, None]
        g = torch.where(k, grad, 0.0)
        lr_np = torch.where(k, lr[:, None] * lr_scale[None, :], 0.0)
        old["flat"].mul_(1 - lr_np * stored_decay)
        old["m"].copy_(torch.where(k, old["m"].lerp(g, 1 - b1), old["m"]))
        old["v"].copy_(torch.where(k, old["v"] * b2 + (1 - b2) * g * g, old["v"]))
        denom = (old["v"].sqrt() / math.sqrt(bc2)).add_(eps)
        old["flat"].addcdiv_(old["m"] * lr_np, denom, value=-1 / bc1)
        stacked_adamw_(new["flat"], grad.clone(), new["m"], new["v"], lr, keep, torch.tensor(step), wd[:, None],
                       decay, lr_scale, betas, eps)
        for key in old:
            scale = old[key].abs().max()
            gap = (new[key] - old[key]).abs().max()
            assert gap <= 1e-6 * scale, (step, key, gap / scale)


def test_compiled_the_stacked_update_is_one_kernel_with_no_temporary_and_equals_eager():
    """What a compiled pack's step runs: inductor fuses the update into one loop over the [N, P]
    tensors that allocates nothing (no buffer in its code), with the values of the eager update."""
    import re

    from torch._inductor.utils import run_and_get_code

    n, p, betas, eps = 4, 50, (0.9, 0.999), 1e-8
    flat, decay, lr_scale, lr, wd, gen = _members(n, p, seed=2)
    grad, m, v = torch.randn(n, p, generator=gen), torch.rand(n, p, generator=gen), torch.rand(n, p, generator=gen)
    keep, step = torch.tensor([True, False, True, True]), torch.tensor(3)
    eager = [t.clone() for t in (flat, grad, m, v)]
    stacked_adamw_(*eager, lr, keep, step, wd[:, None], decay, lr_scale, betas, eps)
    compiled = [t.clone() for t in (flat, grad, m, v)]
    fn = torch.compile(stacked_adamw_, fullgraph=True, dynamic=False)
    _, code = run_and_get_code(fn, *compiled, lr, keep, step, wd[:, None], decay, lr_scale, betas, eps)
    source = "\n".join(code)
    calls = re.findall(r"^\s+(cpp_fused_\w+)\(", source, flags=re.M)
    buffers = re.findall(r"^\s+(buf\d+) = empty_strided", source, flags=re.M)
    assert len(calls) == 1 and not buffers, (calls, buffers)
    for got, want in zip(compiled, eager):
        assert torch.allclose(got, want, rtol=1e-6, atol=1e-7)
