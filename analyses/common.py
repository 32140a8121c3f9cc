"""What every analysis shares: config groups, result files, figures (the CLI helpers come from probes.config).

* A config is a dataclass whose fields are declared with :func:`probes.config.arg` (default, one line
  of help, valid range); :func:`probes.config.parse_config` builds the validated CLI from it.
  :class:`SentenceConfig` = models + corpus + run settings + sentence sample, shared by the
  sentence-level analyses.
* :func:`write_result` writes ``<out>/results/<analysis>/<model>.json`` and ``.csv`` atomically;
  the JSON holds the numbers and everything that produced them (config, model identity,
  corpus identity, package versions). No timestamps: equal inputs give byte-identical files.
* :func:`save_figure` writes PNG + PDF into ``<out>/figures/``.
* :func:`run_main` turns a user error into one line on stderr and exit code 2 (see probes.config).
* Result JSON is strict: a non-finite number is written as null and listed under ``nulls``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import platform
from pathlib import Path

import numpy as np

from probes.config import ModelsConfig, RunConfig, arg, check_device, check_writable, parse_config, run_main, unique
from probes.errors import ProbeError
from probes.io import atomic_write, strict_json

# The config -> CLI helpers and the atomic write live in probes/ (both sides use them); they are
# re-exported here so an analysis imports everything it needs from one module.
__all__ = ["ActivationsResult", "HeaderResult", "ModelsConfig", "Result", "RunConfig", "SentenceConfig", "arg",
           "atomic_write", "check_device", "check_writable", "config_dict", "mark_final_norm", "parse_config",
           "provenance", "read_results", "result_header", "result_paths", "run_main", "save_drawings", "save_figure",
           "unique", "write_result"]


@dataclasses.dataclass
class SentenceConfig(RunConfig, ModelsConfig):
    """The sentence-level analyses' common fields: models, corpus, run, and the sentence sample."""

    n_sentences: int = arg(5000, "random sentences (the same sample and cache for every sentence analysis)", min=1)
    min_words: int = arg(5, "shortest sentence drawn, in whitespace-separated words", min=1)
    max_words: int = arg(60, "longest sentence drawn, in words (verse or dialogue corpora may want more)", min=1)


# ----------------------------------------------------------------------------- provenance


def provenance() -> dict:
    """Versions of everything that can change a number."""
    import importlib.metadata as md

    versions = {}
    for pkg in ("probes-suite", "torch", "transformers", "tokenizers", "numpy", "scipy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), "packages": versions}


# ----------------------------------------------------------------------------- results on disk


def _jsonable(x, nulls: list | None = None, where: str = ""):
    """JSON-ready copy of ``x``: floats rounded to 8 decimals (8 significant digits below 1e-3); a
    non-finite float becomes None (null) and its place is appended to ``nulls``."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v, nulls, f"{where}/{k}") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v, nulls, f"{where}/{i}") for i, v in enumerate(x)]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist(), nulls, where)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(x):
            if nulls is not None:
                nulls.append(where)
            return None
        x = float(x)
        # 8 decimals; below 1e-3 8 significant digits instead, so that a small p-value or variance
        # is never written as 0 (a rounding that would change what the number says)
        return round(x, 8) if abs(x) >= 1e-3 else float(f"{x:.8g}")
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _jsonable(dataclasses.asdict(x), nulls, where)
    if isinstance(x, Path):
        return str(x)
    return x


def result_name(model: str) -> str:
    """The name a model's results are filed under: a registry name (or a composite of names, like
    similarity's ``a__b__unit``) as it is; an ``hf:`` id, a folder or a ``?sentence=`` name (probes.checkpoints.names)
    as its spec's safe name, so no user string ever becomes a path below results/."""
    from probes.checkpoints.names import get_spec
    from probes.checkpoints.registry import SAFE_NAME, read_registry

    if model in read_registry() or (SAFE_NAME.fullmatch(model) and ".." not in model
                                    and not Path(model).expanduser().is_dir()):
        return model
    return get_spec(model).name


@dataclasses.dataclass
class Result:
    """Base of every analysis's result: a dataclass whose fields are the saved document's keys.

    Numbers live in typed fields; prose lives only in ``definitions`` (plots never read it).
    :meth:`to_json` gives the document :func:`write_result` saves (it adds ``analysis``,
    ``model_name`` and ``provenance``); :meth:`from_json` reads a saved document back, ignoring keys
    the class does not know (so fields may be added) and naming the first missing one."""

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, doc):
        if isinstance(doc, cls):
            return doc
        if isinstance(doc, Result):  # the same class seen twice (``python -m`` runs a module as __main__)
            doc = doc.to_json()
        fields = dataclasses.fields(cls)
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [n for n in required if n not in doc]
        if missing:
            raise KeyError(missing[0])
        names = {f.name for f in fields}
        return cls(**{k: v for k, v in doc.items() if k in names})


@dataclasses.dataclass
class ActivationsResult(Result):
    """A Result that starts with the block :func:`result_header` writes (the model, the resolved
    config, the activation cache entry and the corpus identity)."""

    model_name: str
    config: dict  # the resolved Config (without out)
    model: dict  # the model's description (sentence vector, final-norm convention, ...)
    activations: dict  # the activation cache entry (key, counts, batch size, dtypes)
    corpus: dict | None  # corpus identity and sampling


class HeaderResult(Result):
    """A Result that keeps the identity block (config, model, activations, corpus) in one ``header``
    field (declared by the subclass with a default) and saves it flat, ahead of the numbers."""

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        return {**d.pop("header"), **d}

    @classmethod
    def from_json(cls, doc):
        if isinstance(doc, cls):
            return doc
        if isinstance(doc, Result):
            doc = doc.to_json()
        head = {k: doc[k] for k in ("config", "model", "activations", "corpus") if k in doc}
        return super().from_json({**doc, "header": head})


def result_paths(out: str | os.PathLike, analysis: str, model: str) -> tuple[Path, Path]:
    folder, stem = Path(out) / "results" / analysis, result_name(model)
    return folder / f"{stem}.json", folder / f"{stem}.csv"  # not with_suffix: names may hold dots (v1.0)


def write_result(out: str | os.PathLike, analysis: str, model: str, result: Result | dict,
                 rows: list[dict]) -> tuple[Path, Path]:
    """Atomically write the result JSON (numbers + settings) and a flat CSV table (rank 0 only, under torchrun)."""
    from probes.capture.distributed import is_main

    if not is_main():  # the other ranks of a torchrun help extract; one process writes each result
        raise RuntimeError(f"rank {os.environ.get('RANK')} of a torchrun tried to write a result; only rank 0 does")
    json_path, csv_path = result_paths(out, analysis, model)
    if isinstance(result, Result):
        result = result.to_json()
    nulls: list[str] = []
    doc = _jsonable({"analysis": analysis, "model_name": result_name(model), **result, "provenance": provenance()},
                    nulls)
    if nulls:  # strict JSON: no bare NaN; say where a number is missing and why
        doc["nulls"] = {"paths": nulls, "reason": "not a finite number (an empty mean or a degenerate ratio)"}
    atomic_write(json_path, (strict_json(doc) + "\n").encode())
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(_jsonable(rows))
    atomic_write(csv_path, buf.getvalue().encode())
    return json_path, csv_path


def read_results(out: str | os.PathLike, analysis: str, models: list[str] | None = None) -> list[dict]:
    """Saved result JSONs of one analysis (all models, or the named ones in that order)."""
    folder = Path(out) / "results" / analysis
    if models is None:
        paths = sorted(folder.glob("*.json"))
    else:
        paths = [result_paths(out, analysis, m)[0] for m in models]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise ProbeError(f"no saved result {missing[0]}: run python -m analyses.{analysis} first")
    paths = list(dict.fromkeys(paths))
    docs = []
    for p in paths:
        try:
            docs.append(json.loads(p.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ProbeError(f"{p} is not a valid result file ({e}); run the analysis again") from None
    return docs


def save_figure(fig, out: str | os.PathLike, name: str) -> list[Path]:
    """Save ``fig`` as ``<out>/figures/<name>.png`` (200 dpi) and ``.pdf`` (fonts embedded as text)."""
    import matplotlib

    paths = []
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        for ext, kw in (("png", {"dpi": 200}), ("pdf", {"metadata": {"CreationDate": None}})):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, bbox_inches="tight", **kw)
            path = Path(out) / "figures" / f"{name}.{ext}"
            atomic_write(path, buf.getvalue())
            paths.append(path)
    return paths


def save_drawings(results: list[dict], out: str | os.PathLike, drawings) -> list[Path]:
    """For each ``(name, draw)`` in ``drawings``: ``fig = draw(results)``, save it as
    ``<out>/figures/<name>.{png,pdf}`` and close it. Returns the paths."""
    import matplotlib.pyplot as plt

    paths = []
    for name, draw in drawings:
        fig = draw(results)
        paths += save_figure(fig, out, name)
        plt.close(fig)
    return paths


def mark_final_norm(ax, result: dict, x, y, color=None) -> None:
    """Circle the last layer's point when the model's hidden[L] includes a final norm that the
    other layers lack (``model.final_norm_on_last_hidden``, e.g. GPT-2's ln_f): that step is a
    convention of the library, not the model's last layer alone."""
    if result.get("model", {}).get("final_norm_on_last_hidden", False):
        ax.plot([x[-1]], [y[-1]], ls="none", marker="s", ms=8, mfc="none", mew=1.0, color=color,
                label=f"{result['model_name']}: last layer after the final norm")


def result_header(acts, cfg) -> dict:
    """What every result computed from Activations starts with: the model, the resolved config,
    the activation cache entry (with the device and dtypes that produced it) and the corpus identity.
    ProbeError if the config asks for a forward or cache dtype the activations were not made with."""
    for f, k in (("dtype", "dtype"), ("cache_dtype", "cache_dtype_requested")):
        if hasattr(cfg, f) and k in acts.meta and getattr(cfg, f) != acts.meta[k]:
            raise ProbeError(f"--{f.replace('_', '-')} {getattr(cfg, f)} was asked for, but these activations "
                             f"were made with {acts.meta[k]}: the option did not reach the extraction")
    return {
        "model_name": acts.meta["model"]["name"],
        "config": config_dict(cfg),
        "model": acts.meta["model"],
        # batch_size: the one that produced the cache entry (states differ by up to ~5e-6 between sizes)
        "activations": {k: acts.meta[k] for k in ("key", "n_texts", "n_tokens", "truncated_texts", "batch_size",
                                                  "device", "dtype", "cache_dtype", "cache_dtype_fallback")
                        if k in acts.meta},
        "corpus": acts.meta.get("corpus"),
    }


def config_dict(cfg) -> dict:
    """The resolved config for a result file. ``out`` is left out: where results are written does
    not change them, and equal runs must give byte-identical files wherever they are written."""
    return _jsonable({k: v for k, v in dataclasses.asdict(cfg).items() if k != "out"})
