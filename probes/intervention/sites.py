"""Where layer l's states are made in each kind of model the suite loads, and the hooks that edit them there.

Layer l means what the capture records as ``hidden[l]`` (0 = the embedding output, l = layer l's output), so an
edit at layer l is read back, exactly, in the states ``probes.extract`` records for that layer, and every later
layer (and the model's head) computes from the edited states:

* transformers models (any base model, or one under a head): the modules transformers records hidden states from
  (the model class's ``_can_record_outputs``; without one, the ModuleList of its ``num_hidden_layers`` layers).
  Their calls are counted in each forward pass, so a layer module shared by all layers (ALBERT) is layer k at its
  k-th call. hidden[0] is the first layer's input (edited by a pre-hook), or, where the layers are run by a loop
  that records its input itself (MPNet), the input of the module that holds the layers. A model with a final norm
  applied to the last layer only (GPT-2's ``ln_f``, Llama's ``norm``) has hidden[L] after that norm: a layer-L edit
  is made on the norm's output;
* the S-LSTM: hidden[0] is the embedding output (from which the token, cell and sentence-node states of step 0 are
  all made); hidden[l] its token states h after step l. Its cell states c and sentence node g are left as the
  step made them (they are not hidden[l]), so information an edit removes from h can come back from c;
* the Graph-Transformer (MoG): hidden[0] the embedding output, hidden[l] layer l's output (which the next layers
  read both as r_f and, one layer later, as r_p).

:func:`hooked` installs the hooks for some interventions on a model and removes them on exit; after every forward
pass of the model it checks that each intervention was applied (a layer a forward pass never reached is an error,
not an edit silently missing).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from probes.errors import ProbeError
from probes.intervention.edits import Batch


@dataclass
class Sites:
    """The modules of one model where its layers' states are made."""

    root: torch.nn.Module  # its forward takes the input ids and mask; one call = one forward pass
    num_layers: int  # L
    layers: list[torch.nn.Module]  # the k-th call (k = 1..L, over them all) outputs hidden[k]
    first: torch.nn.Module | None = None  # its output is hidden[0] (None: see first_input_of)
    first_input_of: torch.nn.Module | None = None  # its first input is hidden[0] (None: the first layer call's is)
    final: torch.nn.Module | None = None  # a final norm: its output is hidden[L]
    name: str = ""  # the model's class, for messages


def find_sites(model) -> Sites:
    """The :class:`Sites` of a model: an Encoder or LM of the suite, a transformers model (base or with a head), the
    suite's S-LSTM or Graph-Transformer (or their masked-LM wrappers); one ProbeError line for anything else."""
    from probes.models.mog import MoG, MoGForMaskedLM
    from probes.models.recurrent import RecurrentLM
    from probes.models.slstm import SLSTM, SLSTMForMaskedLM

    m = model
    if not isinstance(m, torch.nn.Module) and isinstance(getattr(m, "model", None), torch.nn.Module):
        m = m.model  # an Encoder or an LM of the suite
    if isinstance(m, RecurrentLM):
        m = m.lm
    if isinstance(m, (SLSTMForMaskedLM, MoGForMaskedLM)):
        m = m.slstm if isinstance(m, SLSTMForMaskedLM) else m.mog
    if isinstance(m, SLSTM):
        return Sites(m, m.config.num_layers, [m.block], first=m.dropout, name="SLSTM")
    if isinstance(m, MoG):
        return Sites(m, m.config.num_layers, list(m.layers), first=m.dropout, name="MoG")
    from transformers import PreTrainedModel  # a dependency of the suite

    if isinstance(m, PreTrainedModel):
        return _hf_sites(m.base_model)
    raise ProbeError(f"cannot find the layers of a {type(model).__name__}: interventions reach transformers models, "
                     "the S-LSTM and the Graph-Transformer (and the suite's Encoders and LMs of them)")


def _hf_sites(base) -> Sites:
    """The sites of a transformers base model (see the module docstring)."""
    from probes.models.hf import FINAL_NORMS, has_final_norm

    L = int(base.config.num_hidden_layers)
    name = type(base).__name__
    recorded = (getattr(type(base), "_can_record_outputs", None) or {}).get("hidden_states")
    layers = _recorded_modules(base, recorded) if recorded is not None else []
    first_input_of = None
    if not layers:  # layers run by the model's own loop, which records hidden states itself
        lists = [(n, m) for n, m in base.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == L]
        if not lists:
            raise ProbeError(f"cannot find the {L} layers of a {name}: neither the modules transformers records hidden "
                             "states from nor a list of that many layers")
        owner_name, found = lists[0]
        layers = list(found)
        first_input_of = base.get_submodule(owner_name.rpartition(".")[0]) if "." in owner_name else base
        if first_input_of is base:
            raise ProbeError(f"a {name} runs its layers in its own forward: its hidden[0] cannot be edited")
    final = None
    if has_final_norm(base):
        inner = getattr(base, "decoder", base)
        final = next(getattr(inner, n) for n in FINAL_NORMS if isinstance(getattr(inner, n, None), torch.nn.Module))
    return Sites(base, L, layers, first_input_of=first_input_of, final=final, name=name)


def _recorded_modules(base, spec) -> list[torch.nn.Module]:
    """The submodules of ``base`` that transformers' hidden-state recorder ``spec`` (a class, a class name, an
    OutputRecorder or a list of them) records from, in module order."""
    specs = spec if isinstance(spec, list) else [spec]
    found = []
    for name, module in base.named_modules():
        for s in specs:
            target = getattr(s, "target_class", s if isinstance(s, type) else None)
            cls_name = getattr(s, "class_name", s if isinstance(s, str) else None)
            layer_name = getattr(s, "layer_name", None)
            if ((target is not None and isinstance(module, target)) or (cls_name and name.endswith(cls_name))) and (
                    layer_name is None or f".{layer_name.strip('.')}." in f".{name}."):
                found.append(module)
                break
    return found


# ----------------------------------------------------------------------------- the hooks


def _state(output):
    """The (B, n, d) states a layer module returned: the tensor, a tuple's first entry, an S-LSTM step's h."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output:
        return _state(output[0])
    if dataclasses.is_dataclass(output) and not isinstance(output, type) and hasattr(output, "h"):
        return output.h
    raise ProbeError(f"a layer returned a {type(output).__name__}: its states cannot be found to edit")


def _with_state(output, new: torch.Tensor):
    """``output`` with its states (:func:`_state`) replaced by ``new``."""
    if isinstance(output, torch.Tensor):
        return new
    if isinstance(output, (tuple, list)):
        return type(output)((_with_state(output[0], new), *output[1:]))
    return dataclasses.replace(output, h=new)


class _Pass:
    """The state of one forward pass: the batch's mask and ids, the layer calls so far, the edits applied."""

    def __init__(self, interventions, sites: Sites):
        self.interventions, self.sites = interventions, sites
        self.calls, self.applied = 0, set[int]()
        self.mask: torch.Tensor | None = None  # (B, n)
        self.ids: torch.Tensor | None = None  # (B, n)
        self.past = 0  # positions in the KV cache before this pass

    def start(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
        self.ids = ids if isinstance(ids, torch.Tensor) and ids.dim() == 2 and not ids.is_floating_point() else None
        self.mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None
        self.past = _past_length(kwargs)
        self.calls, self.applied = 0, set[int]()

    def batch(self, h: torch.Tensor) -> Batch:
        n = h.shape[1]
        mask = (self.mask[:, -n:] != 0) if self.mask is not None else torch.ones(h.shape[:2], dtype=torch.bool)
        before = None  # (B,) the real tokens of a KV-cache step's past (None: no past, a pass over whole inputs)
        if self.past and self.mask is not None and self.mask.shape[1] == self.past + n:  # the mask covers the past
            before = (self.mask[:, :-n] != 0).sum(dim=1).to(h.device)
        elif self.past:  # no mask over the past: every cached position is a real token
            before = torch.full(h.shape[:1], self.past, dtype=torch.long, device=h.device)
        return Batch(mask.to(h.device), None if self.ids is None else self.ids[:, -n:].to(h.device), before)

    def edit(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """``h`` (B, n, d) after every intervention at ``layer``, on the real tokens only."""
        for i, iv in enumerate(self.interventions):
            if iv.layer_index(self.sites.num_layers) == layer:
                batch = self.batch(h)
                new = iv.edit.apply(h, batch)
                h = torch.where(batch.mask[..., None], new.to(h.dtype), h)
                self.applied.add(i)
        return h

    def finish(self, module, args, output):
        missing = [iv for i, iv in enumerate(self.interventions) if i not in self.applied]
        if missing:
            raise ProbeError(f"the intervention at layer {missing[0].layer} was not applied in a forward pass of the "
                             f"{self.sites.name} ({self.calls} layer calls of {self.sites.num_layers})")


def _past_length(kwargs: dict) -> int:
    """How many positions a forward pass's KV cache holds before it runs (0 without one)."""
    for name in ("past_key_values", "cache"):
        cache = kwargs.get(name)
        if cache is not None and callable(getattr(cache, "get_seq_length", None)):
            return int(cache.get_seq_length())
    return 0


@contextlib.contextmanager
def hooked(model, interventions):
    """Inside: ``interventions`` (a sequence of :class:`~probes.intervention.Intervention`) edit ``model``'s states
    in every forward pass (see :func:`find_sites`); the hooks are removed on exit. transformers' own recording
    hooks run behind these (:func:`~probes.models.encoder.recording_after_changing_hooks`), so a model's
    ``output_hidden_states`` show the edited states."""
    from probes.models.encoder import recording_after_changing_hooks

    interventions = tuple(interventions)
    if not interventions:
        yield
        return
    sites = find_sites(model)
    L = sites.num_layers
    wanted = {iv.layer_index(L) for iv in interventions}  # ProbeError for a layer out of range
    run = _Pass(interventions, sites)
    handles = [sites.root.register_forward_pre_hook(run.start, with_kwargs=True),
               sites.root.register_forward_hook(run.finish)]

    def output_hook(layer: int) -> Callable:
        return lambda module, args, output: _with_state(output, run.edit(layer, _state(output)))

    def counting(module, args, kwargs):
        run.calls += 1
        if run.calls == 1 and 0 in wanted and sites.first is None and sites.first_input_of is None:
            return _edit_input(args, kwargs, lambda h: run.edit(0, h))
        return None

    def after_layer(module, args, output):
        k = run.calls
        if k in wanted and not (k == L and sites.final is not None):
            return _with_state(output, run.edit(k, _state(output)))
        return None

    if 0 in wanted and sites.first is not None:
        handles.append(sites.first.register_forward_hook(output_hook(0)))
    if 0 in wanted and sites.first_input_of is not None:
        handles.append(sites.first_input_of.register_forward_pre_hook(
            lambda module, args, kwargs: _edit_input(args, kwargs, lambda h: run.edit(0, h)), with_kwargs=True))
    for module in dict.fromkeys(sites.layers):  # a module shared by several layers is hooked once
        handles.append(module.register_forward_pre_hook(counting, with_kwargs=True))
        handles.append(module.register_forward_hook(after_layer))
    if L in wanted and sites.final is not None:
        handles.append(sites.final.register_forward_hook(output_hook(L)))
    try:
        with recording_after_changing_hooks(sites.root):
            yield
    finally:
        for h in handles:
            h.remove()


def _edit_input(args: tuple, kwargs: dict, edit: Callable):
    """(args, kwargs) with the first input (``hidden_states``) edited."""
    if args:
        return (edit(args[0]), *args[1:]), kwargs
    if "hidden_states" in kwargs:
        return args, {**kwargs, "hidden_states": edit(kwargs["hidden_states"])}
    raise ProbeError("the first layer was called without its input states: hidden[0] cannot be edited")
