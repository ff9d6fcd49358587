"""How to run a sweep: :class:`SweepOptions`, whose fields are ``suite run``'s flags, each described once (its own
module so that the backends can name it without importing :mod:`suite.sweep.sweep`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from suite.sweep.spec import MAX_RUNS


def _opt(default: Any = None, help: str | None = None, **flag: Any) -> Any:
    """A :class:`SweepOptions` field; with ``help`` a ``suite run`` flag too (argparse keywords, min, max, hidden)."""
    meta = {"help": help, **flag}
    if isinstance(default, list):
        return dataclasses.field(default_factory=list, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass
class SweepOptions:
    """How to run a sweep; ``suite run``'s flags are the fields with help (``--slurm-time`` is ``slurm_time``)."""

    backend: str = _opt("local", "the same workers as local processes, Ray tasks (pip install -e '.[ray]') or a Slurm "
                        "job array (pip install -e '.[slurm]'); docs/backends/", choices=["local", "ray", "slurm"])
    workers: int | None = _opt(None, "workers, each training one run (or pack) at a time (default: one per GPU, "
                               "else 1, locally; as many as fit on Ray; one per run up to "
                               "--slurm-array-parallelism on Slurm)", min=1)
    pack: int = _opt(1, "train up to N runs that differ only in seed (lr, weight decay, LayerScale init) as one "
                     "stacked model in one worker (torch.func; runs without drop-path)", min=1)
    runs_per_gpu: int | None = _opt(None, "runs sharing each GPU: K workers per GPU locally, num_gpus=1/K per Ray "
                                    "task (docs/backends/local.md: small models, CUDA MPS)", metavar="K", min=1)
    threads: int | None = _opt(None, "torch CPU threads per worker (default: cores // workers locally, else 1); "
                               "a Ray CPU task reserves this many CPUs", min=1, max=1024)
    device: str | None = _opt(None, "overrides every run's device", choices=["auto", "cpu", "cuda"])
    lease: float = _opt(600.0, "seconds: a run whose worker has not renewed its claim for this long is taken over "
                        "by another", aliases=["--slurm-lease"], min=1.0)
    attempts: int = _opt(3, "a run whose workers died N times is recorded as error", min=1)
    poll: float | None = _opt(None, "seconds between looks at the folder (default: 10 on a Slurm cluster, 0.5 elsewhere)",
                              hidden=True, aliases=["--slurm-poll"], min=0.1)
    ray_address: str | None = _opt(None, "Ray cluster to join, e.g. 10.0.0.1:6379 (default: start a private one; RAY_ADDRESS is ignored)",
                                   metavar="ADDR")
    ray_timeout: float = _opt(30.0, "give up connecting to Ray after this many seconds", min=0.1)
    slurm_partition: str | None = _opt(None, "partition to submit to (default: the cluster's)", metavar="NAME")
    slurm_time: int = _opt(240, "time limit of each worker job in minutes; a worker that reaches it checkpoints "
                           "its run and is requeued", metavar="MIN", min=1)
    slurm_gpus_per_job: int | None = _opt(None, "GPUs per worker (default: 1, or 0 with --device cpu; local "
                                          "cluster: 1 if this machine has one)", min=0)
    slurm_array_parallelism: int = _opt(64, "worker jobs running at once", min=1)
    slurm_opt: list[str] = _opt([], "any other sbatch option, passed as --KEY=VALUE, e.g. --slurm-opt "
                                "account=myproj --slurm-opt qos=low (repeat)", metavar="KEY=VALUE")
    slurm_detach: bool = _opt(False, "exit after submitting; `suite status DIR` watches, `suite run` again collects")
    slurm_cluster: str = _opt("slurm", "local: submitit's local executor, the same workers as processes on this "
                              "machine", choices=["slurm", "local"])
    slurm_signal_delay: int = 120  # seconds: SIGUSR2 this long before the time limit, time to checkpoint
    max_runs: int = _opt(MAX_RUNS, "refuse an ablation of more runs than this", min=1)
    dry_run: bool = _opt(False, "list the runs and their state; run nothing")
    only: list[str] = _opt([], "run a subset: key=value[,key=value] (comma = and; repeat --only = or); keys: variant, "
                           "seed or a dotted config key, e.g. --only variant=preln,model.depth=12", metavar="EXPR")
    retry_errors: bool = _opt(False, "rerun runs whose status is error")
    rerun_stale: bool = _opt(False, "rerun finished runs that another git commit of the suite made")
    kind: str = "train"  # or "propagation" (suite propagate)
    overrides: list[str] = _opt([])  # key=value set in every run as in the file's base (suite run's positionals)
