"""The recurrence paper's claims on real LMs, one table per claim, read from saved results (no model runs).

Reads what ``make recurrence-real`` wrote under ``--out`` (default out/real-lms):
``T<T>/results/perplexity/<model>.json`` (analyses.perplexity, one folder per window T, overlaps
0 and T/4), ``T<T>/results/topics/<A>-vs-<B>.json`` (analyses.topics) and
``results/{anisotropy,transitions}/<model>.json``; and, for the small GPT-2 pair side by side,
the demo's results under ``--gpt2-out`` (default out; a cell is "-" where a result is missing).

The claims and their verdicts are those of the main claim table, from the same declarations
(:data:`analyses.summary.papers.RECURRENCE_CLAIMS`, recurrence paper §4.2 Tables 1-2, §5.3.1, picked by name),
each table row one of a claim's comparisons:

1. recurrent perplexity < base perplexity at equal window T and overlap o;
2. the recurrent model at o = 0 is as good as the base at overlap T/10 (the paper's Table 2: 30 of 300
   tokens; the measured overlap closest to it);
3. topic JSD(context, continuation) of the recurrent model < the base's, paired over contexts (the
   share A < B, the sign test and the Wilcoxon p-value are shown beside it).

Plus the anisotropy table (Ethayarajh 2019: upper layers of GPT-2 nearly collinear): mean cosine of
random tokens per layer, and the mean cosine between a token's consecutive-layer states.

    $ python -m analyses.summary.recurrence_claims [--out out/real-lms] [--gpt2-out out]

Writes <out>/results/recurrence-claims.md and prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyses.common import arg, atomic_write, parse_config, read_result, run_main
from analyses.pairs import PairInfo
from analyses.summary import claims as claims_mod
from probes.errors import ProbeError

if TYPE_CHECKING:
    from analyses.perplexity import Result as Perplexity
    from analyses.perplexity_rows import Row as PerplexityRow
    from analyses.summary.evidence import Comparison


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


def _read(root: Path, analysis: str, stem: str) -> Any:
    """The typed result ``<root>/results/<analysis>/<stem>.json`` read strictly, or None when it is missing."""
    import analyses

    path = root / "results" / analysis / f"{stem}.json"
    if not path.exists():
        return None
    try:
        return analyses.get(analysis).Result.from_json(read_result(path))
    except (KeyError, TypeError) as e:
        raise ProbeError(f"{path} is not a {analysis} result (it lacks {e}); run the analysis again") from None


def _read_pair(root: Path, analysis: str, a: str, b: str) -> Any:
    """The typed result of model ``a`` vs model ``b`` under ``<root>/results/<analysis>/`` (its file named by the
    analysis's rule for a pair, :class:`analyses.pairs.PairInfo`), or None when it is missing; a file there whose
    identity records another pair is a ProbeError (pair names do not parse back: ``x-vs-y-vs-z`` is both ``x`` vs
    ``y-vs-z`` and ``x-vs-y`` vs ``z``)."""
    import analyses

    want = PairInfo(a, b, join=analyses.get(analysis).Result.PAIR_JOIN)
    result = _read(root, analysis, want.name())
    if result is None:
        return None
    got = PairInfo.of(result)
    if got is None or got.names != want.names:
        what = f"{got.a} vs {got.b}" if got is not None else "no pair"
        raise ProbeError(f"{root / 'results' / analysis / want.name()}.json records {what}, not {a} vs {b}: "
                         f"run the analysis again for {a} vs {b}")
    return result


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _row(result: Perplexity, window: int, overlap: int) -> PerplexityRow:
    return next(r for r in result.rows if r.setting == (window, overlap))


def _difference(c: Comparison, digits: int) -> str:
    if c.difference is None:
        return "-"
    iv = "" if c.interval is None else f" [{c.interval[0]:+.{digits}f}, {c.interval[1]:+.{digits}f}]"
    return f"{c.difference:+.{digits}f}{iv}"


# the main claim table's recurrence claims, by name: claim 1, 2 and 3 of these tables
EQUAL_WINDOW, NO_OVERLAP, TOPICS = ("recurrent-perplexity-equal-window", "recurrent-perplexity-no-overlap",
                                    "recurrent-topic-jsd")


def _judged(name: str, results: dict) -> list[Comparison]:
    """The comparisons of the recurrence claim named ``name`` on ``results`` (analysis -> typed Results)."""
    return claims_mod.claim_named(name).judge(results).comparisons


def perplexity_claims(cfg: Config) -> tuple[list[str], list[str]]:
    """Markdown lines of claim 1 (equal T, o) and claim 2 (recurrent o = 0 vs base o closest to T/10)."""
    c1 = ["| model pair | T | o | base token ppl | recurrent token ppl | change | base word ppl | "
          "recurrent word ppl | trained at this o | recurrent - base [95% interval] | claim 1 | why |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    c2 = ["| model pair | T | recurrent o=0: token / word ppl, GFLOPs/token | base at o closest to T/10: token / word "
          "ppl, GFLOPs/token | recurrent - base [95% interval] | claim 2 | why |", "|---|---:|---|---|---|---|---|"]
    pairs = [(f"{cfg.base} / {cfg.recurrent}", Path(cfg.out) / f"T{T}", cfg.base, cfg.recurrent) for T in cfg.window]
    pairs.append((f"{cfg.gpt2_base} / {cfg.gpt2_recurrent}", Path(cfg.gpt2_out), cfg.gpt2_base, cfg.gpt2_recurrent))
    found = False
    for label, root, base_name, rec_name in pairs:
        base, rec = _read(root, "perplexity", base_name), _read(root, "perplexity", rec_name)
        if base is None or rec is None:
            continue
        found = True
        results = {"perplexity": [base, rec]}
        trained = (rec.model.recurrence or {}).get("overlap")
        for c in _judged(EQUAL_WINDOW, results):
            (T, o), b, r = c.key, _row(base, *c.key), _row(rec, *c.key)
            change = 100 * (r.token_perplexity / b.token_perplexity - 1)
            at = "yes" if trained == o else f"no (trained at o={trained})"
            c1.append(f"| {label} | {T} | {o} | {b.token_perplexity:.2f} | {r.token_perplexity:.2f} | "
                      f"{change:+.2f}% | {b.word_perplexity:.2f} | {r.word_perplexity:.2f} | {at} | "
                      f"{_difference(c, 2)} | {c.verdict} | {c.reason} |")
        for c in _judged(NO_OVERLAP, results):
            T, _, o = c.key
            r, b = _row(rec, T, 0), _row(base, T, o)
            c2.append(f"| {label} | {T} | {r.token_perplexity:.2f} / {r.word_perplexity:.2f}, "
                      f"{r.flops_per_token / 1e9:.4f} | (o={o}) {b.token_perplexity:.2f} / "
                      f"{b.word_perplexity:.2f}, {b.flops_per_token / 1e9:.4f} | {_difference(c, 2)} | "
                      f"{c.verdict} | {c.reason} |")
    if not found:
        raise ProbeError(f"no perplexity results of {cfg.base} and {cfg.recurrent} under {cfg.out}/T*/: "
                         "run `make recurrence-real` first")
    return c1, c2


def topic_claims(cfg: Config) -> list[str]:
    lines = ["| model pair (A = recurrent, B = base) | T | contexts | mean JSD A | mean JSD B | real continuation | "
             "A < B | ties | sign test p (two-sided / A < B) | Wilcoxon p (two-sided) | A - B [95% interval] | "
             "claim 3 | why |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---|"]
    runs = [(Path(cfg.out) / f"T{T}", cfg.recurrent, cfg.base) for T in cfg.window]
    runs.append((Path(cfg.gpt2_out), cfg.gpt2_recurrent, cfg.gpt2_base))
    for root, a, b in runs:
        result = _read_pair(root, "topics", a, b)
        if result is None:
            continue
        s = result.statistics
        for c in _judged(TOPICS, {"topics": [result]}):
            lines.append(f"| {a} vs {b} | {result.model_a.window} | {s.n_contexts} | {s.mean_jsd_a:.4f} | "
                         f"{s.mean_jsd_b:.4f} | {_fmt(s.mean_jsd_reference, '.4f')} | {100 * s.share_a_less:.1f}% | "
                         f"{s.n_ties} | {s.sign_test_p:.3g} / {s.sign_test_p_a_less:.3g} | "
                         f"{s.wilcoxon_p:.3g} | {_difference(c, 4)} | {c.verdict} | {c.reason} |")
    return lines


def anisotropy_table(cfg: Config) -> list[str]:
    lines = ["| model | layers | token cosine: embeddings / middle / highest (layer) / last | "
             "intra-sentence (last) | consecutive-layer cosine, upper half (mean) |",
             "|---|---:|---|---:|---:|"]
    root = Path(cfg.out)
    for m in cfg.encoders:
        an, tr = _read(root, "anisotropy", m), _read(root, "transitions", m)
        if an is None:
            continue
        cos = [lay.token.mean for lay in an.layers]
        top = max(range(1, len(cos)), key=lambda i: cos[i])
        upper = "-"
        if tr is not None:
            vals = [lay.token.cosine_mean for lay in tr.layers[len(tr.layers) // 2:]]
            upper = _fmt(sum(vals) / len(vals), ".3f") if vals else "-"
        lines.append(f"| {m} | {len(an.layers) - 1} | {cos[0]:.3f} / {cos[len(cos) // 2]:.3f} / {cos[top]:.3f} "
                     f"({top}) / {cos[-1]:.3f} | {_fmt(an.layers[-1].intra_sentence_similarity, '.3f')} | "
                     f"{upper} |")
    return lines


def render(cfg: Config) -> str:
    c1, c2 = perplexity_claims(cfg)
    parts = ["## Claim 1: recurrent perplexity < base at equal window T and overlap o", "", *c1, "",
             "## Claim 2: recurrent at o = 0 as good as the base at overlap T/10 (the measured overlap closest to it)",
             "", *c2, "", "## Claim 3: topic JSD recurrent < base, paired over contexts", "",
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
