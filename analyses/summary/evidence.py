"""Verdicts from the evidence (issue 27): bootstrap intervals of compared differences, per seed.

A model trained with other seeds is registered as ``<model>-seed1``, ``<model>-seed2`` (seed 0 is
the plain name); :func:`by_model` groups a model with its seed variants. For each pair of models
compared and each seed both have, the difference of the claim's statistic gets a bootstrap
interval from the replicates the analyses saved (:mod:`analyses.stats`): paired when both results
resampled the same units (same ``units_id``, seed and number of resamples), else unpaired. The
verdict over seeds is :func:`analyses.stats.verdict`; over several model pairs a claim holds when
every pair holds and does not hold when any pair does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyses import stats

seed_of = stats.seed_of  # "bert-small-seed2" -> ("bert-small", 2)


def by_model(docs: list[dict]) -> dict[str, dict[int, dict]]:
    """model -> seed -> its result document."""
    out: dict[str, dict[int, dict]] = {}
    for d in docs:
        base, seed = seed_of(d["model_name"])
        out.setdefault(base, {})[seed] = d
    return out


@dataclass
class Sample:
    """One model's statistic: the point value and its bootstrap replicates (None: no bootstrap saved)."""

    point: float
    replicates: np.ndarray | None = None
    pairing: tuple | None = None  # (units_id, seed, resamples): equal for two results resampled alike
    level: float = stats.LEVEL

    def interval(self) -> list[float] | None:
        return None if self.replicates is None else stats.interval(self.replicates, self.level).tolist()


def pairing(block: dict | None) -> tuple | None:
    """The pairing key of a saved bootstrap block (None when it names no units)."""
    if not isinstance(block, dict) or not block.get("units_id"):
        return None
    return block["units_id"], block.get("seed"), block.get("resamples")


def mean_sample(point: float, values, block: dict) -> Sample:
    """A Sample of the mean of per-unit ``values`` resampled as ``block`` says (same weights as the analysis)."""
    v = np.asarray(values, dtype=np.float64)
    W = stats.resample_weights(len(v), int(block["resamples"]), int(block["seed"]))
    return Sample(point, stats.mean_replicates(v, W), pairing(block), float(block.get("level", stats.LEVEL)))


def _fmt_iv(iv, digits: int) -> str:
    return "" if iv is None else f" [{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"


def compare(groups_a: dict[str, dict[int, dict]], groups_b: dict[str, dict[int, dict]], sample, claimed_sign: int,
            contrast=lambda a, b: a - b, digits: int = 3) -> dict | None:
    """The interval verdict of "every model of A beats every model of B" (claimed_sign: the sign the
    claim gives ``contrast(A, B)``). ``sample(doc) -> Sample``. None when some result has no
    replicates (the caller falls back to the point values). Returns a dict: verdict, reason,
    difference, interval (of the deciding pair's first seed), n_seeds, seeds (per pair and seed:
    models, values, intervals, difference, interval, sign, paired) and evidence (text)."""
    comparisons = []
    for a_name, a_seeds in groups_a.items():
        for b_name, b_seeds in groups_b.items():
            common = sorted(set(a_seeds) & set(b_seeds))
            pairs = [(s, s) for s in common] or [(sa, sb) for sa in sorted(a_seeds) for sb in sorted(b_seeds)]
            rows = []
            for sa, sb in pairs:
                da, db = a_seeds[sa], b_seeds[sb]
                xa, xb = sample(da), sample(db)
                if xa.replicates is None or xb.replicates is None:
                    return None
                paired = xa.pairing is not None and xa.pairing == xb.pairing
                n = min(len(xa.replicates), len(xb.replicates))
                ra, rb = xa.replicates[:n], xb.replicates[:n]
                if not paired:
                    rb = rb[np.random.default_rng([stats.SEED, 1]).permutation(n)]
                diff = contrast(ra, rb)
                point = float(contrast(xa.point, xb.point))
                iv = stats.interval(diff, xa.level).tolist()
                rows.append({"seed": sa if sa == sb else [sa, sb], "a": da["model_name"], "b": db["model_name"],
                             "value_a": xa.point, "interval_a": xa.interval(), "value_b": xb.point,
                             "interval_b": xb.interval(), "difference": point, "interval": iv,
                             "sign": int(np.sign(point)), "paired": paired})
            v, reason = stats.verdict([r["difference"] for r in rows], [r["interval"] for r in rows], claimed_sign)
            comparisons.append({"a": a_name, "b": b_name, "verdict": v, "reason": reason, "seeds": rows})
    if not comparisons:
        return None
    verdicts = [c["verdict"] for c in comparisons]
    if all(v == stats.HOLDS for v in verdicts):
        decide = comparisons[0]
    else:
        decide = next((c for c in comparisons if c["verdict"] == stats.FAILS),
                      next(c for c in comparisons if c["verdict"] != stats.HOLDS))
    verdict = decide["verdict"]
    n_seeds = max(len(c["seeds"]) for c in comparisons)
    return {"verdict": verdict, "reason": decide["reason"] if len(comparisons) == 1 or verdict != stats.HOLDS
            else "every pair holds", "difference": decide["seeds"][0]["difference"],
            "interval": decide["seeds"][0]["interval"], "n_seeds": n_seeds,
            "seeds": [r for c in comparisons for r in c["seeds"]],
            "evidence": "; ".join(_pair_text(c, digits) for c in comparisons)}


def _pair_text(c: dict, digits: int) -> str:
    """'slstm-small 0.199 [0.190, 0.210] vs bert-small 0.276 [0.270, 0.283], difference -0.077 [...]'
    per seed, then how many seeds and the pair's verdict reason."""
    parts = []
    for r in c["seeds"]:
        head = f"seed {r['seed']}: " if len(c["seeds"]) > 1 else ""
        parts.append(f"{head}{r['a']} {r['value_a']:.{digits}f}{_fmt_iv(r['interval_a'], digits)} vs {r['b']} "
                     f"{r['value_b']:.{digits}f}{_fmt_iv(r['interval_b'], digits)}, difference "
                     f"{r['difference']:+.{digits}f}{_fmt_iv(r['interval'], digits)}"
                     f"{' (paired)' if r['paired'] else ''}")
    n = len(c["seeds"])
    reason = c["reason"].replace(f" ({n} seeds)", "")  # the count is said once, here
    return ", ".join(parts) + f" ({n} seed{'s' if n > 1 else ''}: {c['verdict']}, {reason})"


# ----------------------------------------------------------------------------- the statistics' samples


def _block(doc: dict, *path) -> dict | None:
    x = doc
    for p in path:
        x = x.get(p) if isinstance(x, dict) else None
    return x if isinstance(x, dict) else None


def anisotropy_sample(level: str):
    """Sample of the last layer's mean ``level`` ("token" / "sentence") cosine of an anisotropy result."""
    def get(doc: dict) -> Sample:
        point = float(doc["layers"][-1][level]["mean"])
        block = _block(doc, "bootstrap")
        reps = (block or {}).get("replicates") or {}
        if f"{level}_mean" not in reps or reps.get("layer") != len(doc["layers"]) - 1:
            return Sample(point)
        return Sample(point, np.asarray(reps[f"{level}_mean"], dtype=np.float64), pairing(block),
                      float(block.get("level", stats.LEVEL)))
    return get


def middle_layers(values: np.ndarray) -> np.ndarray:
    """Mean over the intermediate layers (2..L-1; all layers when L < 3) along the last axis."""
    return values[..., 1:-1].mean(-1) if values.shape[-1] >= 3 else values.mean(-1)


def transitions_sample(doc: dict) -> Sample:
    """Sample of the mean token L2 change over the intermediate layers of a transitions result."""
    point = float(middle_layers(np.array([lyr["token"]["distance_mean"] for lyr in doc["layers"]], float)))
    block = _block(doc, "bootstrap")
    reps = ((block or {}).get("replicates") or {}).get("token_distance_mean")
    if reps is None:
        return Sample(point)
    return Sample(point, middle_layers(np.asarray(reps, dtype=np.float64)), pairing(block),
                  float(block.get("level", stats.LEVEL)))


def redundancy_sample(window: int, threshold: float):
    """Sample of the mean k(p) over windows of n = ``window`` tokens (per-window k resampled)."""
    def get(doc: dict) -> Sample:
        for w in doc["windows"]:
            if w["window"] != window:
                continue
            for j, t in enumerate(w["thresholds"]):
                if abs(t["threshold"] - threshold) < 1e-9:
                    block = w.get("bootstrap")
                    if not isinstance(block, dict) or "k" not in w:
                        return Sample(float(t["mean"]))
                    return mean_sample(float(t["mean"]), np.asarray(w["k"], float)[:, j], block)
        raise KeyError(f"k at n = {window}, p = {threshold}")
    return get


def perplexity_sample(doc: dict, row: dict) -> Sample:
    """Sample of a perplexity row's token perplexity (ratio bootstrap over documents)."""
    point = float(row["token_perplexity"])
    block = _block(doc, "bootstrap")
    per_doc = ((block or {}).get("documents") or {}).get(str(row["overlap"]))
    if per_doc is None:
        return Sample(point)
    W = stats.resample_weights(len(per_doc["nll"]), int(block["resamples"]), int(block["seed"]))
    reps = np.exp(stats.ratio_replicates(per_doc["nll"], per_doc["tokens"], W))
    return Sample(point, reps, pairing(block), float(block.get("level", stats.LEVEL)))


def verdict_of_differences(named: list[tuple[str, float, list | None]], claimed_sign: int) -> dict | None:
    """The interval verdict over seeds from saved differences and intervals [(name, difference,
    interval)] (e.g. topics' paired mean JSD difference); None when one has no interval."""
    if not named or any(iv is None for _, _, iv in named):
        return None
    v, reason = stats.verdict([d for _, d, _ in named], [iv for _, _, iv in named], claimed_sign)
    return {"verdict": v, "reason": reason, "difference": named[0][1], "interval": list(named[0][2]),
            "n_seeds": len(named), "seeds": [{"seed": seed_of(n)[1], "model": n, "difference": d, "interval": list(iv),
                                              "sign": int(np.sign(d)), "paired": True} for n, d, iv in named]}
