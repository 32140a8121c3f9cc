"""Typed config -> command line, shared by every entry point (analyses, recipes, probes, scripts).

* A config is a dataclass whose fields are declared with :func:`arg`: a default, one line of help
  and, for numbers, the range a user may give (``min``/``max``) or a list of ``choices``;
  :func:`parse_config` builds the argparse CLI from it and rejects an out-of-range value at parse
  time (one ``error:`` line, exit status 2), so flags, docs and checks never drift apart.
* Common groups are small dataclasses to inherit from, each with the behaviour of its fields:
  :class:`ModelsConfig` (the model list), :class:`CorpusConfig`, :class:`RunConfig` (seed, batch size,
  device, out), :class:`CaptureConfig` (the run settings plus the forward and cache dtypes and the device
  map; ``extract_kwargs()`` gives the extraction keywords) and :class:`SampleConfig` (a corpus's sentence
  sample: ``draw(corpus, seed)``); ``class Config(SampleConfig, CaptureConfig, CorpusConfig, ModelsConfig)``
  lists the models first. A subclass may override a field (e.g. its default) by declaring it again; the
  field keeps its place. :func:`check_values` makes the CLI's range checks on a config built in Python.
* :func:`tqdm_class` is the tqdm class of every progress bar (a notebook widget only where ipywidgets is
  installed).
* :func:`run_main` runs an entry point: a user error (:class:`probes.errors.ProbeError`, an
  ``OSError`` such as an unwritable ``--out``, a corrupt JSON file, a bad ``--device``) becomes one
  ``error: ...`` line on stderr and exit status 2; ``PROBES_DEBUG=1`` shows the traceback instead.

    $ python -m analyses.anisotropy --batch-size 0
    error: --batch-size must be >= 1, got 0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import types
import typing
from pathlib import Path

from probes.errors import ProbeError

# accelerate's device maps that --device-map accepts (probes.load, probes.checkpoints.loaders.check_device_map)
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential", "cpu")

# ----------------------------------------------------------------------------- fields


def arg(default, help: str, *, min=None, max=None, choices=None, positional: bool = False):  # noqa: A002
    """A config field: its default, one line of documentation (shown by --help) and its valid
    range: numbers (and every item of a list of numbers) must satisfy ``min <= x <= max``;
    ``choices`` restricts the values. ``positional`` makes it a positional argument."""
    meta = {"help": help, "min": min, "max": max, "choices": tuple(choices) if choices else None,
            "positional": positional}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _base_type(tp):
    """(type, is_list) for int/float/str/bool, list[...], and X | None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if origin is list:
        return typing.get_args(tp)[0], True
    return tp, False


def _checked(tp, flag: str, lo, hi):
    """An argparse ``type`` that converts with ``tp`` and enforces ``lo <= x <= hi``."""

    def convert(text: str):
        try:
            x = tp(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects {tp.__name__}, got {text!r}") from None
        if tp is float and not math.isfinite(x):  # nan, inf: no setting means either
            raise argparse.ArgumentTypeError(f"{flag} must be a number, got {text!r} (not finite)")
        if lo is not None and x < lo:
            raise argparse.ArgumentTypeError(f"{flag} must be >= {lo}, got {text}")
        if hi is not None and x > hi:
            raise argparse.ArgumentTypeError(f"{flag} must be <= {hi}, got {text}")
        return x

    convert.__name__ = tp.__name__
    return convert


class _Parser(argparse.ArgumentParser):
    """argparse with the suite's error format: one ``error: ...`` line (no usage block), exit 2."""

    def error(self, message: str):
        print(f"error: {message.splitlines()[0]} (see --help)", file=sys.stderr)
        sys.exit(2)


def build_parser(cls, description: str | None = None, parser: argparse.ArgumentParser | None = None):
    """The argparse parser of config dataclass ``cls`` (into ``parser`` if given, e.g. a subcommand)."""
    parser = parser or _Parser(description=description or cls.__doc__)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        tp, is_list = _base_type(hints[f.name])
        default = _default(f)
        meta = f.metadata
        help_text = f"{meta.get('help', '')} (default: {default})".replace("%", "%%")  # argparse formats %
        kw: dict[str, typing.Any] = {"help": help_text}
        if meta.get("choices"):
            kw["choices"] = meta["choices"]
        if tp in (int, float):
            kw["type"] = _checked(tp, flag, meta.get("min"), meta.get("max"))
        elif tp is not bool:
            kw["type"] = tp
        if meta.get("positional"):
            parser.add_argument(f.name, nargs="?" if default not in ("", None) else None, default=default, **kw)
        elif tp is bool:
            kw.pop("type", None)
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default, **kw)
        elif is_list:
            kw["help"] += "; repeat the flag for several"
            parser.add_argument(flag, dest=f.name, action="append", default=None, metavar=f.name.upper(), **kw)
        else:
            parser.add_argument(flag, dest=f.name, default=default, metavar=f.name.upper(), **kw)
    if not any(a.dest == "registry" for a in parser._actions):  # every CLI: the user's model names
        parser.add_argument("--registry", dest="_registry", action="append", default=None, metavar="FILE",
                            type=_registry_file, help="a YAML file of model entries (like checkpoints.yaml) added to "
                            "the built-in ones, as PROBES_CHECKPOINTS=FILE does; repeat the flag for several")
    return parser


def _registry_file(text: str) -> str:
    path = Path(text).expanduser()
    if not path.is_file():
        what = "not a regular file" if path.exists() else "no such file"  # a folder, a FIFO, a device
        raise argparse.ArgumentTypeError(f"--registry {text}: {what}")
    return str(path.resolve())


def use_registries(files: list[str] | None) -> None:
    """Add ``--registry`` files to ``PROBES_CHECKPOINTS`` (os.pathsep-joined; read by
    probes.checkpoints.registry, and inherited by the processes a run starts)."""
    have = [p for p in os.environ.get("PROBES_CHECKPOINTS", "").split(os.pathsep) if p.strip()]
    new = [f for f in files or [] if f not in have]
    if new:
        os.environ["PROBES_CHECKPOINTS"] = os.pathsep.join([*have, *new])


def config_from_namespace(cls, ns: dict):
    """``cls(**ns)`` with empty list flags replaced by the field's default."""
    hints = typing.get_type_hints(cls)
    use_registries(ns.get("_registry"))
    ns = {f.name: ns[f.name] for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(cls):
        if ns[f.name] is None and _base_type(hints[f.name])[1]:
            ns[f.name] = _default(f)
    return cls(**ns)


def _default(f: dataclasses.Field) -> typing.Any:
    """The default of a config field (its default_factory called): every option has one."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"config field {f.name} has no default")


def parse_config(cls, argv: list[str] | None = None, description: str | None = None):
    """Build the CLI of dataclass ``cls``, parse ``argv`` (validated) and return the config."""
    return config_from_namespace(cls, vars(build_parser(cls, description).parse_args(argv)))


def unique(names: list[str]) -> list[str]:
    """``names`` without repeats, first occurrence kept (a repeated ``--model`` is computed once)."""
    return list(dict.fromkeys(names))


# ----------------------------------------------------------------------------- common groups
# One small dataclass per concern; a config inherits the groups it uses, listed last-first
# (``class C(SampleConfig, CaptureConfig, CorpusConfig, ModelsConfig)``) so that its flags, and the keys
# of a result's recorded config, come in the order of the groups below.


@dataclasses.dataclass
class ModelsConfig:
    """Which models."""

    model: list[str] = arg(["minilm-l6"], "a model: a name from checkpoints.yaml or a --registry file, a model "
                                          "folder (save_pretrained, with its tokenizer), or hf:org/name")

    def models(self) -> list[str]:
        """The models of the run, each once (a repeated --model is computed once), in the order given."""
        return unique(self.model)


@dataclasses.dataclass
class CorpusConfig:
    """Which corpus."""

    corpus: str = arg("default", "corpus: 'default' (embedded), a folder of .txt, a .txt or a .jsonl")


@dataclasses.dataclass
class SeedConfig:
    """The seed of every random choice."""

    seed: int = arg(0, "seed for every random choice", min=0, max=2**32 - 1)


@dataclasses.dataclass
class BatchConfig:
    """Inputs per forward pass."""

    batch_size: int = arg(32, "texts per forward pass", min=1)


@dataclasses.dataclass
class DeviceConfig:
    """Where the model runs."""

    device: str = arg("cpu", "torch device: cpu, cuda, cuda:N, mps, or auto (cuda, else mps, else cpu)")


@dataclasses.dataclass
class OutConfig:
    """Where results go, and whether they are drawn at once."""

    out: str = arg("out", "output root: cache/, results/ and figures/ go below it")
    figures: bool = arg(True, "draw this analysis's figures after writing its results (--no-figures: results "
                              "only; python -m analyses.summary.figures draws every figure later)")


@dataclasses.dataclass
class RunConfig(OutConfig, DeviceConfig, BatchConfig, SeedConfig):
    """How a run is carried out: seed, batch size, device and output root."""


@dataclasses.dataclass
class CaptureConfig(RunConfig):
    """A run that captures states: the run settings and the number formats of the forward pass and the cache,
    and how a model too big for one device is spread over several."""

    dtype: str = arg("float32", "dtype of the model's forward pass (states are cast to float32 after it)",
                     choices=["float32", "bfloat16", "float16"])
    cache_dtype: str = arg("float16", "how cached states are stored: float16 (half the bytes; falls back to "
                           "float32 for values float16 cannot hold) or float32 (exact)", choices=["float16", "float32"])
    device_map: str = arg("none", "spread a Hugging Face model too big for one device over all of them "
                          "(needs accelerate); none: the whole model on --device",
                          choices=["none", *DEVICE_MAPS])

    def extract_kwargs(self) -> dict:
        """The extraction keywords of this run, for ``probes.extract(model, texts, **cfg.extract_kwargs())``:
        batch_size, device, dtype, cache_dtype and device_map (None: the whole model on ``device``)."""
        return {"batch_size": self.batch_size, "device": self.device, "dtype": self.dtype,
                "cache_dtype": self.cache_dtype, "device_map": None if self.device_map == "none" else self.device_map}


@dataclasses.dataclass
class SampleConfig:
    """A seeded sample of a corpus's sentences: how many, and their length bounds in whitespace-separated words."""

    min_words: int = arg(5, "shortest sentence drawn, in whitespace-separated words", min=1)
    max_words: int = arg(60, "longest sentence drawn, in words (verse or dialogue corpora may want more)", min=1)
    n_sentences: int = arg(5000, "random sentences (the same sample and cache for every sentence analysis)", min=1)

    def draw(self, corpus, seed: int) -> tuple[list[str], dict]:
        """(texts, identity): ``n_sentences`` distinct sentences of ``corpus`` (a name, a path or a loaded
        :class:`probes.corpus.Corpus`) drawn with ``seed`` (:func:`probes.corpus.sample_sentences`), and what a
        result records about them: the corpus identity, the sampling and the sample's sha256."""
        import hashlib

        from probes.corpus import Corpus, load_corpus, sample_sentences

        corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
        texts = sample_sentences(corp, self.n_sentences, seed=seed, min_words=self.min_words, max_words=self.max_words)
        ident = {**corp.identity(), "unit": "sentence", "n_sampled": len(texts), "seed": seed,
                 "min_words": self.min_words, "max_words": self.max_words,
                 "requested": corpus if isinstance(corpus, str) else corp.name, "n_requested": self.n_sentences,
                 # which sentences were drawn: sha256 of the sample, one sentence per line, in order
                 "sample_sha256": hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()}
        return texts, ident


def check_values(cfg) -> None:
    """ProbeError (one line naming the setting) unless every field of config dataclass ``cfg`` is in the range or
    among the choices its :func:`arg` declares: the checks the CLI makes at parse time, for a config built in
    Python (``Config(n_tokens=0)``)."""
    for f in dataclasses.fields(cfg):
        meta, value = f.metadata, getattr(cfg, f.name)
        for x in value if isinstance(value, (list, tuple)) else [value]:
            if meta.get("choices") and x not in meta["choices"]:
                raise ProbeError(f"{f.name}={x!r} is not one of {', '.join(map(str, meta['choices']))}")
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                if meta.get("min") is not None and x < meta["min"]:
                    raise ProbeError(f"{f.name} must be >= {meta['min']}, got {x}")
                if meta.get("max") is not None and x > meta["max"]:
                    raise ProbeError(f"{f.name} must be <= {meta['max']}, got {x}")


# ----------------------------------------------------------------------------- checks before work


def check_device(device: str) -> str:
    """The torch device ``device`` names on this machine (``auto``: cuda, else mps, else cpu), as a
    string; one-line ProbeError if it is not a device (cpu, cuda, cuda:N, mps) this machine has."""
    import torch

    if str(device).strip().lower() == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ProbeError(f"--device {device!r} is not a torch device (auto, cpu, cuda, cuda:N, mps)") from None
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ProbeError(f"--device {device!r}: only auto, cpu, cuda, cuda:N and mps are supported")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProbeError(f"--device {device}: CUDA is not available on this machine")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ProbeError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ProbeError(f"--device {device}: MPS is not available on this machine")
    return str(dev)


def resolve_device(device) -> str:
    """``check_device`` for a string; a torch.device is taken as it is."""
    return str(device) if not isinstance(device, str) else check_device(device)


def check_writable(out: str | os.PathLike) -> None:
    """Fail with one line unless ``out`` is (or can be made) a writable folder: called before any
    model runs, so a typo in ``--out`` does not cost a whole run."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ProbeError(f"--out {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ProbeError(f"--out {out} is not writable: {e.strerror or e}") from None


# ----------------------------------------------------------------------------- running


def tqdm_class():
    """The tqdm class for progress bars: ``tqdm.auto`` (a widget in Jupyter) where ipywidgets is installed, else
    the text bar. (``tqdm.auto`` without ipywidgets warns "IProgress not found" in Jupyter, then draws text.)"""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is None:
        from tqdm import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm


def progress_bar(progress: bool, **kwargs):
    """A :func:`tqdm_class` bar over ``kwargs``, off when ``progress`` is False; when it is on, tqdm's environment
    defaults still apply (``TQDM_DISABLE=1`` turns every bar off: ``make demo`` does so for its second chain)."""
    return tqdm_class()(**kwargs, **({} if progress else {"disable": True}))


def run_main(main, argv: list[str] | None = None) -> None:
    """Run a CLI entry point: user errors become one line on stderr and exit status 2
    (``PROBES_DEBUG=1`` re-raises them with their traceback)."""
    debug = os.environ.get("PROBES_DEBUG", "") not in ("", "0")
    try:
        main(argv)
    except KeyboardInterrupt:
        print("interrupted: finished work is cached; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
    except (ProbeError, OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        if debug:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as e:  # torch: bad device strings, out-of-memory
        text = str(e)
        if debug or not any(s in text for s in ("device", "out of memory", "DefaultCPUAllocator")):
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        sys.exit(2)


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None:
        text = f"{e.strerror or type(e).__name__}: {e.filename}"
    elif isinstance(e, json.JSONDecodeError):
        text = f"not valid JSON ({e.msg}, line {e.lineno})"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())
