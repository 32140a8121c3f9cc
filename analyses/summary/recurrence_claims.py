"""The recurrence paper's claims on real LMs, one table per claim, read from saved results (no model runs).

Reads what ``make recurrence-real`` wrote under ``--out`` (default out/real-lms):
``T<T>/results/perplexity/<model>.json`` (analyses.perplexity, one folder per window T, overlaps
0 and T/4), ``T<T>/results/topics/<A>-vs-<B>.json`` (analyses.topics) and
``results/{anisotropy,transitions}/<model>.json``; and, for the small GPT-2 pair side by side,
the demo's results under ``--gpt2-out`` (default out; a cell is "-" where a result is missing).

Claims (recurrence paper §4.2 Tables 1-2, §5.3.1):

1. recurrent perplexity < base perplexity at equal window T and overlap o;
2. the recurrent model at o = 0 is as good as the base at a larger overlap (o = T/4), at fewer FLOPs;
3. topic JSD(context, continuation) of the recurrent model < the base's, with A < B in more than
   half of the contexts (sign test p-value reported).

Plus the anisotropy table (Ethayarajh 2019: upper layers of GPT-2 nearly collinear): mean cosine of
random tokens per layer, and the mean cosine between a token's consecutive-layer states.

    $ python -m analyses.summary.recurrence_claims [--out out/real-lms] [--gpt2-out out]

Writes <out>/results/recurrence-claims.md and prints it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analyses.common import arg, atomic_write, parse_config, run_main
from probes.errors import ProbeError


@dataclass
class Config:
    """Tables of the recurrence paper's claims from saved perplexity, topics and anisotropy results."""

    out: str = arg("out/real-lms", "root of the real-LM results (T<T>/results/..., results/...)")
    base: str = arg("smollm2-135m", "the base causal LM")
    recurrent: str = arg("smollm2-135m-recurrent", "the same LM with the trained recurrence module")
    window: list[int] = arg([64, 128], "windows T evaluated (one folder T<T> each; overlaps 0 and T/4)", min=2)
    encoders: list[str] = arg(["minilm-l6", "smollm2-135m", "gemma3-270m"], "models of the anisotropy table")
    gpt2_out: str = arg("out", "the demo's output root (the small GPT-2 pair's results), '-' where missing")
    gpt2_base: str = arg("gpt2-small-base", "the small GPT-2 baseline")
    gpt2_recurrent: str = arg("gpt2-small-recurrent", "the small recurrent GPT-2")


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _ppl_rows(root: Path, model: str) -> dict[int, dict]:
    doc = _read(root / "results" / "perplexity" / f"{model}.json")
    return {} if doc is None else {int(r["overlap"]): r for r in doc["rows"]}


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def _verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("holds" if ok else "does not hold")


def perplexity_claims(cfg: Config) -> tuple[list[str], list[str]]:
    """Markdown lines of claim 1 (equal T, o) and claim 2 (recurrent o = 0 vs base o = T/4)."""
    c1 = ["| model pair | T | o | base token ppl | recurrent token ppl | change | base word ppl | "
          "recurrent word ppl | trained at this o | claim 1 |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    c2 = ["| model pair | T | recurrent o=0: token / word ppl, GFLOPs/token | base o=T/4: token / word ppl, "
          "GFLOPs/token | claim 2 |", "|---|---:|---|---|---|"]
    pairs = [(f"{cfg.base} / {cfg.recurrent}", Path(cfg.out) / f"T{T}", cfg.base, cfg.recurrent, T)
             for T in cfg.window]
    gpt2 = Path(cfg.gpt2_out)
    g_base = _ppl_rows(gpt2, cfg.gpt2_base)
    if g_base:
        T = next(iter(g_base.values()))["window"]
        pairs.append((f"{cfg.gpt2_base} / {cfg.gpt2_recurrent}", gpt2, cfg.gpt2_base,
                      cfg.gpt2_recurrent, T))
    found = False
    for label, root, base_name, rec_name, T in pairs:
        base, rec = _ppl_rows(root, base_name), _ppl_rows(root, rec_name)
        trained = None
        doc = _read(root / "results" / "perplexity" / f"{rec_name}.json")
        if doc is not None:
            trained = doc["model"].get("recurrence", {}).get("overlap")
        for o in sorted(set(base) & set(rec)):
            found = True
            b, r = base[o], rec[o]
            change = 100 * (r["token_perplexity"] / b["token_perplexity"] - 1)
            at = "yes" if trained == o else f"no (trained at o={trained})"
            c1.append(f"| {label} | {T} | {o} | {b['token_perplexity']:.2f} | {r['token_perplexity']:.2f} | "
                      f"{change:+.2f}% | {b['word_perplexity']:.2f} | {r['word_perplexity']:.2f} | "
                      f"{at} | "
                      f"{_verdict(r['token_perplexity'] < b['token_perplexity'])} |")
        larger = [o for o in base if o > 0]
        if 0 in rec and larger:
            o = min(larger, key=lambda x: abs(x - T // 4))
            r, b = rec[0], base[o]
            c2.append(f"| {label} | {T} | {r['token_perplexity']:.2f} / {r['word_perplexity']:.2f}, "
                      f"{r['flops_per_token'] / 1e9:.4f} | (o={o}) {b['token_perplexity']:.2f} / "
                      f"{b['word_perplexity']:.2f}, {b['flops_per_token'] / 1e9:.4f} | "
                      f"{_verdict(r['token_perplexity'] <= b['token_perplexity'])} |")
    if not found:
        raise ProbeError(f"no perplexity results of {cfg.base} and {cfg.recurrent} under {cfg.out}/T*/: "
                         "run `make recurrence-real` first")
    return c1, c2


def topic_claims(cfg: Config) -> list[str]:
    lines = ["| model pair (A = recurrent, B = base) | T | contexts | mean JSD A | mean JSD B | real continuation | "
             "A < B | ties | sign test p (two-sided / A < B) | Wilcoxon p (two-sided) | claim 3 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    runs = [(Path(cfg.out) / f"T{T}", cfg.recurrent, cfg.base) for T in cfg.window]
    runs.append((Path(cfg.gpt2_out), cfg.gpt2_recurrent, cfg.gpt2_base))
    for root, a, b in runs:
        doc = _read(root / "results" / "topics" / f"{a}-vs-{b}.json")
        if doc is None:
            continue
        s = doc["statistics"]
        lines.append(f"| {a} vs {b} | {doc['model_a']['window']} | {s['n_contexts']} | {s['mean_jsd_a']:.4f} | "
                     f"{s['mean_jsd_b']:.4f} | {s['mean_jsd_reference']:.4f} | {100 * s['share_a_less']:.1f}% | "
                     f"{s['n_ties']} | {s['sign_test_p']:.3g} / {s['sign_test_p_a_less']:.3g} | "
                     f"{s['wilcoxon_p']:.3g} | {_verdict(s['paper_direction_held'])} |")
    return lines


def anisotropy_table(cfg: Config) -> list[str]:
    lines = ["| model | layers | token cosine: embeddings / middle / highest (layer) / last | "
             "intra-sentence (last) | consecutive-layer cosine, upper half (mean) |",
             "|---|---:|---|---:|---:|"]
    root = Path(cfg.out) / "results"
    for m in cfg.encoders:
        an, tr = _read(root / "anisotropy" / f"{m}.json"), _read(root / "transitions" / f"{m}.json")
        if an is None:
            continue
        layers = an["layers"]
        cos = [lay["token"]["mean"] for lay in layers]
        top = max(range(1, len(cos)), key=lambda i: cos[i])
        upper = "-"
        if tr is not None:
            tl = tr["layers"]
            vals = [lay["token"]["cosine_mean"] for lay in tl[len(tl) // 2:] if lay.get("token")]
            upper = _fmt(sum(vals) / len(vals), ".3f") if vals else "-"
        lines.append(f"| {m} | {len(layers) - 1} | {cos[0]:.3f} / {cos[len(cos) // 2]:.3f} / {cos[top]:.3f} ({top}) / "
                     f"{cos[-1]:.3f} | {_fmt(layers[-1].get('intra_sentence_similarity'), '.3f')} | {upper} |")
    return lines


def render(cfg: Config) -> str:
    c1, c2 = perplexity_claims(cfg)
    parts = ["## Claim 1: recurrent perplexity < base at equal window T and overlap o", "", *c1, "",
             "## Claim 2: recurrent at o = 0 as good as the base at a larger overlap (o = T/4)", "", *c2, "",
             "## Claim 3: topic JSD recurrent < base, A < B in more than half of the contexts", "",
             *topic_claims(cfg), "", "## Anisotropy (Ethayarajh 2019): mean cosine of random tokens by layer", "",
             *anisotropy_table(cfg), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    text = render(cfg)
    path = Path(cfg.out) / "results" / "recurrence-claims.md"
    atomic_write(path, text.encode("utf-8"))
    print(text, end="")
    print(f"wrote {path}")


if __name__ == "__main__":
    run_main(main)
