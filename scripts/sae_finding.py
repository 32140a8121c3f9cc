"""The S-LSTM against its BERT- and ALBERT-style baselines through sparse autoencoders (a finding of ours, not a
paper's claim; :mod:`analyses.sae.finding` says what is compared and how the verdict is made).

Trains one TopK SAE (the same k and width for every model: equal L0) per chosen layer of each of the nine models
(slstm-small, bert-small, albert-small and their -seed1, -seed2 variants) on the default corpus's sentence sample
with ``python -m analyses.sae`` (held-out statistics with bootstrap intervals, the SAE spliced into the model's own
MLM loss), then writes the finding: ``<docs>/sae-slstm-vs-baselines.json`` (every model's numbers and the
comparisons with their verdicts) and ``.png`` (the figure). ``--skip-training`` reuses the results already under
``--out``. The committed files come from the small defaults below (CPU, about 25 minutes on a busy 2-core machine);
rerun it larger with more sentences and steps.

    $ OMP_NUM_THREADS=1 python scripts/sae_finding.py --out out/sae-finding [--n-sentences 400 --steps 400 --k 16
          --width 1024 --layers 1 2 3 4] [--docs docs] [--skip-training]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = [f"{m}{s}" for m in ("slstm-small", "bert-small", "albert-small") for s in ("", "-seed1", "-seed2")]
NAME = "sae-slstm-vs-baselines"


def sae_command(args: argparse.Namespace) -> list[str]:
    """The ``python -m analyses.sae`` command line that trains and evaluates every model's SAEs."""
    cmd = [sys.executable, "-m", "analyses.sae", "--n-sentences", str(args.n_sentences), "--kind", "topk",
           "--k", str(args.k), "--width", str(args.width), "--steps", str(args.steps), "--tokens-per-step",
           str(args.tokens_per_step), "--held-out", str(args.held_out), "--resamples", str(args.resamples),
           "--no-save", "--no-figures", "--out", str(args.out)]
    for m in MODELS:
        cmd += ["--model", m]
    for layer in args.layers:
        cmd += ["--layers", str(layer)]
    return cmd


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "sae-finding", help="the SAE runs' output root")
    p.add_argument("--docs", type=Path, default=ROOT / "docs", help="where the finding's .json and .png go")
    p.add_argument("--n-sentences", type=int, default=400)
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--width", type=int, default=1024, help="latents (4 x the models' width 256)")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--tokens-per-step", type=int, default=256)
    p.add_argument("--held-out", type=float, default=0.25)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--skip-training", action="store_true", help="use the results already under --out")
    args = p.parse_args(argv)
    if not args.skip_training:
        print(" ".join(sae_command(args)), flush=True)
        rc = subprocess.call(sae_command(args), cwd=ROOT)
        if rc:
            print(f"error: python -m analyses.sae ended with exit status {rc}", file=sys.stderr)
            return 2
    from analyses import sae, style
    from analyses.sae import finding

    paths = [args.out / "results" / "sae" / f"{m}.json" for m in MODELS]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"error: no SAE result {missing[0]} (run without --skip-training)", file=sys.stderr)
        return 2
    results = [sae.Result.from_json(json.loads(p.read_text())) for p in paths]
    settings = {"n_sentences": args.n_sentences, "steps": args.steps, "tokens_per_step": args.tokens_per_step,
                "held_out": args.held_out, "resamples": args.resamples, "corpus": "default"}
    found = finding.compute(results, settings=settings)
    finding.write(found, args.docs / f"{NAME}.json")
    with style.theme():
        fig = finding.plot(found)
        png = args.docs / f"{NAME}.png"
        fig.savefig(png, dpi=200, bbox_inches="tight")
    for c in found.overall():
        print(f"{c.statistic} S-LSTM - {c.baseline}: mean {c.mean} interval {c.interval}: {c.verdict} ({c.reason})")
    print("wrote", args.docs / f"{NAME}.json", png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
