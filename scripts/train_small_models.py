"""Train the suite's small models on one GPU: every run of the recipes at once, in resumable pieces.

The committed small models (checkpoints/README.md) are the output of this script: the eight
masked-LM encoders of one recipe (``recipes.train``: S-LSTM, BERT-style, ALBERT-style and the five
Graph-Transformer variants, same width, depth, data, masking, optimiser and steps) and the GPT-2
pair (``recipes.train_lm``: pretraining, then fine-tuning without and with the recurrence). Each
run is one process of its recipe; the runs of a group share the GPU concurrently (the models are
too small to fill it one at a time). A run that reaches ``--minutes`` saves its state and stops
(exit 75); the same command resumes it.

    $ python scripts/train_small_models.py probe --group all            # seconds per step of each run
    $ python scripts/train_small_models.py train --group A --steps 3000  # slstm, bert, albert, mog-small + GPT-2
    $ python scripts/train_small_models.py train --group B --steps 3000  # the other four MoG variants
    $ python scripts/train_small_models.py train --group all --device cpu --amp bfloat16 --threads 1 \\
          --lanes 2 --batch-size 32 --steps 300 --gpt2-scale 10         # 10x on a 2-core CPU, two runs at a time
    $ python scripts/train_small_models.py train ... --seed 2 --snapshots   # <model>-seed2 folders, with their series

``--steps`` is the masked-LM recipe's step count for every encoder (the same for all, as the
comparison requires); the GPT-2 stages have their own fixed sizes below (100x the first
checkpoints' tokens). The exact command of every run is printed and saved in its folder's
``train_config.json`` / ``training_config.json``.

Every run is told where to write (``--out-dir`` / ``--out``, ``checkpoints`` by default) and ``--overwrite``:
the recipes alone never replace an existing model folder, and this script retrains exactly the runs whose
folder does not record the settings asked for (:func:`done`), so it is what replaces the committed models.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

# The masked-LM runs: checkpoint name -> the flags that make it differ from the shared recipe.
ENCODERS = {
    "slstm-small": ["--arch", "slstm"],
    "bert-small": ["--arch", "bert"],
    "albert-small": ["--arch", "albert"],
    "mog-small": ["--arch", "mog", "--fusion", "weight-gate", "--half-dim"],
    "mog-small-sum": ["--arch", "mog", "--fusion", "sum"],
    "mog-small-selfgate": ["--arch", "mog", "--fusion", "self-gate"],
    "mog-small-wg": ["--arch", "mog", "--fusion", "weight-gate"],
    "mog-small-6l": ["--arch", "mog", "--fusion", "weight-gate", "--half-dim", "--layers", "6"],
}
GROUPS = {"A": ["slstm-small", "bert-small", "albert-small", "mog-small"],
          "B": ["mog-small-sum", "mog-small-selfgate", "mog-small-wg", "mog-small-6l"]}
# The order of importance: the S-LSTM paper's comparison, then the MoG models the demo draws.
GROUPS["all"] = ["slstm-small", "bert-small", "albert-small", "mog-small", "mog-small-6l", "mog-small-wg",
                 "mog-small-sum", "mog-small-selfgate"]
# GPT-2 pair at 10x / 100x the first checkpoints' tokens (pretraining 300 x 16 x 128 = 0.61 M, fine-tuning
# 300 x 4 x 512 = 0.61 M): 100x = pretraining 1,900 x 256 x 128 = 62 M, fine-tuning 1,875 x 64 x 512 = 61 M;
# 10x = 1,500 x 32 x 128 = 6.1 M and 750 x 16 x 512 = 6.1 M; warm-up 10% of the steps, as before.
GPT2_PRETRAIN = {100: ["--steps", "1900", "--batch-size", "256", "--warmup", "190"],
                 10: ["--steps", "1500", "--batch-size", "32", "--warmup", "150"]}
GPT2_FINETUNE = {100: ["--steps", "1875", "--batch-size", "64", "--warmup", "125"],
                 10: ["--steps", "750", "--batch-size", "16", "--warmup", "75"]}


@dataclass
class Config:
    """Run the small models' recipes concurrently on one device."""

    action: str = arg("train", "probe (time a few steps of each run) or train", choices=("probe", "train"),
                      positional=True)
    group: str = arg("A", "which runs: A (slstm, bert, albert, mog-small and the GPT-2 pair), B (the other "
                          "MoG variants) or all", choices=("A", "B", "all"))
    steps: int = arg(3000, "masked-LM steps of every encoder", min=1)
    batch_size: int = arg(128, "masked-LM blocks per step", min=1)
    corpus: str = arg("data/train-corpus", "training corpus (built by `make train-corpus`)")
    out_dir: str = arg("checkpoints", "where the finished folders go")
    device: str = arg("cuda", "torch device of every run")
    amp: str = arg("auto", "autocast of every run: auto (bfloat16 on CUDA), bfloat16 (also fast on CPUs with "
                           "bfloat16 instructions) or float32", choices=("auto", "bfloat16", "float32"))
    threads: int = arg(2, "torch threads of every run", min=1)
    lanes: int = arg(0, "runs at once (0 = all of the group); the rest wait in the group's order", min=0)
    eval_blocks: int = arg(512, "held-out blocks scored by every evaluation (0 = all)", min=0)
    gpt2_scale: int = arg(100, "GPT-2 pair's tokens as a multiple of the first checkpoints' (10 or 100)",
                          choices=(10, 100))
    minutes: float = arg(0.0, "each run saves its state and stops after this many minutes (0 = no limit)", min=0.0)
    probe_steps: int = arg(20, "steps of each run in `probe`", min=6)
    gpt2: bool = arg(True, "include the GPT-2 pair in group A")
    seed: int = arg(0, "the seed of every run (initialisation, data order, masking); a seed above 0 names each folder "
                       "<model>-seed<seed> and its own pretrained GPT-2", min=0)
    snapshots: bool = arg(False, "every run also keeps its model at 1/32 ... 3/4 and all of training "
                                 "(out/train/series/<folder>/): the checkpoint series make trajectories reads")
    logs: str = arg("out/train-logs", "one log file per run")


def seeded(name: str, cfg: Config) -> str:
    """The folder name of ``name``'s run with ``cfg.seed`` (seed 0: the plain name)."""
    return f"{name}-seed{cfg.seed}" if cfg.seed else name


def run_flags(cfg: Config) -> list[str]:
    """The flags every recipe command gets from the seed and the snapshots."""
    return [*(["--seed", str(cfg.seed)] if cfg.seed else []), *(["--snapshots"] if cfg.snapshots else [])]


def encoder_command(name: str, cfg: Config, steps: int, out_dir: str) -> list[str]:
    warmup = max(1, steps // 10)  # the first recipe's ratio (15 of 150)
    evals = steps // 10 if cfg.action == "train" else 0  # ten held-out evaluations along the way
    return [sys.executable, "-m", "recipes.train", *ENCODERS[name], "--name", seeded(name, cfg), "--out-dir", out_dir,
            "--overwrite", *run_flags(cfg),
            "--corpus", cfg.corpus, "--tokenizer", "checkpoints/wordpiece-4096", "--steps", str(steps),
            "--warmup", str(warmup), "--batch-size", str(cfg.batch_size), "--device", cfg.device,
            "--amp", cfg.amp, "--threads", str(cfg.threads), "--log-every", "1", "--eval-every", str(evals),
            "--eval-blocks", str(cfg.eval_blocks),
            "--max-minutes", str(cfg.minutes), "--save-every", str(max(1, steps // 6))]


def gpt2_stages(cfg: Config, steps_override: int | None, out_dir: str) -> list[list[str]]:
    """The three GPT-2 commands: pretraining, then the two fine-tunes of its result."""
    def sized(args):
        return ["--steps", str(steps_override), "--batch-size", args[3], "--warmup", "1"] if steps_override else args
    py = sys.executable
    common = ["--corpus", cfg.corpus, "--device", cfg.device, "--amp", cfg.amp, "--threads", str(cfg.threads),
              "--max-minutes", str(cfg.minutes), "--save-every", "100", "--overwrite",
              *(["--seed", str(cfg.seed)] if cfg.seed else [])]
    # the intermediate model is not committed; a probe keeps its own beside its other runs
    pre = f"out/train/{seeded('gpt2-small-pretrained', cfg)}" if cfg.action == "train" \
        else f"{out_dir}/{seeded('gpt2-small-pretrained', cfg)}"
    stage1 = [py, "-m", "recipes.train_lm", "pretrain", "--out", pre, *sized(GPT2_PRETRAIN[cfg.gpt2_scale]), *common]
    snap = ["--snapshots"] if cfg.snapshots else []  # the claims compare the fine-tunes: their course is kept
    base = [py, "-m", "recipes.train_lm", "finetune", "--init", pre, "--out",
            f"{out_dir}/{seeded('gpt2-small-base', cfg)}", *sized(GPT2_FINETUNE[cfg.gpt2_scale]), *common, *snap]
    rec = [py, "-m", "recipes.train_lm", "finetune", "--init", pre, "--out",
           f"{out_dir}/{seeded('gpt2-small-recurrent', cfg)}", "--recurrent", *sized(GPT2_FINETUNE[cfg.gpt2_scale]),
           *common, *snap]
    return [stage1, base, rec]


# Flags that change how a run is executed, not what it computes: a finished run is not redone for them.
OPERATIONAL = {"device", "threads", "max_minutes", "save_every", "log_every", "resume", "progress", "overwrite",
               "snapshots", "snapshot_dir"}


def command_settings(cmd: list[str]) -> dict[str, str]:
    """The ``--flag value`` pairs of a recipe command as config fields (``--half-dim`` -> half_dim: True)."""
    out, i = {}, cmd.index("-m") + 2
    while i < len(cmd):
        if cmd[i].startswith("--"):
            key = cmd[i][2:].replace("-", "_")
            if i + 1 < len(cmd) and not cmd[i + 1].startswith("--"):
                out[key], i = cmd[i + 1], i + 2
                continue
            out[key[3:] if key.startswith("no_") else key] = str(not key.startswith("no_"))
        i += 1
    return {k: v for k, v in out.items() if k not in OPERATIONAL}


def done(folder: Path, cmd: list[str]) -> bool:
    """Whether ``folder`` holds a finished run of ``cmd``'s settings: every setting the command gives
    equals the one recorded in the folder's config (an older or differently made checkpoint is retrained)."""
    for name in ("train_config.json", "training_config.json"):
        try:
            recorded = json.loads((folder / name).read_text())["config"]
            break
        except (OSError, ValueError, KeyError):
            continue
    else:
        return False
    return all(k in recorded and str(recorded[k]) == v for k, v in command_settings(cmd).items())


def stage_done(cmd: list[str]) -> bool:
    """:func:`done` for a GPT-2 stage, whose folder is its ``--out``."""
    return done(Path(cmd[cmd.index("--out") + 1]), cmd)


def run_gpt2(stages: list[list[str]], log) -> int:
    """Pretraining, then both fine-tunes at once. A stage whose folder holds its settings is skipped,
    and so is the pretraining when both fine-tunes are done (a fresh checkout has the committed pair
    but not the intermediate model)."""
    pretrain, *finetunes = stages
    todo = [c for c in finetunes if not stage_done(c)]
    if not todo:
        return 0
    if not stage_done(pretrain):
        code = subprocess.run(pretrain, stdout=log, stderr=subprocess.STDOUT).returncode
        if code:
            return code
    procs = [subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT) for c in todo]
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c not in (0, 75)), max(codes))


def launch(cfg: Config, steps: int, out_dir: str) -> dict[str, int]:
    """Run the group's commands, ``cfg.lanes`` at a time (all at once with 0), in the group's order;
    the GPT-2 chain is queued after the encoders of group A / all."""
    from concurrent.futures import ThreadPoolExecutor

    logs = Path(cfg.logs)
    logs.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in GROUPS[cfg.group]:
        cmd = encoder_command(name, cfg, steps, out_dir)
        if cfg.action == "train" and done(Path(out_dir) / seeded(name, cfg), cmd):
            print(f"{seeded(name, cfg)}: done already ({out_dir}/{seeded(name, cfg)})", flush=True)
            continue
        jobs.append((seeded(name, cfg), cmd))
    if cfg.gpt2 and cfg.group in ("A", "all"):
        stages = gpt2_stages(cfg, steps if cfg.action == "probe" else None, out_dir)
        if cfg.action == "train" and all(map(stage_done, stages[1:])):
            print(f"gpt2: done already ({out_dir}/gpt2-small-base, {out_dir}/gpt2-small-recurrent)", flush=True)
        else:
            jobs.append(("gpt2", stages))

    def run(job):
        name, cmd = job
        shown = [" ".join(c) for c in (cmd if name == "gpt2" else [cmd])]
        print(f"{time.strftime('%H:%M:%S')} start {name}: $", "\n  $ ".join(shown).replace(sys.executable, "python"),
              flush=True)
        with open(logs / f"{name}.log", "a") as log:
            if name == "gpt2":
                code = run_gpt2(cmd, log)
            else:
                code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"{time.strftime('%H:%M:%S')} end {name}: exit {code}", flush=True)
        return name, code

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=cfg.lanes or len(jobs) or 1) as pool:
        codes = dict(pool.map(run, jobs))
    print(f"wall {time.time() - t0:.0f} s; exit codes {codes}", flush=True)
    return codes


def seconds_per_step(folder: Path) -> float:
    """Median-free estimate: time from step 5 to the last step of a probe's log, per step."""
    with open(folder / "train_log.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["seconds"]]
    a, b = rows[4], rows[-1]
    return (float(b["seconds"]) - float(a["seconds"])) / (int(b["step"]) - int(a["step"]))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    if not Path(cfg.corpus).is_dir():
        raise ProbeError(f"no training corpus at {cfg.corpus}: run `make train-corpus` first")
    if cfg.action == "probe":
        out = str(Path(cfg.logs).parent / "probe-runs")
        codes = launch(cfg, cfg.probe_steps, out)
        times = {seeded(n, cfg): round(seconds_per_step(Path(out) / seeded(n, cfg)), 4) for n in GROUPS[cfg.group]
                 if codes[seeded(n, cfg)] == 0}
        print(json.dumps({"seconds_per_step": times, "concurrent_runs": len(codes)}), flush=True)
        return
    codes = launch(cfg, cfg.steps, cfg.out_dir)
    if any(c not in (0, 75) for c in codes.values()):
        raise ProbeError(f"a run failed: {codes} (see {cfg.logs}/)")
    if any(c == 75 for c in codes.values()):
        sys.exit(75)


if __name__ == "__main__":
    run_main(main)
