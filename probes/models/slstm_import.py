"""Import the authors' fairseq S-LSTM checkpoints (github.com/ylwangy/slstm_pytorch) into probes.models.slstm.

Loading never runs code from the file. ``torch.load(path, weights_only=True)`` rebuilds only
tensors and plain containers (dict, list, tuple, str, numbers, None); on top of that exactly one
class is allowed: ``argparse.Namespace``, because fairseq stores its training arguments (``args``)
as one. A Namespace is rebuilt by creating the object and filling its ``__dict__``; no method of
it, and nothing else from the file, is called. Anything else the pickle asks for (``os.system``,
``builtins.eval``, an omegaconf ``DictConfig``, a fairseq class, ...) makes the load fail with a
:class:`~probes.errors.CheckpointError` ("refused: the checkpoint asks to run code / load objects
beyond tensors and plain containers ..."); the file is never executed.

Newer (hydra) fairseq versions store ``cfg`` as an omegaconf ``DictConfig`` instead of ``args``:
such files are refused and must be converted once in an environment that trusts them, e.g.

    ckpt = torch.load("checkpoint_last.pt", weights_only=False)   # trusted machine, with fairseq
    torch.save({"model": ckpt["model"], "args": {"encoder_layers": 24, "slstm_kernel_size": 1}}, "plain.pt")

Layout read (fairseq ``SlstmModel`` state dict; the released ``*_ln_posinput`` architectures):

=========================================================  ==========================================
fairseq key                                                probes.models.slstm.SLSTMForMaskedLM key
=========================================================  ==========================================
encoder.embed_tokens.weight                                slstm.embed_tokens.weight
encoder.embed_positions.weight (rows pad+1 onwards)        slstm.embed_positions.weight
encoder.layernorm_embedding.{weight,bias}                  slstm.layernorm_embedding.*
encoder.encoder.layer.WV_t_ilrfsou.{weight,bias}           slstm.block.token_w.*   (4d -> 7d)
encoder.encoder.layer.U_t_ilrfsou.weight                   slstm.block.token_u.weight (d -> 7d)
encoder.encoder.layer.WU_g_fo.{weight,bias}                slstm.block.sent_fo.*   (2d -> 2d)
encoder.encoder.layer.WU_g_f_.{weight,bias}                slstm.block.sent_f.*    (2d -> d)
encoder.encoder.layer.{i,l,r,f,s,o,u}_norm.{weight,bias}   slstm.block.token_norm.* rows 0..6
encoder.encoder.layer.{gf,go,gf_}_norm.{weight,bias}       slstm.block.sent_norm.* rows 0..2
encoder.lm_head.{dense,layer_norm}.*, encoder.lm_head.bias lm_head.* (lm_head.weight is tied to E)
=========================================================  ==========================================

fairseq's learned positions start at ``padding_idx + 1`` (pad = 1, so row 2 is the first token);
those rows become our 0-based positions. Ignored on purpose (listed in the notes as
``ignored_keys``): ``classification_heads.*`` (fine-tuning heads) and the multi-task
``lm_head_left/right``. Refused: checkpoints trained with ``pos_g2h`` / ``pos_h2g`` (positions
inside the block, ``encoder.encoder.layer.embed_positions``), which the released models do not
use, and any checkpoint holding a key the table above does not map (another architecture
variant): it fails naming the first few such keys instead of loading partially. The gate
LayerNorms are read when ``i_norm.weight`` is present (fairseq ``ln``) and are then required in
full; :func:`export_fairseq_state_dict` writes them only for a model that has them
(``gate_layer_norm``), so export -> import keeps the model.

Vocabulary: fairseq id = SentencePiece id + 4; ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3 and
``<mask>`` last (the authors' ``example/slstm_demo.py``). Inputs are ``<s> pieces </s>``.

Convert once to the native, pickle-free folder (config.json + model.safetensors + the
SentencePiece model), which ``family: slstm`` entries load directly:

    $ python -m probes.models.slstm_import checkpoint_last.pt --sentencepiece wiki_books_openweb_nospecial.model \\
          --out models/slstm-en [--num-layers 24]
"""

from __future__ import annotations

import argparse
import json
import pickle
import pickletools
import re
import shutil
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from probes.config import arg, parse_config, run_main
from probes.errors import CheckpointError
from probes.models.slstm import CONFIG_NAME, SLSTMConfig, SLSTMForMaskedLM, save_pretrained

FAIRSEQ_PAD = 1  # fairseq Dictionary: <s>=0, <pad>=1, </s>=2, <unk>=3
SPM_OFFSET = 4
TOKEN_NORMS = ("i", "l", "r", "f", "s", "o", "u")  # rows of token_norm
SENT_NORMS = ("gf", "go", "gf_")  # rows of sent_norm: f_g, o (after the sigmoid), per-token f_i
LINEARS = {  # fairseq block module -> ours
    "WV_t_ilrfsou": "token_w", "U_t_ilrfsou": "token_u", "WU_g_fo": "sent_fo", "WU_g_f_": "sent_f",
}
REFUSED = "refused: the checkpoint asks to run code / load objects beyond tensors and plain containers"


def safe_load(path: str | Path) -> object:
    """torch.load with weights_only=True (+ argparse.Namespace); CheckpointError on anything else."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        with torch.serialization.safe_globals([argparse.Namespace]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": the load is refused anyway
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if (broken := pickle_damage(path)) is not None:  # corrupt bytes, not a pickle that asks for code
            raise CheckpointError(f"{path}: not a readable torch checkpoint (corrupt: {broken})") from None
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        operand = re.search(r"Unsupported operand \d+", str(e))
        what = f" (it asks for {found.group(1)})" if found else f" ({operand.group(0)})" if operand else ""
        hint = ""
        if found and found.group(1).split(".")[0] in ("omegaconf", "fairseq"):
            hint = "; a hydra-era fairseq checkpoint must be converted first (see probes.models.slstm_import)"
        raise CheckpointError(f"{path}: {REFUSED}{what}{hint}") from None
    except (RuntimeError, OSError, EOFError, ValueError) as e:
        reason = " ".join(str(e).split())[:200]
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({reason})") from None


def pickle_damage(path: Path) -> str | None:
    """Why the file's pickle stream (``data.pkl`` inside a zip checkpoint) is not a well-formed
    pickle, or None when it is one. Only parses opcodes (pickletools): nothing is executed."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                member = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
                if member is None:
                    return "a zip file without data.pkl"
                data = z.read(member)
        else:
            data = path.read_bytes()
        for _ in pickletools.genops(data):
            pass
    except (ValueError, zipfile.BadZipFile, OSError, EOFError) as e:
        return " ".join(str(e).split())[:120] or type(e).__name__
    return None


def _args_of(ckpt: dict) -> dict:
    """The training arguments as a dict (fairseq ``args`` Namespace, a plain dict, or cfg['model'])."""
    args = ckpt.get("args")
    if args is None and isinstance(ckpt.get("cfg"), dict):
        args = ckpt["cfg"].get("model")
    if isinstance(args, argparse.Namespace):
        return vars(args)
    return dict(args) if isinstance(args, dict) else {}


def fairseq_to_native(ckpt: object, num_layers: int | None = None) -> tuple[SLSTMConfig, dict, dict]:
    """A loaded fairseq checkpoint (or bare state dict) -> (config, our state dict, notes)."""
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"not a fairseq checkpoint: the file holds a {type(ckpt).__name__}, not a dict")
    state = ckpt.get("model", ckpt)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError("not a fairseq checkpoint: no state dict of tensors under 'model'")
    args = _args_of(ckpt)
    p = "encoder.encoder.layer."
    if f"{p}embed_positions.weight" in state or args.get("pos_g2h") or args.get("pos_h2g"):
        raise CheckpointError("this S-LSTM checkpoint uses positions inside the block (pos_g2h / pos_h2g), "
                              "which probes.models.slstm does not implement (the released models use pos_input)")
    need = ["encoder.embed_tokens.weight", f"{p}WV_t_ilrfsou.weight", f"{p}U_t_ilrfsou.weight",
            f"{p}WU_g_fo.weight", f"{p}WU_g_f_.weight"]
    missing = [k for k in need if k not in state]
    if missing:
        raise CheckpointError(f"not an S-LSTM fairseq checkpoint: missing {', '.join(missing)}")
    V, d = state["encoder.embed_tokens.weight"].shape
    L = args.get("encoder_layers", num_layers)
    if L is None:
        raise CheckpointError("the checkpoint does not record its number of steps (args.encoder_layers): "
                              "give num_layers (registry field `num_layers:`)")
    ln = f"{p}i_norm.weight" in state
    if "ln" in args and bool(args["ln"]) != ln:
        raise CheckpointError(f"the checkpoint's args say ln={args['ln']} but its state dict "
                              f"{'has' if ln else 'lacks'} the gate LayerNorms ({p}i_norm.weight)")
    pos = state.get("encoder.embed_positions.weight")
    if pos is None:
        raise CheckpointError("the checkpoint has no encoder.embed_positions (trained without pos_input); "
                              "probes.models.slstm needs input positions")
    pad = int(args.get("padding_idx", FAIRSEQ_PAD))
    cfg = SLSTMConfig(vocab_size=int(V), hidden_size=int(d), num_layers=int(L),
                      max_positions=int(pos.shape[0]) - pad - 1, window=int(args.get("slstm_kernel_size", 1)),
                      dropout=0.0, pad_id=pad, gate_layer_norm=ln)
    used = {"encoder.embed_positions.weight"}  # every key the mapping reads; the rest must be ignored on purpose

    def f(key: str) -> torch.Tensor:
        if key not in state:
            raise CheckpointError(f"not an S-LSTM fairseq checkpoint of the released layout: missing {key}")
        used.add(key)
        return state[key].detach().to(torch.float32).clone()

    out = {"slstm.embed_tokens.weight": f("encoder.embed_tokens.weight"),
           "slstm.embed_positions.weight": pos[pad + 1:].detach().to(torch.float32).clone()}
    for k in ("weight", "bias"):
        out[f"slstm.layernorm_embedding.{k}"] = f(f"encoder.layernorm_embedding.{k}")
    for theirs, ours in LINEARS.items():
        out[f"slstm.block.{ours}.weight"] = f(f"{p}{theirs}.weight")
        if f"{p}{theirs}.bias" in state:
            out[f"slstm.block.{ours}.bias"] = f(f"{p}{theirs}.bias")
    for k in ("weight", "bias"):
        if ln:
            out[f"slstm.block.token_norm.{k}"] = torch.stack([f(f"{p}{g}_norm.{k}") for g in TOKEN_NORMS])
            out[f"slstm.block.sent_norm.{k}"] = torch.stack([f(f"{p}{g}_norm.{k}") for g in SENT_NORMS])
        else:  # unused without gate LayerNorms; identity values keep the state dict complete
            fill = torch.ones if k == "weight" else torch.zeros
            out[f"slstm.block.token_norm.{k}"] = fill(7, d)
            out[f"slstm.block.sent_norm.{k}"] = fill(3, d)
    head = "encoder.lm_head."
    ignored = sorted(k for k in state if k.startswith(("classification_heads.", "encoder.lm_head_")))
    plain_args = {k: v for k, v in args.items() if isinstance(v, (int, float, str, bool))}
    notes: dict[str, object] = {"fairseq_args": plain_args, "ignored_keys": ignored}
    if f"{head}dense.weight" in state:
        for k in ("dense.weight", "dense.bias", "layer_norm.weight", "layer_norm.bias", "bias"):
            out[f"lm_head.{k}"] = f(head + k)
        if f"{head}weight" in state:
            used.add(f"{head}weight")
            if not torch.equal(state[f"{head}weight"], state["encoder.embed_tokens.weight"]):
                notes["untied_lm_head"] = "lm_head.weight differs from embed_tokens; the tied embeddings are used"
    else:
        notes["no_lm_head"] = True
    unknown = [k for k in state if k not in used and k not in ignored]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise CheckpointError(f"refused to load partially: {len(unknown)} checkpoint key(s) the S-LSTM mapping "
                              f"does not know (another architecture variant?): {', '.join(unknown[:5])}{more}")
    return cfg, out, notes


def build_model(cfg: SLSTMConfig, state: dict) -> SLSTMForMaskedLM:
    """Our model with an imported state dict (the LM head keeps its initial values if absent)."""
    model = SLSTMForMaskedLM(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("lm_head.")]
    if missing or unexpected:
        raise CheckpointError(f"imported weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def import_fairseq(path: str | Path, num_layers: int | None = None) -> tuple[SLSTMForMaskedLM, dict]:
    """Read a fairseq S-LSTM checkpoint file (safely) into (SLSTMForMaskedLM in float32, notes)."""
    cfg, state, notes = fairseq_to_native(safe_load(path), num_layers)
    return build_model(cfg, state), notes


def export_fairseq_state_dict(model: SLSTMForMaskedLM) -> dict:
    """Our model in the fairseq layout (the inverse of :func:`fairseq_to_native`; positions padded
    back with pad + 1 leading rows; the ``*_norm`` keys only when the model has gate LayerNorms)."""
    sd = model.state_dict()
    d = model.config.hidden_size
    pad = model.config.pad_id
    p = "encoder.encoder.layer."
    pos = sd["slstm.embed_positions.weight"]
    out = {"encoder.embed_tokens.weight": sd["slstm.embed_tokens.weight"].clone(),
           "encoder.embed_positions.weight": torch.cat([torch.zeros(pad + 1, d), pos]),
           "encoder.layernorm_embedding.weight": sd["slstm.layernorm_embedding.weight"].clone(),
           "encoder.layernorm_embedding.bias": sd["slstm.layernorm_embedding.bias"].clone()}
    for theirs, ours in LINEARS.items():
        out[f"{p}{theirs}.weight"] = sd[f"slstm.block.{ours}.weight"].clone()
        if f"slstm.block.{ours}.bias" in sd:
            out[f"{p}{theirs}.bias"] = sd[f"slstm.block.{ours}.bias"].clone()
    for k in ("weight", "bias") if model.config.gate_layer_norm else ():  # fairseq has *_norm only with ln
        for r, g in enumerate(TOKEN_NORMS):
            out[f"{p}{g}_norm.{k}"] = sd[f"slstm.block.token_norm.{k}"][r].clone()
        for r, g in enumerate(SENT_NORMS):
            out[f"{p}{g}_norm.{k}"] = sd[f"slstm.block.sent_norm.{k}"][r].clone()
    for k in ("dense.weight", "dense.bias", "layer_norm.weight", "layer_norm.bias", "bias"):
        out[f"encoder.lm_head.{k}"] = sd[f"lm_head.{k}"].clone()
    out["encoder.lm_head.weight"] = out["encoder.embed_tokens.weight"]
    return out


def convert(checkpoint: str | Path, sentencepiece: str | Path, out: str | Path, num_layers: int | None = None,
            dtype: str = "float32") -> Path:
    """Write the native folder (config.json + model.safetensors + sentencepiece.model)."""
    model, notes = import_fairseq(checkpoint, num_layers)
    out = Path(out)
    tok = {"type": "sentencepiece", "file": "sentencepiece.model", "id_offset": SPM_OFFSET,
           "bos": 0, "pad": FAIRSEQ_PAD, "eos": 2, "unk": 3, "mask": model.config.vocab_size - 1}
    save_pretrained(model, out, dtype=dtype, extra_config={"tokenizer": tok, "imported_from": str(checkpoint),
                                                           "import_notes": notes})
    shutil.copyfile(sentencepiece, out / "sentencepiece.model")
    json.loads((out / CONFIG_NAME).read_text())  # written and readable
    return out


@dataclass
class Config:
    """Convert a fairseq S-LSTM checkpoint to the native folder."""

    checkpoint: str = arg("", "the fairseq checkpoint (.pt, read with weights_only=True)", positional=True)
    sentencepiece: str = arg("", "the SentencePiece .model the checkpoint was trained with (required)")
    out: str = arg("", "output folder (required)")
    num_layers: int | None = arg(None, "recurrent steps, if the checkpoint lacks args", min=1)
    dtype: str = arg("float32", "dtype of the saved weights", choices=("float32", "float16", "bfloat16"))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    for flag, value in (("--sentencepiece", cfg.sentencepiece), ("--out", cfg.out)):
        if not value:
            raise CheckpointError(f"{flag} is required")
    print(convert(cfg.checkpoint, cfg.sentencepiece, cfg.out, cfg.num_layers, cfg.dtype))


if __name__ == "__main__":
    run_main(main)
