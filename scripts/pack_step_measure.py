"""Ops per packed step and eager vs compiled step time, by default at the default ablation's shape
(depth 48, dim 32, batch 32, one thread).

Usage: .venv/bin/python scripts/pack_step_measure.py ROOT N PRECISION [compile] [only] [first] [-v]
           [--depth D] [--batch B] [--threads T]
(ROOT: a checkout of the suite, e.g. `.`, or an older one exported with `git archive` to compare;
with `compile` it also times the compiled step against the eager one in the same run, interleaved,
so that a shared machine's drift falls on both; `only` times the compiled step alone; `first`
compiles before any eager step, as a sweep worker does (with `only`: the compiled step as in a
worker); the first compile takes minutes on a CPU. `suite bench --throughput`'s shape is `--depth 12 --batch 64
--threads 2`.)
"""
import argparse, sys, time, tempfile, statistics
parser = argparse.ArgumentParser()
parser.add_argument("root"); parser.add_argument("n", type=int); parser.add_argument("precision")
parser.add_argument("flags", nargs="*", default=[], help="compile, only, first")
parser.add_argument("-v", action="store_true", help="the most frequent operators too")
parser.add_argument("--depth", type=int, default=48); parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()
if set(args.flags) - {"compile", "only", "first"}:
    parser.error(f"flags {args.flags}: expected compile, only, first")
root, n, prec = args.root, args.n, args.precision
do_compile = "compile" in args.flags
sys.path.insert(0, root)
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from suite.config import load_config
from suite.data import load_dataset, PackStream
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training
from suite.engine.pack import Pack
torch.set_num_threads(args.threads)
DEFAULT = {"data.name": "mnist5k", "model.patch_size": 7, "model.dim": 32, "model.heads": 2, "model.depth": args.depth,
           "model.residual": "layerscale", "train.steps": 160, "train.batch_size": args.batch, "train.warmup_steps": 20,
           "train.min_lr": 1e-6, "train.log_every": 10, "train.eval_every": 0, "device": "cpu",
           "train.precision": prec}
print(f"N={n} {prec}, depth {args.depth}, batch {args.batch}, {args.threads} thread(s); torch {torch.__version__}")
cfgs = [load_config(None, [f"{k}={v}" for k, v in {**DEFAULT, "seed": s, "train.lr": 1e-3 * (s + 1)}.items()]) for s in range(n)]
tmp = tempfile.mkdtemp()
members, data = [], None
for i, c in enumerate(cfgs):
    folder = RunFolder(c, f"{tmp}/{i}"); c, _ = folder.start(c)
    data = data or load_dataset(c.data)
    t = Training(c, folder, data, member=i); t.setup(); members.append(t)
t0 = time.perf_counter(); pack = Pack(members); print(f"Pack() {1e3*(time.perf_counter()-t0):.0f} ms")
batches = PackStream(data, args.batch, list(range(n)), "cpu", False, 1024, 0).batches(0, 160)

def step():
    if len(pack.log) == pack.log.values.shape[0]:
        for i in range(n): pack.log.read(i)
    x, y = next(batches)
    t = time.perf_counter(); pack.step(x, y); return time.perf_counter() - t

import collections
class Count(TorchDispatchMode):
    ops = 0
    views = 0
    by = collections.Counter()
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Count.ops += 1
        Count.views += bool(func.is_view)
        Count.by[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

if "first" not in args.flags:
  step()
  with Count():
    step()
  print(f"{root.split('/')[-1]} N={n} {prec}: {Count.ops} operators dispatched per eager step, {Count.ops - Count.views} not views")
if args.v: print(Count.by.most_common(25))
if not do_compile:
    ts = [step() for _ in range(12)]
    print(f"eager step {1e3*statistics.median(ts):.1f} ms")
    sys.exit()
from suite.engine.packstep import Program
import torch._inductor.config
if "only" not in args.flags:  # the profile below counts the compiled graph's kernels
    torch._inductor.config.cpp.enable_kernel_profile = True
eager, t0 = pack.program, time.perf_counter()
compiled = Program(pack.spec, "default")
pack.program = compiled
step(); step()
print(f"compile (first two steps) {time.perf_counter()-t0:.1f} s", flush=True)
import torch._inductor.config as ic
def profiled(label):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    top = [e for e in prof.events() if e.cpu_parent is None]
    inner = [e for e in prof.events() if e.cpu_parent is not None and e.cpu_parent.name.startswith("Torch-Compiled")
             or e.cpu_parent is not None and e.cpu_parent.name.startswith("## Call CompiledFxGraph")]
    names = collections.Counter(e.name for e in top)
    print(f"{label}: {len(top)} top-level profiler events per step; in the compiled graph {len(inner)}; most: {names.most_common(6)}", flush=True)
if "only" in args.flags:
    tc = [step() for _ in range(24)]
    print(f"compiled only: {1e3*statistics.median(tc):.1f} ms per step (24 steps)")
    sys.exit()
profiled("compiled")
pack.program = eager
profiled("eager")

te, tc = [], []
for r in range(6):
    pack.program = eager; te += [step() for _ in range(4)]
    pack.program = compiled; tc += [step() for _ in range(4)]
me, mc = statistics.median(te), statistics.median(tc)
print(f"eager {1e3*me:.1f} ms, compiled {1e3*mc:.1f} ms per step: compiled/eager = {mc/me:.2f} (24 steps each, interleaved)")
