"""The recipes' one training loop: device, bfloat16 autocast, several processes, gradient
accumulation and a resumable state, so that each recipe only says its data, model and loss.

    $ python -m recipes.train --arch bert --device cuda --batch-size 128 --steps 4000 --max-minutes 9
    $ python -m recipes.train --arch bert --device cuda --batch-size 128 --steps 4000 --max-minutes 9  # resumes
    $ torchrun --nproc_per_node 2 -m recipes.train --arch bert --batch-size 128 --grad-accum 2

**A step.** The global batch of ``batch_size`` examples is cut into ``world_size`` contiguous parts
(rank r takes the r-th), and each part into ``grad_accum`` micro-batches. A micro-batch's loss is
its SUM over scored tokens divided by the scored tokens of the whole global batch, so the gradients
summed over micro-batches and ranks are the gradient of the global batch's mean loss: the same
optimiser step as one process with one micro-batch, up to float rounding (summation order).
Gradients are summed across ranks with one ``all_reduce`` of a flat buffer (gloo on CPU, nccl on
CUDA); ranks hold identical weights because they start from the same seed and apply the same
update. Every rank draws the whole global batch (the same seeded data order and masking) and keeps
its rows, so the data a run sees does not depend on the number of processes.

**Precision.** ``--amp auto`` is bfloat16 autocast on CUDA and float32 elsewhere; the master
weights, the optimiser state and the loss reduction stay float32.

**Resuming.** Rank 0 writes ``state.pt`` (weights, optimiser, schedule, step, the data and masking
random states, the loss log so far) into the run's state folder every ``--save-every`` steps and
when ``--max-minutes`` have passed, atomically (:func:`probes.io.atomic_path`). Then the run stops
with exit status 75 (EX_TEMPFAIL) and the message to run the same command again; that command
continues from the saved step, bit for bit on the same machine (the states are read with
``torch.load(weights_only=True)``). A state written under another config is refused with one line,
except for the fields that only say how the run is carried out (``RESUMABLE_CHANGES``), and so is a
state of another layout (``STATE_FORMAT``). When the recipe has written its final folder the state
folder is removed.

**Snapshots.** With ``--snapshots`` the run also keeps the model as it is after the steps of
:data:`SNAPSHOT_FRACTIONS` of training (1/32, 1/16, ..., 1/2 of the steps, then 3/4 and the end), each a
complete, loadable model folder ``<snapshot-dir>/step-NNNNNNN/`` written atomically by the recipe's own
writer, with ``snapshot.json`` (the step, the steps, the tokens seen, the run's name and seed). Such a folder
of step folders is a checkpoint series (:mod:`probes.series`): any analysis runs along it. Writing a
snapshot reads the weights and draws no random numbers, so a run with snapshots trains the same model as
one without; a resumed run keeps the snapshots already written. A series folder that holds snapshots of another
run (the default folder is named after the output, wherever ``--out-dir`` is) is refused, or, with
``--overwrite``, emptied first (:func:`check_series`).

**Processes.** The process group is :mod:`probes.capture.distributed`'s (the one the extractions use):
joined when torchrun started the run, ``cuda`` meaning ``cuda:LOCAL_RANK`` in each process.

**Output.** A recipe writes its folder once, at the end, with :func:`probes.io.write_folder`. Before it
trains, :func:`check_output` refuses a folder this recipe did not write, and one it did write unless
``--overwrite`` is given: a committed checkpoint is never replaced by a run that did not ask to.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from probes.capture import distributed
from probes.checkpoints.registry import SAFE_NAME
from probes.config import arg, check_device
from probes.errors import ProbeError
from probes.io import atomic_path, write_folder
from probes.io import provenance as io_provenance

PAUSED_EXIT = 75  # EX_TEMPFAIL: the run saved its state and stopped; the same command resumes it
# Config fields that may differ between a saved state and the command that resumes it.
RESUMABLE_CHANGES = frozenset({"max_minutes", "save_every", "progress", "resume", "threads", "device", "overwrite",
                               "snapshots", "snapshot_dir"})
STATE_FORMAT = 2  # the layout of state.pt; 2: numeric loss-log rows (formatted when the log is written)
# When --snapshots keeps the model, as fractions of the run's steps: log-spaced (each twice the one before) from
# 1/32 to the end, and 3/4, so that the last half of training has three points (docs/definitions.md, "over
# training", reads them).
SNAPSHOT_FRACTIONS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 1)
SNAPSHOT_RECORD = "snapshot.json"  # in each snapshot folder: step, steps, tokens, name, seed


@dataclass
class ScaleConfig:
    """How a training run is carried out: device, precision, accumulation, pieces, and whether it may replace
    its own earlier output."""

    device: str = arg("cpu", "torch device: cpu, cuda, cuda:N, mps or auto; under torchrun each rank takes "
                             "cuda:LOCAL_RANK")
    amp: str = arg("auto", "autocast dtype of the forward pass: auto (bfloat16 on CUDA, else float32), "
                           "bfloat16 or float32", choices=("auto", "bfloat16", "float32"))
    grad_accum: int = arg(1, "micro-batches per optimiser step on each process (the batch is split)", min=1)
    save_every: int = arg(500, "write the resumable state every this many steps (0 = only when pausing)", min=0)
    max_minutes: float = arg(0.0, "save the state and stop (exit 75) after this many minutes; 0 = no limit; "
                                  "the same command resumes", min=0.0)
    resume: bool = arg(True, "continue from the run's saved state if there is one (--no-resume: start over)")
    overwrite: bool = arg(False, "replace an existing model folder this recipe wrote (without it, an existing "
                                 "output folder is an error)")
    snapshots: bool = arg(False, "also keep the model after 1/32, 1/16, 1/8, 1/4, 1/2, 3/4 and all of the steps, each "
                                 "a loadable folder <snapshot-dir>/step-NNNNNNN (a checkpoint series)")
    snapshot_dir: str = arg("", "the series folder --snapshots writes (default: out/train/series/<output name>)")


class Paused(SystemExit):
    """Raised after the state is saved at ``--max-minutes``: exit status 75, one line on stderr."""

    def __init__(self, step: int, steps: int, state: Path):
        print(f"paused at step {step}/{steps}: state saved in {state}; run the same command again to resume",
              file=sys.stderr)
        super().__init__(PAUSED_EXIT)


def setup_processes(device: str) -> tuple[int, int, str]:
    """(rank, world size, device). Under torchrun (:func:`probes.capture.distributed.launched`) the process
    group is joined (:func:`probes.capture.distributed.init`) and a CUDA run takes ``cuda:LOCAL_RANK``."""
    dev = check_device(device)
    if not distributed.launched():
        return 0, 1, dev
    if dev.startswith("cuda"):
        dev = distributed.local_device("cuda")
    distributed.init(dev)
    return distributed.rank(), distributed.world_size(), dev


def _joined() -> bool:
    """Whether this process is one of several in a live process group (not after :meth:`Loop.finish`)."""
    return distributed.launched() and torch.distributed.is_initialized()


class Loop:
    """The mechanics around a recipe's loss: see the module docstring.

    ``config`` is the recipe's whole config, a :class:`ScaleConfig` (kept as ``scale``: the loop reads its
    ScaleConfig fields, and saves all of it with the state to compare on resume); ``state_dir`` the run's
    state folder (:func:`state_dir`). ``rows`` is the recipe's loss log (plain numbers: the state is read
    back with ``weights_only=True``).
    ``trained_only``: the state holds only the parameters that train (a frozen base model is not
    copied into every saved state; it is rebuilt from its own checkpoint)."""

    def __init__(self, model: torch.nn.Module, opt, sched, *, config, steps: int, clip: float, state_dir: Path,
                 trained_only: bool = False):
        self.scale = config
        self.rank, self.world, self.device = setup_processes(config.device)
        self.is_main = self.rank == 0
        self.model = model.to(self.device)
        self.opt, self.sched, self.steps, self.clip = opt, sched, steps, clip
        self.state_dir = Path(state_dir)
        # "auto" resolved: "bfloat16" or "float32"
        self.amp = config.amp if config.amp != "auto" else ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.amp_dtype = None if self.amp == "float32" else getattr(torch, self.amp)
        self.t0 = time.monotonic()
        self.params = [p for p in {id(p): p for p in model.parameters()}.values() if p.requires_grad]
        self.trained_only = trained_only
        self._trained_names = {n for n, p in model.named_parameters() if p.requires_grad}
        self.rows: list[dict]  # the loss rows, one per step
        self.extra: dict  # what restore() read beside the model's state
        self.start_step, self.rows, self.extra = 0, [], {}

    # ------------------------------------------------------------------ batches

    def micro_slices(self, n: int) -> list[slice]:
        """The rows of a global batch of ``n`` that this rank uses, one slice per micro-batch."""
        parts = self.world * self.scale.grad_accum
        if n % parts:
            raise ProbeError(f"--batch-size {n} must be divisible by processes x --grad-accum ({parts})")
        m = n // parts
        first = self.rank * self.scale.grad_accum
        return [slice((first + i) * m, (first + i + 1) * m) for i in range(self.scale.grad_accum)]

    def autocast(self):
        """The forward pass's autocast context (a no-op in float32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=self.amp_dtype)

    @property
    def compute_dtype(self) -> str:
        """The forward pass's precision, for a run's record: "bfloat16 autocast" or "float32"."""
        return f"{self.amp} autocast" if self.amp_dtype else "float32"

    # ------------------------------------------------------------------ one step

    def backward(self, loss: torch.Tensor) -> float:
        """Backpropagate one micro-batch's (already normalised) loss; returns its value."""
        if not torch.isfinite(loss):
            raise ProbeError(f"the loss became {loss.item()}; lower --lr")
        loss.backward()
        return float(loss.detach())

    def step(self, local_loss: float) -> float:
        """Sum the gradients over ranks, clip, apply the optimiser and the schedule; returns the
        global batch's loss (the sum of every rank's micro-batch losses)."""
        if _joined():
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
            flat = torch.cat([g.reshape(-1) for g in grads]).float()
            flat = torch.cat([flat, torch.tensor([local_loss], device=flat.device)])
            torch.distributed.all_reduce(flat)
            local_loss = float(flat[-1])
            offset = 0
            for p, g in zip(self.params, grads):
                p.grad = flat[offset:offset + g.numel()].view_as(p).to(p.dtype)
                offset += g.numel()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        return local_loss

    # ------------------------------------------------------------------ state

    @property
    def state_path(self) -> Path:
        return self.state_dir / "state.pt"

    def restore(self) -> dict:
        """Load the saved state if there is one (and ``resume``); returns the recipe's extra dict
        (its random states), empty when starting fresh. Sets ``start_step`` and ``rows``."""
        if not self.scale.resume:  # only the saved step goes: a recipe may keep more in the folder (its tokenizer)
            if self.is_main:
                self.state_path.unlink(missing_ok=True)
            self.barrier()
            return {}
        if not self.state_path.exists():
            return {}
        try:
            state = torch.load(self.state_path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable state is one line, not a traceback
            raise ProbeError(f"resumable state {self.state_path} is unreadable ({type(e).__name__}); "
                             f"delete it or pass --no-resume") from None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ProbeError(f"resumable state {self.state_path} was written by another version of the recipe; "
                             f"pass --no-resume to start over")
        saved = {k: v for k, v in state["config"].items() if k not in RESUMABLE_CHANGES}
        now = {k: v for k, v in asdict(self.scale).items() if k not in RESUMABLE_CHANGES}
        if saved != now:
            diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
            raise ProbeError(f"resumable state {self.state_path} was written with other settings ({', '.join(diff)});"
                             f" run the same command, or pass --no-resume to start over")
        if self.trained_only:
            if set(state["model"]) != self._trained_names:
                raise ProbeError(f"resumable state {self.state_path} holds other trained parameters than this "
                                 f"run's; run the same command, or pass --no-resume to start over")
            self.model.load_state_dict(state["model"], strict=False)
        else:
            self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        self.start_step, self.rows = int(state["step"]), list(state["rows"])
        if self.is_main:
            print(f"resuming from step {self.start_step}/{self.steps} ({self.state_path})", file=sys.stderr)
        return dict(state["extra"])

    def save(self, step: int, extra: dict) -> None:
        """Write the resumable state after ``step`` (rank 0; atomic)."""
        if self.is_main:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            weights = self.model.state_dict()
            if self.trained_only:
                weights = {k: v for k, v in weights.items() if k in self._trained_names}
            state = {"format": STATE_FORMAT, "config": asdict(self.scale), "step": step, "model": weights,
                     "opt": self.opt.state_dict(), "sched": self.sched.state_dict(), "rows": self.rows,
                     "extra": extra}
            with atomic_path(self.state_path) as tmp:
                torch.save(state, tmp)
        self.barrier()

    def after_step(self, step: int, extra_fn) -> None:
        """Save every ``save_every`` steps; at ``max_minutes`` save and stop (:class:`Paused`).
        ``extra_fn()`` gives the recipe's random states (called only when saving)."""
        if step >= self.steps:
            return
        late = self.scale.max_minutes > 0 and time.monotonic() - self.t0 > self.scale.max_minutes * 60
        if _joined():  # every rank stops at the same step
            flag = torch.tensor([float(late)], device=self.device if self.device.startswith("cuda") else "cpu")
            torch.distributed.all_reduce(flag)
            late = bool(flag.item())
        if late or (self.scale.save_every and step % self.scale.save_every == 0):
            self.save(step, extra_fn())
        if late:
            raise Paused(step, self.steps, self.state_dir)

    def barrier(self) -> None:
        if _joined():
            distributed.barrier()

    def finish(self) -> None:
        """After the recipe wrote its final folder: remove the state, end the process group."""
        if self.is_main:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if _joined():
            distributed.barrier()
            torch.distributed.destroy_process_group()


def snapshot_steps(steps: int) -> list[int]:
    """The steps after which ``--snapshots`` keeps the model: :data:`SNAPSHOT_FRACTIONS` of ``steps``, rounded,
    at least step 1, each once (a short run has fewer)."""
    return sorted({max(1, round(steps * f)) for f in SNAPSHOT_FRACTIONS})


def series_dir(config, out: str | Path) -> Path:
    """Where a run's snapshots go: ``--snapshot-dir``, else ``out/train/series/<name of the output folder>``."""
    return Path(config.snapshot_dir) if config.snapshot_dir else Path("out/train/series") / Path(out).name


def write_snapshot(loop: Loop, step: int, out: str | Path, write, record: dict) -> Path | None:
    """If ``--snapshots`` is on and ``step`` is a snapshot step: rank 0 writes the model folder
    ``<series>/step-NNNNNNN`` with ``write(tmp)`` (the recipe's own writer) and ``snapshot.json`` (``record``
    plus the step, the steps and the fraction), atomically; returns the folder (None when no snapshot)."""
    if not loop.scale.snapshots or step not in snapshot_steps(loop.steps):
        return None
    dest = series_dir(loop.scale, out) / f"step-{step:07d}"
    if loop.is_main:
        def fill(tmp: Path) -> None:
            write(tmp)
            doc = {**record, "step": step, "steps": loop.steps, "fraction": step / loop.steps}
            (tmp / SNAPSHOT_RECORD).write_text(json.dumps(doc, indent=1) + "\n")

        write_folder(dest, fill)
    loop.barrier()
    return dest


def state_dir(out: str | Path) -> Path:
    """The resumable state folder of a run whose result goes to ``out``: ``.<name>.state`` beside it
    (hidden; ``checkpoints/.*.state/`` is git-ignored)."""
    out = Path(out)
    return out.with_name(f".{out.name}.state")


OWN_RECORDS = {"recipes.train": "train_config.json", "recipes.train_lm": "training_config.json",
               "recipes.train_recurrent": "training_config.json"}  # the record each recipe writes into its folder


def check_name(name: str, flag: str = "--name") -> None:
    """One line unless ``name`` is one safe folder name (it is joined to --out-dir: ``../x`` would escape it)."""
    if not SAFE_NAME.fullmatch(name) or ".." in name or len(name) > 100:  # one path component, as model names
        raise ProbeError(f"{flag} {name!r}: a checkpoint name is one folder name of letters, digits, '.', '_' and "
                         f"'-' (at most 100, no '..'), written inside the output folder")


def check_replaceable(dest: str | Path, recipe: str) -> None:
    """Refuse to write over ``dest`` unless it is absent, an empty folder, or a folder ``recipe`` wrote (it holds
    that recipe's record, OWN_RECORDS): a rerun replaces its own checkpoint, never a folder of anything else."""
    dest, record = Path(dest), OWN_RECORDS[recipe]
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ProbeError(f"{dest} exists and is not a folder: choose another output name")
    if not dest.is_dir() or not any(dest.iterdir()):
        return
    try:
        doc = json.loads((dest / record).read_text(encoding="utf-8"))
        own = isinstance(doc, dict) and recipe in str(doc.get("command", doc.get("recipe", "")))
    except (OSError, ValueError):
        own = False
    if not own:
        raise ProbeError(f"{dest} is not empty and was not written by {recipe} (no {record} of it): nothing "
                         f"replaced; choose another output folder or move it away yourself")


def check_output(dest: str | Path, recipe: str, cfg: ScaleConfig) -> None:
    """Before training: refuse ``dest`` if it holds anything but an earlier output of ``recipe``
    (:func:`check_replaceable`), and that too unless ``--overwrite``: a run never replaces a model folder
    (a committed checkpoint, a user's trained model) unless it was asked to. With ``--snapshots``, the same for
    the series folder (:func:`check_series`)."""
    check_replaceable(dest, recipe)
    dest = Path(dest)
    if not cfg.overwrite and dest.is_dir() and any(dest.iterdir()):
        raise ProbeError(f"{dest} already holds a model trained by {recipe}: pass --overwrite to replace it, "
                         f"or choose another output folder")
    check_series(cfg, dest)


def check_series(cfg: ScaleConfig, out: str | Path) -> None:
    """With ``--snapshots``: a series folder that already holds snapshots is another run's (its series default
    does not follow ``--out-dir``: a second run of the same name elsewhere would write over the first one's
    series), unless this run resumes (its saved state is there; it keeps its own snapshots). Refused with one line;
    with ``--overwrite`` the old snapshots are removed first, so the series never mixes two runs."""
    if not cfg.snapshots:
        return
    series = series_dir(cfg, out)
    old = sorted(p for p in series.glob("step-*") if (p / SNAPSHOT_RECORD).is_file()) if series.is_dir() else []
    if not old or (cfg.resume and (state_dir(out) / "state.pt").is_file()):
        return
    if not cfg.overwrite:
        raise ProbeError(f"{series} already holds the snapshots of another run ({old[0].name}, ...): pass "
                         f"--snapshot-dir for this run's series, or --overwrite to replace them")
    for folder in old:
        shutil.rmtree(folder, ignore_errors=True)  # every rank may: a folder removed twice is no error


def warmup_cosine(warmup: int, steps: int, min_ratio: float = 0.1):
    """The causal-LM recipes' learning-rate factor (``LambdaLR``): linear warm-up from 1/warmup,
    then cosine down to ``min_ratio`` at ``steps``. (transformers' cosine schedule starts its warm-up
    at 0 and ends at 0, which would not reproduce the committed GPT-2 checkpoints.)"""
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))
    return f


def provenance() -> dict:
    """:func:`probes.io.provenance` (Python and package versions) plus the machine and the thread count, for a
    run's record."""
    import platform

    return {**io_provenance(), "machine": platform.machine(), "torch_threads": torch.get_num_threads()}


def run_command(module: str) -> str:
    """The command line that started this run (``torchrun --nproc_per_node N -m`` under torchrun),
    for the record in a recipe's output."""
    launcher = f"torchrun --nproc_per_node {os.environ['WORLD_SIZE']} -m" if "WORLD_SIZE" in os.environ \
        else "python -m"
    return " ".join([launcher, module, *sys.argv[1:]])
