"""Checkpoint series: one model at several points of its training, each point loadable by name.

A series is given as

* a folder of step folders, as the suite's recipes write them with ``--snapshots``
  (``<series>/step-0000150/``, each with ``snapshot.json``), or as other trainers do (``checkpoint-1000/``
  of Hugging Face's Trainer, ``global_step1000/``, ``step1000/``, ``iter-1000/``): the step is the folder's
  number. Where some folders are named so, the others (``best-model-v2/``, ``step--5/``) are no points and are
  skipped with a warning that names them; only where none is does a folder's trailing number (``run-300/``) give
  its step. A step folder that is a broken or looping symbolic link is an error, not a point left out;
* a hub model at several revisions: ``hf:org/name@step1000,step2000,step4000`` (Pythia's and OLMo's branches
  are named after their step; the step is the number the revision's name ends with);
* a list of either of those members, in training order.

The points of a folder are one model's checkpoints: their ``config.json`` files agree on the model_type, the
architectures and every size field (width, depth, heads, vocabulary, ...), and with ``like=`` they are of the
entry's model_type; a folder that mixes architectures is one error line naming the two that differ.

Each point becomes a registry entry named ``<series>.step-<step>`` (:func:`registry_file` writes them into a
YAML file that ``PROBES_CHECKPOINTS`` adds to the registry), so every analysis loads a point exactly as it loads
any model, with the activation cache keyed on the point's own weights. A point of the suite's own S-LSTM,
Graph-Transformer or recurrent GPT-2 is not a plain Hugging Face folder: its family, pooling and settings come
from the registry entry the series is a run of (``like=``, or the name the recipe recorded in
``snapshot.json`` when that name is registered); a plain Hugging Face folder or revision needs none.

    $ python -c "from probes.series import resolve; print(resolve('out/train/series/bert-small-seed3'))"
    $ python -m analyses.series anisotropy --series out/train/series/bert-small-seed3 --n-sentences 200
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from probes.checkpoints.folder import SIZE_FIELDS, read_config
from probes.checkpoints.names import OWN_MODEL_TYPES, get_spec
from probes.checkpoints.registry import MAX_NAME, SAFE_NAME, CheckpointSpec, read_registry
from probes.errors import ProbeError
from probes.io import read_json

SNAPSHOT_RECORD = "snapshot.json"  # what recipes.loop writes into each snapshot folder (step, steps, tokens, name)
STEP_FOLDER = re.compile(r"(?:step|checkpoint|global_step|iter)[-_]?(\d+)")  # the step folders of common trainers
TRAILING_NUMBER = re.compile(r"(\d+)$")
NEGATIVE = re.compile(r"(?:.*-)?-\d+")  # "step--5", "-5": a number after a minus sign is no step
# what makes two checkpoints one architecture: the kind of model and every size of it (not dropout, dtype, ...)
ARCHITECTURE_FIELDS = ("model_type", "architectures", *SIZE_FIELDS, "n_inner", "fusion", "shared_qkv", "half_dim",
                       "self_gate", "window", "max_positions", "max_position_embeddings", "n_positions")


@dataclass(frozen=True)
class Point:
    """One checkpoint of a series: its training step, the tokens seen when the recipe recorded them, what loads
    it (a folder, or ``hf:org/name@revision``) and the registry name the analyses know it by."""

    step: int
    source: str  # a folder path or hf:org/name@revision
    name: str  # <series>.step-<step>
    tokens: int | None = None
    fraction: float | None = None  # step / the run's steps, where the recipe recorded them


@dataclass(frozen=True)
class Series:
    """A model's checkpoints in training order, and the registry entry they are runs of (None: plain folders
    or hub revisions, described by their own config)."""

    name: str
    points: tuple[Point, ...]
    like: str | None = None
    settings: dict = field(default_factory=dict)  # the like-entry's fields each point's entry copies

    def __repr__(self) -> str:
        steps = ", ".join(str(p.step) for p in self.points)
        return f"<series {self.name}: {len(self.points)} checkpoints at steps {steps}>"


def _step_of(name: str) -> int | None:
    """The step a folder's (or a revision's) name gives: a trainer's step-folder pattern, else the number it ends
    with; None for no number, or for a negative one (``step--5``, ``-5``)."""
    if m := STEP_FOLDER.fullmatch(name):
        return int(m.group(1))
    m = TRAILING_NUMBER.search(name)
    return None if m is None or NEGATIVE.fullmatch(name) else int(m.group(1))


def _record(folder: Path) -> dict:
    if not (folder / SNAPSHOT_RECORD).is_file():
        return {}
    doc = read_json(folder / SNAPSHOT_RECORD, "snapshot record")
    return doc if isinstance(doc, dict) else {}


def _safe(name: str) -> str:
    """``name`` as one safe registry name (other characters become '-')."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "series"
    return cleaned[:MAX_NAME - 14]  # room for ".step-NNNNNNNN"


def _folder_points(folder: Path, series: str) -> list[tuple[int, Path, dict]]:
    """(step, folder, snapshot record) of every step folder of ``folder`` in step order (see the module
    docstring for which folders are points)."""
    trainers, others, empty = [], [], []  # empty: folders that are no point (no config.json, or no step)
    for sub in sorted(folder.iterdir()):
        if sub.name.startswith("."):
            continue
        step = _step_of(sub.name)
        if sub.is_symlink() and not sub.exists() and step is not None:  # exists() follows the link
            raise ProbeError(f"series {series}: {sub} is a symbolic link that leads to no folder (broken, or a "
                             f"loop of links): a step folder must be a checkpoint")
        if not sub.is_dir():
            continue
        if step is None:
            if (sub / "config.json").is_file():  # a model, but no step (checkpoint-final/, step--5/)
                empty.append(sub.name)
            continue
        if not (sub / "config.json").is_file():
            empty.append(sub.name)
        elif STEP_FOLDER.fullmatch(sub.name):
            trainers.append((step, sub, _record(sub)))
        else:
            others.append((step, sub, _record(sub)))
    found = trainers or others
    left = sorted([sub.name for _, sub, _ in others] if trainers else []) + empty
    if left and found:
        warnings.warn(f"series {series}: not taken as checkpoints: {', '.join(left[:5])}"
                      + (f" and {len(left) - 5} more" if len(left) > 5 else "")
                      + " (the points are the folders named step-N/, checkpoint-N/, global_stepN/, iter-N/ with a "
                        "config.json)", stacklevel=3)
    if not found:
        raise ProbeError(f"series {series}: {folder} holds no step folders (step-N/, checkpoint-N/, global_stepN/ "
                         f"with a config.json each)")
    steps = [s for s, _, _ in found]
    if len(set(steps)) != len(steps):
        twice = sorted({s for s in steps if steps.count(s) > 1})
        raise ProbeError(f"series {series}: {folder} has two folders for step {twice[0]}")
    found = sorted(found, key=lambda x: x[0])
    _one_architecture(series, [sub for _, sub, _ in found])
    return found


def architecture(folder: Path) -> dict:
    """The fields of ``folder``'s config.json that make its architecture (:data:`ARCHITECTURE_FIELDS`)."""
    cfg = read_config(folder.name, folder / "config.json")
    return {k: cfg[k] for k in ARCHITECTURE_FIELDS if k in cfg}


def _one_architecture(series: str, folders: list[Path]) -> None:
    """ProbeError unless every folder's config describes the first one's architecture."""
    first = architecture(folders[0])
    for sub in folders[1:]:
        other = architecture(sub)
        differ = [k for k in ARCHITECTURE_FIELDS if first.get(k) != other.get(k)]
        if differ:
            shown = "; ".join(f"{k} {first.get(k)!r} in {folders[0].name}, {other.get(k)!r} in {sub.name}"
                              for k in differ[:2])
            raise ProbeError(f"series {series}: its checkpoints are not of one architecture ({shown}): a series is "
                             f"one model's checkpoints")


def _check_like(series: Series, folders: list[Path]) -> None:
    """ProbeError unless the checkpoints are of the model_type of the entry ``series.like`` (its family's, for the
    suite's own architectures; else its folder's config)."""
    spec = get_spec(str(series.like))
    own = {family: model_type for model_type, (family, _) in OWN_MODEL_TYPES.items()}
    want = own.get(spec.family)
    if want is None and spec.source_type in ("package", "path"):
        try:
            want = spec.model_type()
        except ProbeError:  # the entry's own folder is not installed: nothing to compare with
            return
    if want is None:
        return
    for sub in folders:
        got = architecture(sub).get("model_type")
        if got != want:
            raise ProbeError(f"series {series.name}: {sub.name} is a {got!r} model, but {series.like} (--like) is "
                             f"{want!r}: a series is checkpoints of the entry it is a run of")


def resolve(spec: str | os.PathLike | list, like: str | None = None, name: str | None = None) -> Series:
    """The :class:`Series` that ``spec`` names (see the module docstring). ``like``: the registry entry the
    checkpoints are runs of (default: the name the recipe recorded in ``snapshot.json``, when registered);
    ``name``: the series' name (default: the folder's name, or the hub id)."""
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ProbeError("series: an empty list of checkpoints")
        return _from_members([str(m) for m in spec], like, name)
    if isinstance(spec, str) and spec.startswith("hf:") and "@" in spec and "," in spec:
        head, _, revs = spec.partition("@")
        members = [f"{head}@{r.strip()}" for r in revs.split(",") if r.strip()]
        if members:
            return _from_members(members, like, name)
    if isinstance(spec, str) and spec.startswith("hf:"):
        raise ProbeError(f"series {spec}: one hub revision; a series needs two or more revisions: "
                         f"hf:org/name@rev1,rev2,...")
    folder = Path(spec)
    if not folder.is_dir():
        raise ProbeError(f"series {spec}: not a folder of step checkpoints, nor hf:org/name@rev1,rev2,...")
    found = _folder_points(folder, str(spec))
    recorded = {str(r.get("name")) for _, _, r in found if r.get("name")}
    if like is None and len(recorded) == 1 and (n := next(iter(recorded))) in read_registry():
        like = n
    series = _safe(name or folder.name)
    points = tuple(Point(step, str(sub.resolve()), f"{series}.step-{step:07d}",
                         int(r["tokens"]) if isinstance(r.get("tokens"), int) else None,
                         float(r["fraction"]) if isinstance(r.get("fraction"), (int, float)) else None)
                   for step, sub, r in found)
    made = _with_like(Series(series, points), like)
    if made.like is not None:
        _check_like(made, [sub for _, sub, _ in found])
    return made


def _from_members(members: list[str], like: str | None, name: str | None) -> Series:
    points = []
    for m in members:
        base = m.partition("@")[2] if m.startswith("hf:") else Path(m).name
        step = _step_of(base)
        if step is None:
            raise ProbeError(f"series member {m}: its name ({base}) ends in no step number")
        points.append((step, m))
    if len({s for s, _ in points}) != len(points):
        raise ProbeError(f"series {members[0]}: two members of the same step")
    default = members[0].partition("@")[0][3:].replace("/", "--") if members[0].startswith("hf:") \
        else Path(members[0]).parent.name
    series = _safe(name or default)
    made = tuple(Point(s, m if m.startswith("hf:") else str(Path(m).resolve()), f"{series}.step-{s:07d}")
                 for s, m in sorted(points))
    folders = [Path(p.source) for p in made if not p.source.startswith("hf:")]
    if folders:
        _one_architecture(series, folders)
    result = _with_like(Series(series, made), like)
    if result.like is not None and folders:
        _check_like(result, folders)
    return result


def _with_like(series: Series, like: str | None) -> Series:
    if like is None:
        return series
    spec = get_spec(like)
    settings = {"family": spec.family, "kind": spec.kind, "sentence": spec.sentence,
                "special_tokens": spec.special_tokens,
                **{k: v for k, v in spec.extra.items() if k not in ("fetch", "requested", "prefix", "weights")}}
    if "base" in settings:
        raise ProbeError(f"series of {like}: an entry that runs on another entry's weights (base:) has no series")
    return Series(series.name, series.points, like, settings)


def point_entry(series: Series, point: Point) -> dict:
    """The registry entry (a checkpoints.yaml mapping) of one point."""
    if point.source.startswith("hf:"):
        hub, _, revision = point.source[3:].partition("@")
        source, extra = {"hub": hub}, {"revision": revision}
    else:
        source, extra = {"path": point.source}, {}
    if series.like is not None:
        fields = dict(series.settings)
    else:
        spec: CheckpointSpec = get_spec(point.source)
        fields = {"family": spec.family, "kind": spec.kind, "sentence": spec.sentence,
                  "special_tokens": spec.special_tokens}
    return {**fields, "source": source, **extra,
            "description": f"{series.name} after {point.step} training steps"
                           + (f" (a run of {series.like})" if series.like else "")}


def registry_file(series: list[Series], path: str | os.PathLike) -> Path:
    """Write the registry entries of every point of ``series`` into ``path`` (YAML, for ``PROBES_CHECKPOINTS``);
    two series of one name are an error."""
    names = [s.name for s in series]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ProbeError(f"two series are named {twice[0]}: give each its own name")
    entries = {p.name: point_entry(s, p) for s in series for p in s.points}
    for n in entries:
        if not SAFE_NAME.fullmatch(n):
            raise ProbeError(f"series point name {n!r} is not a safe name")
    from probes.io import atomic_write

    path = Path(path)
    atomic_write(path, yaml.safe_dump(entries, sort_keys=False).encode("utf-8"))
    return path
