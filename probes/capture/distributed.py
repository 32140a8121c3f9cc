"""Several processes, one cache entry: the torch.distributed side of sharded extraction.

Launched by ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT),
an analysis runs in every process; :func:`probes.extract` then splits the chunks of a cache entry
(see probes.capture.activations) into contiguous runs, one per rank, each rank writes its own chunks into
the same ``<entry>.partial/`` folder, rank 0 checks every chunk's checksum, finalises the entry and
computes the result; the other ranks write no results (:func:`is_main`) and exit. Chunks are the
unit of work, so the numbers equal a one-process run's byte for byte (same threads per process).

The process group is created only when launched that way (WORLD_SIZE > 1 in the environment), on
first use: ``gloo`` on CPU, ``cpu:gloo,cuda:nccl`` on GPUs (only small Python objects travel
through it, on the CPU side; the states go through the cache folder, which must be one file
system all ranks see). ``--device cuda`` means ``cuda:LOCAL_RANK`` in each process.

    $ torchrun --standalone --nproc_per_node 2 -m analyses.anisotropy --model minilm-l6
"""

from __future__ import annotations

import atexit
import datetime
import os

# a rank waits for the others at the end of an extraction: as long as the slowest rank's share takes
TIMEOUT = datetime.timedelta(hours=float(os.environ.get("PROBES_DIST_TIMEOUT_HOURS", "6")))


def launched() -> bool:
    """Whether this process is one of several started by torchrun (WORLD_SIZE > 1)."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def rank() -> int:
    return int(os.environ["RANK"]) if launched() else 0


def world_size() -> int:
    return int(os.environ["WORLD_SIZE"]) if launched() else 1


def is_main() -> bool:
    """True in a one-process run and on rank 0: the process that writes results and figures."""
    return rank() == 0


def local_device(device: str) -> str:
    """The device this rank runs on: ``cuda`` (no index) is ``cuda:LOCAL_RANK`` under torchrun."""
    if launched() and device == "cuda":
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return device


def init(device: str) -> None:
    """Join the process group (once per process; a no-op when not launched by torchrun)."""
    import torch
    import torch.distributed as dist

    if not launched() or dist.is_initialized():
        return
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(local_device(device)))
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", timeout=TIMEOUT)
    atexit.register(lambda: dist.is_initialized() and dist.destroy_process_group())


def broadcast(obj):
    """Rank 0's ``obj`` on every rank (any picklable object)."""
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj) -> list:
    """Every rank's ``obj``, in rank order, on every rank."""
    import torch.distributed as dist

    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


def shard(n: int, r: int | None = None, size: int | None = None) -> range:
    """The contiguous run of ``range(n)`` that rank ``r`` of ``size`` works on (sizes differ by <= 1)."""
    r, size = rank() if r is None else r, world_size() if size is None else size
    return range(r * n // size, (r + 1) * n // size)
