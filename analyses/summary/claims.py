"""The papers' claims the suite tests, and what the saved results say about each.

Every verdict is computed from the result files under ``<out>/results`` (never written by hand):
``holds``, ``does not hold``, or ``not testable here`` (the results that would test it are
missing, or a number it needs is null, non-finite or not a number: the evidence says which), with the numbers it
rests on. Result files are read strictly (:func:`analyses.common.read_result`: a damaged file is one error line
naming it), and a folder without any result is an error, not a page of untestable claims. The report page
(:mod:`analyses.summary.report`) puts this table at its top and the README's claim table is copied from a run of it.

Verdicts from the evidence (issue 27, :mod:`analyses.summary.evidence`): where the results carry bootstrap
replicates, a claim ``holds`` when the interval of the compared difference excludes the opposite direction in
every seed (``<model>-seedN`` results are grouped with ``<model>``), ``does not hold`` when it excludes the
claimed direction in every seed, and is ``inconclusive`` otherwise (``reason``: seeds disagree, or the interval
crosses zero). Each claim carries ``difference``, ``interval``, ``seeds`` (per model pair and seed: the values
with their intervals, the difference, its interval, sign and whether it was paired), ``n_seeds`` and ``reason``;
results without replicates keep the point verdict with ``reason`` POINT_ONLY.

    $ python -m analyses.summary.claims --out out [--markdown]   # --markdown: the README's table
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from analyses import stats
from analyses.common import arg, parse_config, run_main
from analyses.summary import evidence
from analyses.summary.claim import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    INPUT_ERRORS,
    POINT_ONLY,
    UNTESTED,
    Claim,
    Untestable,
    compare_slstm,
    fmt,
    load_all,
    number,
    untestable_reason,
)
from probes.errors import ProbeError

# ----------------------------------------------------------------------------- the S-LSTM paper

SLSTM = "S-LSTM"


def _last_token_cosine(doc: dict) -> float:
    return number(doc["layers"][-1]["token"]["mean"], f"{doc.get('model_name')}'s last-layer token cosine")


def _last_sentence_cosine(doc: dict) -> float:
    return number(doc["layers"][-1]["sentence"]["mean"], f"{doc.get('model_name')}'s last-layer sentence cosine")


def _k(doc: dict, window: int, threshold: float) -> float:
    for w in doc["windows"]:
        if w["window"] == window:
            for t in w["thresholds"]:
                if abs(number(t["threshold"], "a threshold") - threshold) < 1e-9:
                    return number(t["mean"], f"{doc.get('model_name')}'s k at n = {window}, {threshold:.0%}")
    raise Untestable(f"{doc.get('model_name')} has no k at n = {window}, {threshold:.0%}")


def _middle_token_distance(doc: dict) -> float:
    """Mean token L2 change over the intermediate layers (2..L-1; all layers when L < 3)."""
    d = np.array([number(lyr["token"]["distance_mean"], f"{doc.get('model_name')}'s token distance")
                  for lyr in doc["layers"]])
    return float(d[1:-1].mean() if len(d) >= 3 else d.mean())


def slstm_claims(results: dict[str, list[dict]]) -> list[Claim]:
    aniso, red, trans = (results.get(a, []) for a in ("anisotropy", "redundancy", "transitions"))
    lt = lambda a, b: abs(a) < abs(b)  # noqa: E731 - nearer zero = less anisotropic
    nearer_zero = {"claimed_sign": -1, "contrast": lambda a, b: np.abs(a) - np.abs(b)}  # |S-LSTM| - |other| < 0
    claims = [
        compare_slstm(SLSTM, "§7.1, Fig. 6", "S-LSTM token outputs are less anisotropic (mean cosine of random tokens, "
                 "last layer, nearer 0) than same-size Transformers'", "anisotropy", aniso, _last_token_cosine, lt,
                 sample=evidence.anisotropy_sample("token"), **nearer_zero),
        compare_slstm(SLSTM, "§7.1, Fig. 6", "S-LSTM sentence vectors are less anisotropic than Transformers' "
                 "([CLS] / g, last layer)", "anisotropy", aniso, _last_sentence_cosine, lt,
                 sample=evidence.anisotropy_sample("sentence"), **nearer_zero),
        compare_slstm(SLSTM, "§7.2, Table 6", "S-LSTM needs the most principal components for 90% of the variance "
                 "(n = 100 token windows): less feature redundancy", "redundancy", red,
                 lambda d: _k(d, 100, 0.9), lambda a, b: a > b, 1, sample=evidence.redundancy_sample(100, 0.9)),
        compare_slstm(SLSTM, "§7.2, Table 6", "... and for 98% of the variance (n = 100)", "redundancy", red,
                 lambda d: _k(d, 100, 0.98), lambda a, b: a > b, 1, sample=evidence.redundancy_sample(100, 0.98)),
        compare_slstm(SLSTM, "§7.3, Fig. 7", "S-LSTM has the smallest layer-to-layer token changes (mean L2 over the "
                 "intermediate layers)", "transitions", trans, _middle_token_distance, lambda a, b: a < b,
                 sample=evidence.transitions_sample, claimed_sign=-1),
    ]
    speed = results.get("speed", [])
    claims.append(_speed_claim(speed))
    return claims


def _speed_claim(docs: list[dict]) -> Claim:
    where, claim = "§6, Table 5 / Fig. 5", "S-LSTM inference time grows linearly with length, BERT's faster"
    slopes = []
    try:
        for d in docs:
            for m in d.get("models", []):
                if "slope" in m:
                    slopes.append((str(m["name"]), str(m.get("architecture", m["name"])),
                                   number(m["slope"], f"{m['name']}'s slope")))
    except INPUT_ERRORS as e:
        return Claim(SLSTM, where, claim, UNTESTED, untestable_reason(e), "speed")
    s = [x for x in slopes if "slstm" in x[1]]
    o = [x for x in slopes if "slstm" not in x[1]]
    if not s or not o:
        return Claim(SLSTM, where, claim, UNTESTED, "no speed result (python -m analyses.speed)", "speed")
    held = all(a[2] < b[2] for a in s for b in o) and all(a[2] < 1.2 for a in s)
    return Claim(SLSTM, where, claim, HOLDS if held else FAILS,
                 "log-log slope " + fmt([(n, v) for n, _, v in slopes], 2), "speed")


# ----------------------------------------------------------------------------- the recurrence paper

RECUR = "Recurrent GPT-2"


def _ppl_rows(docs: list[dict]) -> list[dict]:
    return [r for d in docs for r in d.get("rows", [])]


def recurrence_claims(results: dict[str, list[dict]]) -> list[Claim]:
    try:
        return _recurrence_claims(results)
    except INPUT_ERRORS as e:
        why = untestable_reason(e)
        return [Claim(RECUR, where, claim, UNTESTED, why, analysis) for where, claim, analysis in (
            ("§4.2, Tables 1-2", "recurrent perplexity < base at equal window T and overlap o", "perplexity"),
            ("§4.2, Table 2", "recurrent with o = 0 is as good as base with the largest overlap (same T)",
             "perplexity"),
            ("§5.3.1", "topic JSD of continuations: recurrent < base, A < B in more than half the contexts "
                       "(one-sided sign test)", "topics"))]


def _recurrence_claims(results: dict[str, list[dict]]) -> list[Claim]:
    rows = _ppl_rows(results.get("perplexity", []))
    ppl = lambda r: number(r["token_perplexity"], f"perplexity at T={r['window']}, o={r['overlap']}")  # noqa: E731
    base = {(r["window"], r["overlap"]): ppl(r) for r in rows if not r["recurrent"]}
    rec = {(r["window"], r["overlap"]): ppl(r) for r in rows if r["recurrent"]}
    both = sorted(set(base) & set(rec))
    out = []
    c1 = "recurrent perplexity < base at equal window T and overlap o"
    if both:
        held = all(rec[k] < base[k] for k in both)
        ev = "; ".join(f"T={t}, o={o}: {rec[(t, o)]:.2f} vs {base[(t, o)]:.2f}" for t, o in both)
        out.append(_perplexity_evidence(Claim(RECUR, "§4.2, Tables 1-2", c1, HOLDS if held else FAILS, ev,
                                              "perplexity"), results, [(k, k) for k in both]))
    else:
        out.append(Claim(RECUR, "§4.2, Tables 1-2", c1, UNTESTED, "needs base and recurrent perplexity", "perplexity"))
    c2 = "recurrent with o = 0 is as good as base with the largest overlap (same T)"
    pairs = [(t, max(o for tt, o in base if tt == t)) for t in sorted({t for t, o in rec if o == 0})
             if (t, 0) in rec and any(tt == t and o > 0 for tt, o in base)]
    if pairs:
        held = all(rec[(t, 0)] <= base[(t, o)] for t, o in pairs)
        ev = "; ".join(f"T={t}: recurrent o=0 {rec[(t, 0)]:.2f} vs base o={o} {base[(t, o)]:.2f}" for t, o in pairs)
        out.append(_perplexity_evidence(Claim(RECUR, "§4.2, Table 2", c2, HOLDS if held else FAILS, ev, "perplexity"),
                                        results, [((t, 0), (t, o)) for t, o in pairs]))
    else:
        out.append(Claim(RECUR, "§4.2, Table 2", c2, UNTESTED, "needs base at o > 0 and recurrent at o = 0",
                         "perplexity"))
    c3 = "topic JSD of continuations: recurrent < base, A < B in more than half the contexts (one-sided sign test)"
    topics = results.get("topics", [])
    if not topics:
        out.append(Claim(RECUR, "§5.3.1", c3, UNTESTED, "no topics result", "topics"))
    for d in topics:
        s = d["statistics"]
        for k in ("mean_jsd_a", "mean_jsd_b", "share_a_less", "sign_test_p_a_less", "wilcoxon_p_a_less"):
            number(s[k], f"{d['model_name']}'s {k}")
        held = s["mean_jsd_a"] < s["mean_jsd_b"] and s["share_a_less"] > 0.5 and s["sign_test_p_a_less"] < 0.05
        ev = (f"{d['model_name']}: JSD A {s['mean_jsd_a']:.3f} vs B {s['mean_jsd_b']:.3f}; A < B in "
              f"{100 * s['share_a_less']:.1f}% of {s['n_contexts']} ({s['n_ties']} ties); one-sided sign p = "
              f"{s['sign_test_p_a_less']:.3g}, Wilcoxon p = {s['wilcoxon_p_a_less']:.3g}")
        found = None
        if "mean_difference_ci" in s:  # issue 27: the paired bootstrap interval over contexts decides
            found = evidence.verdict_of_differences(
                [(d["model_name"], number(s["mean_difference"], "a JSD difference"), s["mean_difference_ci"])], -1)
        if found is None:
            out.append(Claim(RECUR, "§5.3.1", c3, HOLDS if held else FAILS, ev, "topics", reason=POINT_ONLY))
            continue
        iv = found["interval"]
        ev += f"; mean JSD A - B {found['difference']:+.4f} [{iv[0]:.4f}, {iv[1]:.4f}] (paired over contexts)"
        out.append(Claim(RECUR, "§5.3.1", c3, found["verdict"], ev, "topics", found["difference"], iv, found["seeds"],
                         found["n_seeds"], found["reason"]))
    return out


def _perplexity_evidence(point: Claim, results: dict[str, list[dict]], keys: list[tuple]) -> Claim:
    """Issue 27: ``point`` (the verdict from point values) decided again from the intervals of
    recurrent minus base token perplexity, for each ((T, o) recurrent, (T, o) base) in ``keys``, per
    seed (paired over documents when both scored the same ones). ``point`` marked POINT_ONLY when a
    result has no per-document values."""
    docs = results.get("perplexity", [])
    rec_ids = {id(d) for d in docs if any(r.get("recurrent") for r in d.get("rows", []))}
    row = lambda d, key: next(r for r in d["rows"] if (r["window"], r["overlap"]) == key)  # noqa: E731
    has = lambda d, key: any((r["window"], r["overlap"]) == key for r in d["rows"])  # noqa: E731
    found = []
    for kr, kb in keys:
        rec = [d for d in docs if id(d) in rec_ids and has(d, kr)]
        base = [d for d in docs if id(d) not in rec_ids and has(d, kb)]
        sample = lambda d, kr=kr, kb=kb: evidence.perplexity_sample(d, row(d, kr if id(d) in rec_ids else kb))  # noqa: E731
        try:
            f = evidence.compare(evidence.by_model(rec), evidence.by_model(base), sample, -1, digits=2)
        except INPUT_ERRORS as e:
            return replace(point, verdict=UNTESTED, evidence=untestable_reason(e))
        if f is None:
            return replace(point, reason=POINT_ONLY)
        found.append((kr, kb, f))
    if not found:
        return replace(point, reason=POINT_ONLY)
    verdicts = [f["verdict"] for _, _, f in found]
    decide = next((f for f in (f for _, _, f in found) if f["verdict"] == FAILS),
                  next((f for _, _, f in found if f["verdict"] != HOLDS), found[0][2]))
    verdict = (HOLDS if all(v == HOLDS for v in verdicts) else FAILS if FAILS in verdicts else INCONCLUSIVE)
    text = "; ".join(f"T={kr[0]}, o={kr[1]}" + (f" vs o={kb[1]}" if kb != kr else "") + f": {f['evidence']}"
                     for kr, kb, f in found)
    return replace(point, verdict=verdict, evidence=text, difference=decide["difference"], interval=decide["interval"],
                   seeds=[dict(s, key=[list(kr), list(kb)]) for kr, kb, f in found for s in f["seeds"]],
                   n_seeds=max(f["n_seeds"] for _, _, f in found), reason=decide["reason"])


# ----------------------------------------------------------------------------- ConvBERT


def convbert_claims(results: dict[str, list[dict]]) -> list[Claim]:
    docs = [d for d in results.get("maps", []) if (d.get("model") or {}).get("model_type") == "convbert"
            or "convbert" in d["model_name"]]
    claim = "many self-attention heads of BERT are local (diagonal), which dynamic convolution can replace"
    if not docs:
        return [Claim("ConvBERT", "Fig. 2", claim, UNTESTED, "no trained ConvBERT is available offline", "maps")]
    return [Claim("ConvBERT", "Fig. 2", claim, UNTESTED, "see the maps figures (no scalar verdict)", "maps")]


# ----------------------------------------------------------------------------- the Graph-Transformer

MOG = "Graph-Transformer"


def _mog_docs(results: dict[str, list[dict]]) -> list[dict]:
    return [d for d in results.get("mog", []) if d.get("w_layer_mean")]


def _training_losses() -> dict[str, tuple[str, float, str, tuple]]:
    """Graph-Transformer checkpoints of the paper's width and depth in the registry with a training
    record: name -> (fusion, MLM loss, which loss, training settings). Table 2's ordering is about
    trained models, so it is read from their records: the held-out loss where the recipe measured
    one, else the mean training loss of the last steps."""
    import json

    from probes.checkpoints.registry import read_registry
    from probes.errors import CheckpointError

    found = {}
    for name, spec in read_registry().items():
        if evidence.seed_of(name)[1]:  # seed variants enter through _mlm_evidence, beside their seed-0 model
            continue
        try:
            folder = spec.local_path() if spec.family == "mog" else None
        except CheckpointError:  # an entry whose folder is not installed has no record to read
            continue
        if folder is not None and (folder / "train_config.json").is_file():
            doc = json.loads((folder / "train_config.json").read_text(encoding="utf-8"))
            cfg = doc.get("config", {})
            if not cfg.get("half_dim") and not cfg.get("shared_qkv") and cfg.get("layers") == 4:
                held = doc.get("heldout_loss")
                loss, which = ((held, "held-out") if held is not None
                               else (doc["last_loss_mean"], "training, last steps"))
                settings = tuple(cfg.get(k) for k in ("steps", "batch_size", "seq_len", "corpus", "split", "lr"))
                found[name] = (cfg.get("fusion"), float(loss), which, settings)
    return found


def _heldout_blocks(folder: Path) -> dict | None:
    """Per-block held-out MLM loss sums and masked-token counts (scripts/heldout_blocks.py), or None."""
    import csv

    path = folder / "heldout_blocks.csv"
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    sums = np.array([number(float(r["loss_sum"]), "a block's loss") for r in rows])
    counts = np.array([number(float(r["masked_tokens"]), "a block's masked tokens") for r in rows])
    return {"sums": sums, "counts": counts}


def _mlm_evidence(point: Claim, a: str, b: str) -> Claim:
    """Issue 27: Table 2 decided from the held-out loss per block of ``a`` (weight-gate) and ``b`` (sum)
    and their seed variants (``<name>-seedN``): ratio bootstrap over blocks (summed loss / masked
    tokens), paired where both scored the same blocks and positions (same training seed, so the same
    masking); the claim: loss(a) - loss(b) < 0. ``point`` marked POINT_ONLY without the block files."""
    from probes.checkpoints.registry import read_registry
    from probes.errors import CheckpointError

    groups: dict[str, dict[int, dict]] = {}
    for name, spec in read_registry().items():
        base, seed = evidence.seed_of(name)
        if base not in (evidence.seed_of(a)[0], evidence.seed_of(b)[0]):
            continue
        try:
            blocks = _heldout_blocks(spec.local_path())
        except CheckpointError:
            continue
        except INPUT_ERRORS as e:
            return replace(point, verdict=UNTESTED, evidence=untestable_reason(e))
        if blocks is not None:
            groups.setdefault(base, {})[seed] = {"model_name": name, **blocks}
    if len(groups) < 2:
        return replace(point, reason=POINT_ONLY + " (no heldout_blocks.csv: python scripts/heldout_blocks.py)")

    def sample(doc: dict) -> evidence.Sample:
        W = stats.resample_weights(len(doc["sums"]), stats.RESAMPLES, stats.SEED)
        return evidence.Sample(float(doc["sums"].sum() / doc["counts"].sum()),
                               stats.ratio_replicates(doc["sums"], doc["counts"], W),
                               (stats.units_id(doc["counts"].tolist()), stats.SEED, stats.RESAMPLES))

    base_a, base_b = evidence.seed_of(a)[0], evidence.seed_of(b)[0]
    found = evidence.compare({base_a: groups[base_a]}, {base_b: groups[base_b]}, sample, -1)
    return replace(point, verdict=found["verdict"], evidence="held-out MLM loss per block: " + found["evidence"],
                   difference=found["difference"], interval=found["interval"], seeds=found["seeds"],
                   n_seeds=found["n_seeds"], reason=found["reason"])


def mog_claims(results: dict[str, list[dict]]) -> list[Claim]:
    try:
        return _mog_claims(results)
    except INPUT_ERRORS as e:
        why = untestable_reason(e)
        return [Claim(MOG, "Fig. 9 / 10", "the Graph-Transformer claims", UNTESTED, why, "mog")]


def _mog_claims(results: dict[str, list[dict]]) -> list[Claim]:
    out = []
    by_fusion = {f: (n, v, which, settings) for n, (f, v, which, settings) in sorted(_training_losses().items())}
    c0 = "weight-gate fusion is at least as good as sum (Table 2), at equal width, depth and training (MLM loss)"
    if "weight-gate" in by_fusion and "sum" in by_fusion:
        (nw, w, which, sw), (ns, s_, _, ss) = by_fusion["weight-gate"], by_fusion["sum"]
        if sw != ss:
            out.append(Claim(MOG, "Table 2", c0, UNTESTED, f"{nw} and {ns} were trained with other settings "
                             "(steps, batch, length, corpus or rate): retrain both by one recipe", "checkpoints"))
        else:
            others = "; ".join(f"{n} ({f}) {v:.3f}" for f, (n, v, _, st) in by_fusion.items()
                               if f not in ("weight-gate", "sum") and st == sw)
            out.append(_mlm_evidence(Claim(MOG, "Table 2", c0, HOLDS if w <= s_ else FAILS,
                                           f"{which} MLM loss {nw} {w:.3f} vs {ns} {s_:.3f}"
                                           + (f"; {others}" if others else "") + " (one seed each)", "checkpoints"),
                                     nw, ns))
    else:
        out.append(Claim(MOG, "Table 2", c0, UNTESTED, "needs trained weight-gate and sum checkpoints", "checkpoints"))
    docs = _mog_docs(results)
    fig9 = [("longer sentences get a larger high-order weight w at every layer", "longer_larger_every_layer"),
            ("w rises with the layer (last layer above the first, most steps rising)", None),
            ("a dip of w at layer 4 (below layers 3 and 5)", "dip")]
    for claim, key in fig9:
        if not docs:
            out.append(Claim(MOG, "Fig. 9", claim, UNTESTED, "no weight-gate result (python -m analyses.mog)", "mog"))
            continue
        held, ev = [], []
        for d in docs:
            w = [number(x, f"{d['model_name']}'s w") for x in d["w_layer_mean"]]
            if key == "longer_larger_every_layer":
                v = d["claims"].get(key)
                diff = [number(x, f"{d['model_name']}'s bucket difference")
                        for x in d["claims"].get("longest_minus_shortest") or []]
                ev.append(f"{d['model_name']}: longest - shortest bucket " + ", ".join(f"{x:+.4f}" for x in diff))
            elif key is None:
                steps = [b > a for a, b in zip(w, w[1:])]
                v = bool(w[-1] > w[0] and sum(steps) > len(steps) / 2)
                ev.append(f"{d['model_name']}: w by layer " + ", ".join(f"{x:.3f}" for x in w))
            else:
                v = bool(w[3] < w[2] and w[3] < w[4]) if len(w) >= 5 else None
                ev.append(f"{d['model_name']}: " + (f"w3 {w[2]:.3f}, w4 {w[3]:.3f}, w5 {w[4]:.3f}" if len(w) >= 5
                                                     else f"{len(w)} layers: cannot show a dip"))
            held.append(v)
        tested = [h for h in held if h is not None]
        verdict = UNTESTED if not tested else HOLDS if all(tested) else FAILS
        out.append(Claim(MOG, "Fig. 9", claim, verdict, "; ".join(ev), "mog"))
    all_docs = results.get("mog", [])
    c10 = "high-order attention is smoother than the middle orders (row entropy, every layer)"
    if all_docs:
        shares = [(d["model_name"], d["claims"]["high_smoother_than_middle"]) for d in all_docs]
        held = all(all(s) for _, s in shares)
        ev = "; ".join(f"{n}: {sum(s)} of {len(s)} layers" for n, s in shares)
        out.append(Claim(MOG, "Fig. 10", c10, HOLDS if held else FAILS, ev, "mog"))
    else:
        out.append(Claim(MOG, "Fig. 10", c10, UNTESTED, "no Graph-Transformer result", "mog"))
    return out


CHECKS = (slstm_claims, recurrence_claims, convbert_claims, mog_claims)


def evaluate(out: str | Path) -> list[Claim]:
    """Every claim's verdict on the results saved under ``out``."""
    results = load_all(out)
    return [c for check in CHECKS for c in check(results)]


def require_results(out: str | Path) -> None:
    """One line unless ``<out>/results`` holds a result file (the CLIs refuse to print or write a table of
    claims that are all untestable because --out names the wrong folder)."""
    where = Path(out) / "results"
    if not any(where.glob("*/*.json")):
        raise ProbeError(f"{where} holds no result files{'' if where.is_dir() else ' (no such folder)'}: run the "
                         f"analyses first (python -m analyses.anisotropy ... --out {out})")


def markdown_table(found: list[Claim]) -> str:
    """The README's claim table: paper, where, claim, verdict, seeds (the number the verdict rests on, or
    "point values"), our numbers (the evidence, with intervals)."""
    cell = lambda x: str(x).replace("|", "\\|")  # noqa: E731
    lines = ["| paper | where | claim | verdict | seeds | our numbers (95% bootstrap intervals) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {cell(c.paper)} | {cell(c.where)} | {cell(c.claim)} | {c.verdict} | "
              f"{c.n_seeds or 'point values'} | {cell(c.evidence)} |" for c in found]
    return "\n".join(lines)


@dataclass
class Config:
    """Print each paper claim's verdict on the saved results."""

    out: str = arg("out", "output root holding results/")
    markdown: bool = arg(False, "print the claim table in Markdown (the README's), not one line per claim")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    require_results(cfg.out)
    found = evaluate(cfg.out)
    if cfg.markdown:
        print(markdown_table(found))
        return
    for c in found:
        print(f"[{c.verdict}] {c.paper} {c.where}: {c.claim} -- {c.evidence}")


if __name__ == "__main__":
    run_main(main)
