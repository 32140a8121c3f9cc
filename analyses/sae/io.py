"""An SAE on disk, in the layout sae-lens loads (``SAE.load_from_disk(folder)``), checksummed.

A folder holds

* ``sae_weights.safetensors``: ``W_enc`` (d, m), ``b_enc`` (m,), ``W_dec`` (m, d), ``b_dec`` (d,), and for a
  JumpReLU or BatchTopK SAE ``threshold`` (m,), float32, reading raw states (the training scale already folded
  back: ``normalize_activations`` is "none");
* ``cfg.json``: sae-lens's keys (``architecture`` "standard", "topk" or "jumprelu", a BatchTopK SAE being the
  JumpReLU it is at inference; ``d_in``, ``d_sae``, ``k``,
  ``activation_fn_str``, ``activation_fn_kwargs``, ``hook_name``, ``hook_layer``, ``model_name``, ...) and a
  ``probes`` block: which model (its name and fingerprint) and layer the SAE reads, and how it was trained;
* ``checksums.sha256``: the sha256 of the other two files, in ``sha256sum`` format (``sha256sum -c`` checks it).

:func:`load_sae` refuses, each with one line (a :class:`probes.errors.ProbeError`), a folder whose files are
missing, edited or truncated (a checksum differs), whose cfg.json does not match its weights (the keys that say
what the weights mean, :data:`MEANING`, disagree with the suite's ``probes`` block, or a tensor's name, shape or
dtype is not the one cfg.json implies, or a weight is NaN or inf), or whose SAE reads another model or another
layer than the caller asks for (:mod:`analyses.sae.check` is its command line).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from analyses import records
from analyses.sae.model import ARCHITECTURE, SAE, SaeShape
from analyses.sae.train import TrainSettings
from probes.checkpoints.identity import file_sha
from probes.errors import ProbeError
from probes.io import atomic_write

WEIGHTS, CONFIG, CHECKSUMS = "sae_weights.safetensors", "cfg.json", "checksums.sha256"
# the sae-lens keys of cfg.json that say what the weights mean: each must equal what the probes block implies
MEANING = ("architecture", "d_in", "d_sae", "k", "activation_fn_str", "activation_fn_kwargs", "apply_b_dec_to_input",
           "finetuning_scaling_factor", "normalize_activations", "dtype", "hook_layer")


@dataclass(frozen=True)
class SaeRecord:
    """What an SAE reads and how it was made (the ``probes`` block of cfg.json)."""

    model: str  # the model's resolved name
    fingerprint: dict  # the model's fingerprint (probes.checkpoints): which weights made the states
    layer: int  # 0 = embeddings, l = the output of layer l
    seed: int
    scale: float  # c, the factor the SAE was trained at (E||c x|| = sqrt(d)); folded back into the weights
    steps: int
    special_tokens: str  # "kept" or "excluded"
    # how it was trained, what a resumed run compares (None: an SAE saved before they were recorded)
    settings: TrainSettings | None = None  # the optimiser's settings and the seed
    buffer_tokens: int | None = None  # the shuffling buffer it was streamed through (0: the states in memory)
    train_sentences: str | None = None  # analyses.stats.units_id of the training sentences, in order
    n_train_tokens: int | None = None
    final_loss: float | None = None  # the training loss over the last 10% of the steps (scaled units)
    dead_in_training: int | None = None  # latents silent over the last dead_window training tokens


def as_json(value):
    """``value`` as it reads back from JSON (tuples as lists, other objects as their str): what a record compares."""
    return json.loads(json.dumps(value, default=str))


def sae_lens_config(shape: SaeShape, record: SaeRecord) -> dict:
    """cfg.json: the keys sae-lens reads, then ``probes`` (whose ``shape.kind`` says how it was trained)."""
    topk = shape.kind == "topk"
    return {"architecture": ARCHITECTURE[shape.kind], "d_in": shape.d_in, "d_sae": shape.width,
            "k": shape.k, "activation_fn_str": "topk" if topk else "relu",
            "activation_fn_kwargs": {"k": shape.k} if topk else {}, "apply_b_dec_to_input": True,
            "finetuning_scaling_factor": False, "normalize_activations": "none", "dtype": "float32", "device": "cpu",
            "model_name": record.model, "hook_name": f"layers.{record.layer}.hidden", "hook_layer": record.layer,
            "hook_head_index": None, "prepend_bos": True, "dataset_path": "", "context_size": None,
            "sae_lens_training_version": None,
            "probes": {**asdict(record), "shape": asdict(shape)}}


def save_sae(sae: SAE, folder: str | Path, record: SaeRecord) -> str:
    """Write ``sae`` into ``folder`` (created); returns the sha256 of its weights file."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (WEIGHTS + ".tmp")
    save_file(sae.tensors(), str(tmp))
    tmp.replace(folder / WEIGHTS)
    atomic_write(folder / CONFIG, (json.dumps(sae_lens_config(sae.shape, record), indent=1) + "\n").encode())
    sums = {name: file_sha(folder / name) for name in (WEIGHTS, CONFIG)}
    atomic_write(folder / CHECKSUMS, "".join(f"{h}  {name}\n" for name, h in sums.items()).encode())
    return sums[WEIGHTS]


def load_sae(folder: str | Path, fingerprint: dict | None = None, layer: int | None = None) -> tuple[SAE, SaeRecord]:
    """The SAE saved in ``folder`` and its record; ProbeError (one line) if a file is missing, edited or truncated,
    if cfg.json does not match the weights, or if ``fingerprint`` / ``layer`` are given and the SAE reads another
    model or layer."""
    folder = Path(folder)
    for name in (WEIGHTS, CONFIG, CHECKSUMS):
        if not (folder / name).is_file():
            raise ProbeError(f"{folder} is not a saved SAE: {name} is missing")
    listed = {}
    for line in (folder / CHECKSUMS).read_text(encoding="utf-8").splitlines():
        h, _, name = line.partition("  ")
        listed[name] = h
    for name in (WEIGHTS, CONFIG):
        if listed.get(name) != file_sha(folder / name):
            raise ProbeError(f"{folder / name} does not match its checksum in {CHECKSUMS}: the file was edited or "
                             "truncated after it was saved; train the SAE again")
    try:
        cfg = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
        block = dict(cfg.pop("probes"))
        shape = SaeShape(**block.pop("shape"))
        record: SaeRecord = records.from_json(SaeRecord, block, "probes")
        want = SAE(shape).tensor_shapes()
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise ProbeError(f"{folder} is not an SAE saved by this suite ({type(e).__name__}: {e})") from None
    tensors = read_weights(folder / WEIGHTS)
    check_matches(folder, cfg, shape, record, tensors, want)
    if fingerprint is not None and record.fingerprint != as_json(fingerprint):
        raise ProbeError(f"the SAE in {folder} reads the states of model {record.model!r} (another fingerprint), "
                         "not of the model asked for")
    if layer is not None and record.layer != layer:
        raise ProbeError(f"the SAE in {folder} reads layer {record.layer}, not layer {layer}")
    return SAE.from_tensors(shape, tensors), record


def read_weights(path: Path) -> dict:
    """The tensors of a safetensors file; ProbeError (one line) if it cannot be read."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as e:  # safetensors raises its own SafetensorError on a damaged header or short data
        raise ProbeError(f"{path} is not a readable safetensors file ({type(e).__name__}: "
                         f"{' '.join(str(e).split())})") from None


def check_matches(folder: Path, cfg: dict, shape: SaeShape, record: SaeRecord, tensors: dict, want: dict) -> None:
    """ProbeError (one line) where cfg.json's sae-lens keys (:data:`MEANING`) disagree with its probes block, or the
    weights (names, shapes, float32, finite) are not those cfg.json implies."""
    import torch

    implied = sae_lens_config(shape, record)
    for key in MEANING:
        if as_json(cfg.get(key)) != as_json(implied.get(key)):
            raise ProbeError(f"{folder / CONFIG} does not match its weights: {key} is {cfg.get(key)!r}, but the "
                             f"{shape.kind} SAE it describes (d_in {shape.d_in}, d_sae {shape.width}, k {shape.k}, "
                             f"layer {record.layer}) has {implied.get(key)!r}")
    if set(tensors) != set(want):
        raise ProbeError(f"{folder / WEIGHTS} holds tensors {sorted(tensors)}, but cfg.json describes a "
                         f"{shape.kind} SAE, whose tensors are {sorted(want)}")
    for name, shape_want in want.items():
        value = tensors[name]
        if tuple(value.shape) != shape_want or value.dtype != torch.float32:
            raise ProbeError(f"{folder / WEIGHTS} does not match its cfg.json: {name} is {tuple(value.shape)} "
                             f"{value.dtype}, cfg.json (d_in {shape.d_in}, d_sae {shape.width}) implies {shape_want} "
                             "torch.float32")
        if not bool(torch.isfinite(value).all()):
            raise ProbeError(f"{folder / WEIGHTS}: {name} holds NaN or inf")
        if name == "threshold" and shape.kind == "jumprelu" and not bool((value > 0).all()):
            raise ProbeError(f"{folder / WEIGHTS}: a JumpReLU threshold is 0 or negative (it is trained as its log)")
