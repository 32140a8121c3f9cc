"""The papers' claims the suite tests, and what the saved results say about each.

Every verdict is computed from the result files under ``<out>/results`` (never written by hand):
``holds``, ``does not hold``, or ``not testable here`` (the results that would test it are
missing), with the numbers it rests on. The report page (:mod:`analyses.summary.report`) puts this table
at its top and the README's claim table is copied from a run of it.

    $ python -m analyses.summary.claims --out out
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from analyses.common import arg, parse_config, run_main

HOLDS, FAILS, UNTESTED = "holds", "does not hold", "not testable here"


@dataclass(frozen=True)
class Claim:
    """One claim of one paper and its verdict on our results."""

    paper: str  # which paper (short name)
    where: str  # section / table / figure of the paper
    claim: str  # the claim, in one sentence
    verdict: str  # HOLDS, FAILS or UNTESTED
    evidence: str  # the numbers the verdict rests on (or why it cannot be tested)
    analysis: str  # the result folder it reads

    def to_json(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- reading results


def load_all(out: str | Path) -> dict[str, list[dict]]:
    """analysis name -> the saved result documents (JSON) under ``<out>/results/<analysis>/``."""
    import json

    found = {}
    for folder in sorted((Path(out) / "results").glob("*")):
        docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        if docs:
            found[folder.name] = docs
    return found


def _family(doc: dict) -> str:
    return (doc.get("model") or {}).get("family", "")


def _size(doc: dict) -> tuple:
    m = doc.get("model") or {}
    return m.get("num_layers"), m.get("hidden_size")


def _split_slstm(docs: list[dict]) -> tuple[list[dict], list[dict]]:
    """(S-LSTM results, the Transformer encoders they are compared with) among ``docs``. As in the
    paper, the comparison is between models of one size and recipe: the Transformer encoders with the
    S-LSTM's depth and width (bert-small, albert-small) when any are present, else all of them."""
    slstm = [d for d in docs if _family(d) == "slstm"]
    others = [d for d in docs if _family(d) not in ("slstm", "recurrent", "mog")
              and (d.get("model") or {}).get("kind", "encoder") == "encoder"]
    same = [d for d in others if any(_size(d) == _size(s) for s in slstm)]
    return slstm, same or others


def _fmt(pairs: list[tuple[str, float]], digits: int = 3) -> str:
    return ", ".join(f"{n} {v:.{digits}f}" for n, v in pairs)


def _compare(paper, where, claim, analysis, docs, value, better, digits=3) -> Claim:
    """S-LSTM vs every Transformer encoder on ``value(doc)``; ``better(a, b)``: a beats b."""
    slstm, others = _split_slstm(docs)
    if not slstm or not others:
        return Claim(paper, where, claim, UNTESTED, "needs an S-LSTM and a Transformer encoder result", analysis)
    vals = [(d["model_name"], value(d)) for d in slstm + others]
    held = all(better(value(s), value(o)) for s in slstm for o in others)
    return Claim(paper, where, claim, HOLDS if held else FAILS, _fmt(vals, digits), analysis)


# ----------------------------------------------------------------------------- the S-LSTM paper

SLSTM = "S-LSTM"


def _last_token_cosine(doc: dict) -> float:
    return float(doc["layers"][-1]["token"]["mean"])


def _last_sentence_cosine(doc: dict) -> float:
    return float(doc["layers"][-1]["sentence"]["mean"])


def _k(doc: dict, window: int, threshold: float) -> float:
    for w in doc["windows"]:
        if w["window"] == window:
            for t in w["thresholds"]:
                if abs(t["threshold"] - threshold) < 1e-9:
                    return float(t["mean"])
    return float("nan")


def _middle_token_distance(doc: dict) -> float:
    """Mean token L2 change over the intermediate layers (2..L-1; all layers when L < 3)."""
    d = np.array([lyr["token"]["distance_mean"] for lyr in doc["layers"]])
    return float(d[1:-1].mean() if len(d) >= 3 else d.mean())


def slstm_claims(results: dict[str, list[dict]]) -> list[Claim]:
    aniso, red, trans = (results.get(a, []) for a in ("anisotropy", "redundancy", "transitions"))
    lt = lambda a, b: abs(a) < abs(b)  # noqa: E731 - nearer zero = less anisotropic
    claims = [
        _compare(SLSTM, "§7.1, Fig. 6", "S-LSTM token outputs are less anisotropic (mean cosine of random tokens, "
                 "last layer, nearer 0) than same-size Transformers'", "anisotropy", aniso, _last_token_cosine, lt),
        _compare(SLSTM, "§7.1, Fig. 6", "S-LSTM sentence vectors are less anisotropic than Transformers' "
                 "([CLS] / g, last layer)", "anisotropy", aniso, _last_sentence_cosine, lt),
        _compare(SLSTM, "§7.2, Table 6", "S-LSTM needs the most principal components for 90% of the variance "
                 "(n = 100 token windows): less feature redundancy", "redundancy", red,
                 lambda d: _k(d, 100, 0.9), lambda a, b: a > b, 1),
        _compare(SLSTM, "§7.2, Table 6", "... and for 98% of the variance (n = 100)", "redundancy", red,
                 lambda d: _k(d, 100, 0.98), lambda a, b: a > b, 1),
        _compare(SLSTM, "§7.3, Fig. 7", "S-LSTM has the smallest layer-to-layer token changes (mean L2 over the "
                 "intermediate layers)", "transitions", trans, _middle_token_distance, lambda a, b: a < b),
    ]
    speed = results.get("speed", [])
    claims.append(_speed_claim(speed))
    return claims


def _speed_claim(docs: list[dict]) -> Claim:
    where, claim = "§6, Table 5 / Fig. 5", "S-LSTM inference time grows linearly with length, BERT's faster"
    slopes = []
    for d in docs:
        for m in d.get("models", []):
            if "slope" in m:
                slopes.append((m["name"], m.get("architecture", m["name"]), float(m["slope"])))
    s = [x for x in slopes if "slstm" in x[1]]
    o = [x for x in slopes if "slstm" not in x[1]]
    if not s or not o:
        return Claim(SLSTM, where, claim, UNTESTED, "no speed result (python -m analyses.speed)", "speed")
    held = all(a[2] < b[2] for a in s for b in o) and all(a[2] < 1.2 for a in s)
    return Claim(SLSTM, where, claim, HOLDS if held else FAILS,
                 "log-log slope " + _fmt([(n, v) for n, _, v in slopes], 2), "speed")


# ----------------------------------------------------------------------------- the recurrence paper

RECUR = "Recurrent GPT-2"


def _ppl_rows(docs: list[dict]) -> list[dict]:
    return [r for d in docs for r in d.get("rows", [])]


def recurrence_claims(results: dict[str, list[dict]]) -> list[Claim]:
    rows = _ppl_rows(results.get("perplexity", []))
    base = {(r["window"], r["overlap"]): r["token_perplexity"] for r in rows if not r["recurrent"]}
    rec = {(r["window"], r["overlap"]): r["token_perplexity"] for r in rows if r["recurrent"]}
    both = sorted(set(base) & set(rec))
    out = []
    c1 = "recurrent perplexity < base at equal window T and overlap o"
    if both:
        held = all(rec[k] < base[k] for k in both)
        ev = "; ".join(f"T={t}, o={o}: {rec[(t, o)]:.2f} vs {base[(t, o)]:.2f}" for t, o in both)
        out.append(Claim(RECUR, "§4.2, Tables 1-2", c1, HOLDS if held else FAILS, ev, "perplexity"))
    else:
        out.append(Claim(RECUR, "§4.2, Tables 1-2", c1, UNTESTED, "needs base and recurrent perplexity", "perplexity"))
    c2 = "recurrent with o = 0 is as good as base with the largest overlap (same T)"
    pairs = [(t, max(o for tt, o in base if tt == t)) for t in sorted({t for t, o in rec if o == 0})
             if (t, 0) in rec and any(tt == t and o > 0 for tt, o in base)]
    if pairs:
        held = all(rec[(t, 0)] <= base[(t, o)] for t, o in pairs)
        ev = "; ".join(f"T={t}: recurrent o=0 {rec[(t, 0)]:.2f} vs base o={o} {base[(t, o)]:.2f}" for t, o in pairs)
        out.append(Claim(RECUR, "§4.2, Table 2", c2, HOLDS if held else FAILS, ev, "perplexity"))
    else:
        out.append(Claim(RECUR, "§4.2, Table 2", c2, UNTESTED, "needs base at o > 0 and recurrent at o = 0",
                         "perplexity"))
    c3 = "topic JSD of continuations: recurrent < base, A < B in more than half the contexts (one-sided sign test)"
    topics = results.get("topics", [])
    if not topics:
        out.append(Claim(RECUR, "§5.3.1", c3, UNTESTED, "no topics result", "topics"))
    for d in topics:
        s = d["statistics"]
        held = s["mean_jsd_a"] < s["mean_jsd_b"] and s["share_a_less"] > 0.5 and s["sign_test_p_a_less"] < 0.05
        ev = (f"{d['model_name']}: JSD A {s['mean_jsd_a']:.3f} vs B {s['mean_jsd_b']:.3f}; A < B in "
              f"{100 * s['share_a_less']:.1f}% of {s['n_contexts']} ({s['n_ties']} ties); one-sided sign p = "
              f"{s['sign_test_p_a_less']:.3g}, Wilcoxon p = {s['wilcoxon_p_a_less']:.3g}")
        out.append(Claim(RECUR, "§5.3.1", c3, HOLDS if held else FAILS, ev, "topics"))
    return out


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


def mog_claims(results: dict[str, list[dict]]) -> list[Claim]:
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
            out.append(Claim(MOG, "Table 2", c0, HOLDS if w <= s_ else FAILS,
                             f"{which} MLM loss {nw} {w:.3f} vs {ns} {s_:.3f}" + (f"; {others}" if others else "")
                             + " (one seed each)", "checkpoints"))
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
            w = d["w_layer_mean"]
            if key == "longer_larger_every_layer":
                v = d["claims"].get(key)
                diff = d["claims"].get("longest_minus_shortest") or []
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


@dataclass
class Config:
    """Print each paper claim's verdict on the saved results."""

    out: str = arg("out", "output root holding results/")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    for c in evaluate(cfg.out):
        print(f"[{c.verdict}] {c.paper} {c.where}: {c.claim} -- {c.evidence}")


if __name__ == "__main__":
    run_main(main)
