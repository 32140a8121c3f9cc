"""What every analysis shares: config dataclass -> CLI, result files, figures, error handling.

* A config is a dataclass whose fields are declared with :func:`arg` (default + one line of help);
  :func:`parse_config` builds the argparse CLI from it, so flags and docs never drift apart.
* :func:`write_result` writes ``<out>/results/<analysis>/<model>.json`` and ``.csv`` atomically;
  the JSON holds the numbers and everything that produced them (config, model identity,
  corpus identity, package versions). No timestamps: equal inputs give byte-identical files.
* :func:`save_figure` writes PNG + PDF into ``<out>/figures/``.
* :func:`run_main` turns a :class:`probes.ProbeError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import platform
import sys
import types
import typing
from pathlib import Path

import numpy as np

from probes.errors import ProbeError

# ----------------------------------------------------------------------------- config -> CLI


def arg(default, help: str):
    """A config field with its default and one line of documentation (shown by --help)."""
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def _base_type(tp):
    """(type, is_list) for int/float/str/bool, list[...], and X | None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if origin is list:
        return typing.get_args(tp)[0], True
    return tp, False


def parse_config(cls, argv: list[str] | None = None, description: str | None = None):
    """Build an argparse CLI from dataclass ``cls`` and return the parsed config."""
    parser = argparse.ArgumentParser(description=description or cls.__doc__)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        tp, is_list = _base_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        help_text = f"{f.metadata.get('help', '')} (default: {default})".replace("%", "%%")  # argparse formats %
        kw = {"help": help_text, "dest": f.name}
        if tp is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, **kw)
        elif is_list:
            kw["help"] += "; repeat the flag for several"
            parser.add_argument(flag, action="append", type=tp, default=None, metavar=f.name.upper(), **kw)
        else:
            parser.add_argument(flag, type=tp, default=default, metavar=f.name.upper(), **kw)
    ns = vars(parser.parse_args(argv))
    for f in dataclasses.fields(cls):
        if ns[f.name] is None and _base_type(hints[f.name])[1]:
            ns[f.name] = f.default_factory()
    return cls(**ns)


def run_main(main, argv: list[str] | None = None) -> None:
    """Run a CLI entry point: user errors become one line on stderr and exit status 2."""
    try:
        main(argv)
    except ProbeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted: finished work is cached; run the same command again to resume", file=sys.stderr)
        sys.exit(130)


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


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return round(float(x), 8)
    if isinstance(x, float):
        return round(x, 8)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _jsonable(dataclasses.asdict(x))
    if isinstance(x, Path):
        return str(x)
    return x


def result_name(model: str) -> str:
    """The name a model's results are filed under: a registry name (or a composite of names, like
    similarity's ``a__b__unit``) as it is; an ``hf:`` id, a folder or a ``?sentence=`` name (probes.names)
    as its spec's safe name, so no user string ever becomes a path below results/."""
    from probes.registry import SAFE_NAME, get_spec, read_registry

    if model in read_registry() or (SAFE_NAME.fullmatch(model) and ".." not in model
                                    and not Path(model).expanduser().is_dir()):
        return model
    return get_spec(model).name


def result_paths(out: str | os.PathLike, analysis: str, model: str) -> tuple[Path, Path]:
    folder, stem = Path(out) / "results" / analysis, result_name(model)
    return folder / f"{stem}.json", folder / f"{stem}.csv"  # not with_suffix: names may hold dots (v1.0)


def write_result(out: str | os.PathLike, analysis: str, model: str, result: dict,
                 rows: list[dict]) -> tuple[Path, Path]:
    """Atomically write the result JSON (numbers + settings) and a flat CSV table."""
    json_path, csv_path = result_paths(out, analysis, model)
    doc = _jsonable({"analysis": analysis, "model_name": result_name(model), **result, "provenance": provenance()})
    atomic_write(json_path, (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode())
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
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


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


def result_header(acts, cfg) -> dict:
    """What every result computed from Activations starts with: the model, the resolved config,
    the activation cache entry and the corpus identity (with its sampling)."""
    return {
        "model_name": acts.meta["model"]["name"],
        "config": config_dict(cfg),
        "model": acts.meta["model"],
        "activations": {k: acts.meta[k] for k in ("key", "n_texts", "n_tokens", "truncated_texts")},
        "corpus": acts.meta.get("corpus"),
    }


def config_dict(cfg) -> dict:
    """The resolved config for a result file. ``out`` is left out: where results are written does
    not change them, and equal runs must give byte-identical files wherever they are written."""
    return _jsonable({k: v for k, v in dataclasses.asdict(cfg).items() if k != "out"})
