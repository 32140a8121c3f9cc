"""One self-contained HTML page for every saved result: ``<out>/report.html``.

The page opens offline (figures are embedded as PNG data, no scripts, no fonts fetched). At the
top, the papers' claims and what our results say about each (:mod:`analyses.summary.claims`, computed from
the result files); then, per analysis, its figures with a caption saying what to read in them, its
tables (the Markdown tables the analysis writes, else the CSVs), and per model the provenance block
(model fingerprint, corpus hash, settings, package versions) folded away. Built with Jinja2 from
``analyses/summary/templates/report.html.j2``. ``python -m analyses.summary.figures`` (so ``make demo``) writes it.

    $ python -m analyses.summary.report --out out
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from analyses.common import arg, atomic_write, parse_config, run_main
from analyses.summary import claims as claims_mod

# What to read in each figure, by file name (without extension); a figure not listed gets none.
CAPTIONS = {
    "anisotropy": "Cosine similarity of random pairs of token (top) and sentence (bottom) vectors at the last "
                  "layer (S-LSTM paper Fig. 6). Mass near 1 = a narrow cone (anisotropic); near 0 = spread out.",
    "anisotropy-layers": "Ethayarajh's statistics by layer (relative depth l/L when the models differ in depth): "
                         "mean cosine of random tokens (the anisotropy "
                         "baseline), self-similarity, intra-sentence similarity and maximum explainable variance.",
    "redundancy": "Principal components k needed to keep a fraction p of a token window's variance (S-LSTM "
                  "Table 6): higher = less redundant features.",
    "redundancy-spectrum": "Cumulative explained variance r_k of one window's states against k.",
    "transitions": "L2 change of token (left) and sentence (right) states from each layer's input to its output "
                   "(S-LSTM Fig. 7): smooth curves = weight-shared models, small values = little change per layer.",
    "transitions-cosines": "Cosine between each layer's input and output states.",
    "maps-locality": "Attention mass by relative offset i - j and the share within the local window per layer: "
                     "how diagonal (local) each model's maps are (ConvBERT Fig. 2).",
    "perplexity": "Token perplexity per window T and overlap o (recurrence paper Tables 1-2): lower is better; "
                  "compare recurrent and base at equal (T, o).",
    "perplexity-flops": "Perplexity against FLOPs per token: overlap buys context with compute; recurrence buys it "
                        "with a small module.",
    "topics": "Jensen-Shannon divergence (base 2) between the LDA topics of a context and of its greedy "
              "continuation (recurrence paper §5.3.1): lower = the continuation stays on topic.",
    "topics-differences": "Per context, JSD(A) - JSD(B): below zero, A (recurrent) stayed closer to the topic.",
    "maps-": "One sentence's maps: attention averaged over heads and layers and as a layer x head grid (ConvBERT "
             "Fig. 2); for the S-LSTM its gates, for the Graph-Transformer its per-order attentions.",
    "probing": "Held-out accuracy of a linear probe per layer (relative depth) with its 95% bootstrap band; dashed: "
               "the majority baseline, dotted: the control task (token tasks). Higher than the control = the layer "
               "encodes the property, not just word identities.",
    "probing-selectivity": "Selectivity = task accuracy - control accuracy per layer (Hewitt & Liang 2019); near 0: "
                           "the probe could as well be memorising word types.",
    "similarity-": "Linear CKA (debiased) between every layer of the first model (rows) and every layer of the other "
                   "(columns, relative depth); 1 = the same geometry up to rotation and scale, 0 = unrelated.",
    "mog-subgraph-weights": "Graph-Transformer Fig. 9: mean weight w of the high-order part by layer, one line per "
                            "sentence-length bucket; the paper finds w larger for longer sentences and rising with "
                            "depth.",
    "mog-attention-": "Graph-Transformer Fig. 10: the high-order and two middle-order attention matrices of one "
                      "sentence, and each order's mean row entropy by layer (higher = smoother).",
    "mog-lens": "The MoG lens: share of each Eq. 14 term (r_p r_p, r_p r_i, r_i r_p, r_i r_i, bias) in the variance "
                "of the attention logits, per layer; r_p r_p large = attention mostly recomputes the previous "
                "layer's input.",
}


def caption(stem: str) -> str:
    """The caption of a figure: its own, else that of the longest key ending in '-' that starts it."""
    if stem in CAPTIONS:
        return CAPTIONS[stem]
    keys = [k for k in CAPTIONS if k.endswith("-") and stem.startswith(k)]
    return CAPTIONS[max(keys, key=len)] if keys else ""


@dataclass
class Config:
    """Write <out>/report.html from the saved results and figures."""

    out: str = arg("out", "output root holding results/ and figures/")


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _tables(folder: Path) -> list[dict]:
    """The analysis's Markdown tables rendered to HTML; if it wrote none, its CSVs."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    found = [{"name": p.name, "html": md.render(p.read_text(encoding="utf-8"))} for p in sorted(folder.glob("*.md"))]
    if found:
        return found
    import pandas as pd

    return [{"name": p.name, "html": pd.read_csv(p).to_html(index=False, float_format=lambda x: f"{x:.4g}",
                                                            border=0, classes="csv")}
            for p in sorted(folder.glob("*.csv")) if p.stat().st_size]


def _figures(out: Path, analysis: str, analyses: list[str]) -> list[dict]:
    """The figures of ``analysis``: PNGs named after it (``mog_lens`` -> ``mog-lens*``), each given to
    the analysis with the longest matching name (``mog-lens`` belongs to mog_lens, not to mog)."""
    def owner(stem: str) -> str | None:
        names = [a for a in analyses if stem == a.replace("_", "-") or stem.startswith(a.replace("_", "-") + "-")]
        return max(names, key=len) if names else None

    figs = sorted((out / "figures").glob("*.png"))
    return [{"name": p.stem, "src": _png(p), "caption": caption(p.stem)}
            for p in figs if owner(p.stem) == analysis]


def _provenance(doc: dict) -> str:
    keep = {k: doc[k] for k in ("model", "model_a", "model_b", "config", "activations", "corpus", "provenance")
            if k in doc}
    return json.dumps(keep, indent=1)


def sections(out: str | Path) -> list[dict]:
    """One section per analysis with saved results: figures, tables, and one provenance block per result."""
    out = Path(out)
    secs = []
    analyses = [f.name for f in (out / "results").glob("*") if f.is_dir()]
    for folder in sorted((out / "results").glob("*")):
        docs = sorted(folder.glob("*.json"))
        if not docs:
            continue
        results = [{"name": p.stem, "file": str(p.relative_to(out)),
                    "provenance": _provenance(json.loads(p.read_text(encoding="utf-8")))} for p in docs]
        secs.append({"analysis": folder.name, "figures": _figures(out, folder.name, analyses),
                     "tables": _tables(folder), "results": results})
    return secs


def render(out: str | Path) -> str:
    """The report page's HTML."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("analyses.summary", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]))
    return env.get_template("report.html.j2").render(
        claims=claims_mod.evaluate(out), sections=sections(out), out=str(out))


def write_report(out: str | Path) -> Path:
    """Write ``<out>/report.html`` atomically; returns its path."""
    path = Path(out) / "report.html"
    atomic_write(path, render(out).encode("utf-8"))
    return path


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    print(write_report(cfg.out))


if __name__ == "__main__":
    run_main(main)
