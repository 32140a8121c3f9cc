"""Do causal probing's verdicts survive reseeding? One model, the same sentences, the protocol (each run over
``--seeds`` seeds) from several base seeds; per task, eraser and layer the verdict from each base seed, and
whether they agree (the same verdict), differ by a step (used or not used against inconclusive) or contradict
each other (used against not used).

    $ python scripts/causal_base_seeds.py [--model bert-small] [--base-seed 0 --base-seed 1 --base-seed 2]
          [--out out/causal-base-seeds] [--jobs 2]

Each base seed runs ``python -m analyses.causal_probing`` into ``<out>/seed<b>/`` (a run whose result is there is
not repeated: interrupted, it resumes), one thread per process; writes ``<out>/base-seeds.md`` (the table) and
``<out>/base-seeds.json`` (the verdicts and the settings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402
from probes.io import atomic_text  # noqa: E402

METHODS = ("leace", "inlp")


@dataclass
class Config:
    """Causal probing of one model from several base seeds, on the same sentences."""

    model: str = arg("bert-small", "the model (a name of checkpoints.yaml)")
    base_seed: list[int] = arg([0, 1, 2], "base seeds (--seed of each run)", min=0)
    seeds: int = arg(3, "the protocol's seeds per run (--seeds)", min=1)
    task: list[str] = arg(["position", "token_identity", "sent_len"], "tasks")
    n_sentences: int = arg(400, "sentences (the same sample for every base seed)", min=2)
    max_items: int = arg(1500, "words per task and seed", min=2)
    jobs: int = arg(2, "runs at once, one thread each", min=1)
    out: str = arg("out/causal-base-seeds", "output folder")


@dataclass
class Row:
    """One task, eraser and layer: the verdict from each base seed and how they compare."""

    task: str
    method: str
    layer: int
    verdicts: list[str]  # in the order of the base seeds
    agreement: str  # "same", "a step apart" or "contradict"


def _run(cfg: Config, base: int) -> Path:
    folder = Path(cfg.out) / f"seed{base}"
    if not list((folder / "results" / "causal_probing").glob(f"{cfg.model}.json")):
        cmd = [sys.executable, "-m", "analyses.causal_probing", "--model", cfg.model, "--seed", str(base),
               "--seeds", str(cfg.seeds), "--n-sentences", str(cfg.n_sentences), "--max-items", str(cfg.max_items),
               "--out", str(folder)] + [x for t in cfg.task for x in ("--task", t)]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode:
            raise ProbeError(f"causal probing from base seed {base} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return folder


def agreement(verdicts: list[str]) -> str:
    if len(set(verdicts)) == 1:
        return "same"
    return "contradict" if {"used", "not used"} <= set(verdicts) else "a step apart"


def rows_of(cfg: Config, folders: list[Path]) -> list[Row]:
    from analyses import causal_probing
    from analyses.files import read_results

    results = []
    for folder in folders:
        found = [r for r in read_results(folder, "causal_probing") if r.model_name == cfg.model]
        if len(found) != 1:
            raise ProbeError(f"{folder}: no single causal probing result of {cfg.model}")
        results.append(found[0])
    rows = []
    for task in cfg.task:
        for m in METHODS:
            per_base = [causal_probing.verdicts(r, task, m) or {} for r in results]
            for layer in sorted(per_base[0]):
                v = [found.get(layer, "missing") for found in per_base]
                rows.append(Row(task, m, layer, v, agreement(v)))
    return rows


def markdown(cfg: Config, rows: list[Row]) -> str:
    head = " | ".join(f"base seed {b}" for b in cfg.base_seed)
    lines = [f"Causal probing of {cfg.model} from base seeds {cfg.base_seed} (each over {cfg.seeds} seeds; "
             f"{cfg.n_sentences} sentences, the same for every base seed; {cfg.max_items} words per task and seed)",
             "", f"| task | eraser | layer | {head} | |", "|---|---|---|" + "---|" * len(cfg.base_seed) + "---|"]
    lines += [f"| {r.task} | {r.method} | {r.layer} | " + " | ".join(r.verdicts) + f" | {r.agreement} |"
              for r in rows]
    counts = {k: sum(r.agreement == k for r in rows) for k in ("same", "a step apart", "contradict")}
    lines += ["", f"{len(rows)} rows: " + ", ".join(f"{v} {k}" for k, v in counts.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__)
    with ThreadPoolExecutor(cfg.jobs) as pool:
        folders = list(pool.map(lambda b: _run(cfg, b), cfg.base_seed))
    rows = rows_of(cfg, folders)
    out = Path(cfg.out)
    text = markdown(cfg, rows)
    doc = {"settings": asdict(cfg), "rows": [asdict(r) for r in rows]}
    atomic_text(out / "base-seeds.md", text)
    atomic_text(out / "base-seeds.json", json.dumps(doc, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    run_main(main)
