"""Code replaced at run time (a monkeypatch) that changes a model's states while its weights, config and structure
stay the same: no cache key can see it, so :func:`probes.models.encoder.runtime_changes` reports it and the
extraction runs without the activation cache.

A function is identified by the module its code runs in (``fn.__globals__["__name__"]``), never by its
``__module__`` or ``__qualname__``: ``functools.wraps`` copies those from the function it wraps, which is how most
patching and steering code writes a wrapper. A wrapper's whole ``__wrapped__`` chain is checked, so a library's
decorator put around a function of the caller's is seen too. Checked:

* every function, static or class method and property in the ``__dict__`` of a module class and of each class in
  its MRO (``BertIntermediate.forward``, ``BertSelfAttention.transpose_for_scores``, ``torch.nn.LayerNorm.forward``):
  it must come from the class's own module or package, from a library that defines modules
  (:data:`FORWARD_HOMES`) or from the standard library (dataclasses, functools);
* the functions of ``torch``, ``torch.nn.functional`` and ``torch.Tensor``: a Python function that does not come
  from torch, or any entry (a builtin too: ``torch.nn.functional.gelu = torch.relu``) that is no longer the object
  it was when this module was imported (with ``import probes``);
* transformers' registries of attention and mask functions (:data:`REGISTRIES`): a function from outside the
  homes, registered under a new name or in place of ``sdpa``;
* the module-level functions of the modules that define the model's classes (transformers'
  ``modeling_bert.eager_attention_forward``, a model's remote code): a function defined in ``__main__`` (a script or
  a notebook), or any entry that is no longer the object it was the first time this process checked that module.

Every extraction runs these checks over a few hundred namespaces; a namespace found clean is remembered with the
objects it then held (:data:`_CLEAN`), and while it holds exactly those objects (compared by identity, so any
replacement, addition or removal is seen) it is not walked again: the checks cost about 1 ms instead of 15.

Not seen (docs/python-api.md lists them): a module-level function replaced, before the first extraction of the
process, by a function from an importable module of the caller's (not ``__main__``) or by a builtin; a builtin put
into ``torch`` before ``import probes``; a class attribute that is not a function; code that the forward reaches
through other objects than those above (another library's functions); a C++ or CUDA kernel replaced below Python.
"""

from __future__ import annotations

import functools
import sys
import types

import torch
import torch.nn.functional

# where the code of a module class may come from besides the class's own module: the libraries that define the
# modules (a forward inherited from torch.nn, or installed by transformers' own decorators). ``kernels`` is the
# library behind transformers' hub-kernel decorator (``use_kernel_forward_from_hub``), which puts its
# ``kernel_layer_name`` and ``kernel_condition`` on activation and norm classes: the class's forward stays its own.
# A kernel downloaded from the hub is other code (a module named after the kernel, not ``kernels.*``), and
# ``kernelize`` puts it on the instances, which :func:`probes.models.encoder.runtime_changes` reports.
FORWARD_HOMES = ("torch", "transformers", "probes", "kernels")
STDLIB = frozenset(sys.stdlib_module_names) | {"typing_extensions"}  # and its backports (deprecated)
# torch's namespaces of functions a forward calls, with what each entry was when this module was imported
TORCH_NAMESPACES = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.Tensor": torch.Tensor}
_TORCH_AT_IMPORT = {label: dict(vars(ns)) for label, ns in TORCH_NAMESPACES.items()}
_MODULES_SEEN: dict[str, dict[str, object]] = {}  # module name -> its functions the first time it was checked


# namespace (a class, or a name: "torch", "module transformers.models.bert.modeling_bert") -> the objects it held,
# in order, when a check last found it clean. What a check reads of a value (its module, its __wrapped__ chain, a
# property's functions) belongs to the object, so while a namespace holds the very same objects (compared with
# `is`: a replacement, addition or removal is seen) it is still clean. The tuples keep those objects alive, so an
# identity is never that of a new object at a freed one's address.
_CLEAN: dict[object, tuple] = {}


def _unchanged(key, values: tuple) -> bool:
    """Whether ``values`` are the very objects, in order, that ``key`` held when it was last found clean."""
    before = _CLEAN.get(key)
    return before is not None and len(before) == len(values) and all(a is b for a, b in zip(before, values))


def defining_module(fn) -> str | None:
    """The module whose globals ``fn``'s code runs in (``functools.wraps`` does not change it); None for an object
    without Python code (a builtin)."""
    g = getattr(fn, "__globals__", None)
    return g.get("__name__") if isinstance(g, dict) else None


def _layers(value, depth: int = 0):
    """The Python functions ``value`` runs: the function itself, the one below a static or class method, a
    property's getter and setter, a partial's function, a bound method's function, and each function of a
    ``__wrapped__`` chain (a decorator's wrapper and what it wraps)."""
    if depth > 32:
        return
    if isinstance(value, (staticmethod, classmethod, types.MethodType)):
        yield from _layers(value.__func__, depth + 1)
    elif isinstance(value, property):
        for f in (value.fget, value.fset):
            if f is not None:
                yield from _layers(f, depth + 1)
    elif isinstance(value, functools.partial):
        yield from _layers(value.func, depth + 1)
    elif isinstance(value, types.FunctionType):
        yield value
        inner = vars(value).get("__wrapped__")
        if inner is not None and inner is not value:
            yield from _layers(inner, depth + 1)


def _where(fn) -> str:
    code = fn.__code__
    return f"{defining_module(fn)}.{getattr(code, 'co_qualname', code.co_name)}"


def _home(module: str) -> bool:
    return module.split(".")[0] in FORWARD_HOMES or module.split(".")[0] in STDLIB


def _from_elsewhere(value, own: tuple[str, ...]) -> str | None:
    """Where the first function ``value`` runs comes from, when that is neither a module of ``own`` (or their
    packages) nor a home (:data:`FORWARD_HOMES`, the standard library); else None."""
    for fn in _layers(value):
        module = defining_module(fn)
        if module is None or _home(module) or any(module == o or module.startswith(o + ".") for o in own):
            continue
        return _where(fn)
    return None


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0] if "." in module else module


def class_patch(cls: type) -> str | None:
    """``Class.attribute is replaced on the class by module.function`` for the first function of ``cls`` or a class
    of its MRO that does not come from that class's module or package nor from a home; None when there is none."""
    return next((found for klass in cls.__mro__ if (found := class_patch_own(klass)) is not None), None)


def torch_patch() -> str | None:
    """``torch.nn.functional.layer_norm is replaced by ...`` for the first entry of :data:`TORCH_NAMESPACES` that is
    a Python function from outside torch, or another object than at import; None when there is none."""
    for label, ns in TORCH_NAMESPACES.items():
        before = _TORCH_AT_IMPORT[label]
        items = list(vars(ns).items())
        values = tuple(v for _, v in items)
        if _unchanged(label, values):
            continue
        for name, value in items:
            if (name in before and value is not before[name] and not isinstance(value, types.ModuleType)
                    and not _wraps(value, before[name])):  # torch wraps some of its functions at first use
                return f"{label}.{name} is replaced by {_name(value)}"
            if (where := _from_elsewhere(value, ("torch",))) is not None:
                return f"{label}.{name} is replaced by {where}"
        _CLEAN[label] = values
    return None


def _wraps(value, original) -> bool:
    """Whether ``value``'s ``__wrapped__`` chain reaches ``original`` through functions of torch only (torch's own
    lazy wrappers, such as the one ``torch.manual_seed`` gets at its first call)."""
    for _ in range(32):
        if value is original:
            return True
        module = defining_module(value)
        if module is None or module.split(".")[0] != "torch":
            return False
        value = vars(value).get("__wrapped__") if hasattr(value, "__dict__") else None
    return False


def module_function_patch(modules: set[str]) -> str | None:
    """``modeling_bert.eager_attention_forward is replaced by ...`` for the first module-level function of
    ``modules`` defined in ``__main__``, or that is another object than the first time this process checked the
    module; None when there is none."""
    for module_name in sorted(modules):
        module = sys.modules.get(module_name)
        if module is None or module_name.split(".")[0] in ("torch", "builtins"):
            continue
        items = list(vars(module).items())
        values = tuple(v for _, v in items)
        key = f"module {module_name}"  # a module's namespace, whichever module object holds the name now
        if _unchanged(key, values):
            continue
        functions = {k: v for k, v in items if callable(v) and not isinstance(v, type)}
        seen = _MODULES_SEEN.setdefault(module_name, functions)
        for name, value in functions.items():
            if name in seen and value is not seen[name]:
                return f"{module_name}.{name} is replaced by {_name(value)}"
            if module_name != "__main__" and any(defining_module(fn) == "__main__" for fn in _layers(value)):
                return f"{module_name}.{name} is replaced by {_name(value)}"
        _CLEAN[key] = values
    return None


def _name(value) -> str:
    """A function's module and name, as the reader would look it up."""
    fns = list(_layers(value))
    if fns:
        return _where(fns[0])
    return f"{getattr(value, '__module__', None) or '?'}.{getattr(value, '__qualname__', type(value).__name__)}"


# transformers' registries of the functions a forward looks up by name (attention implementations, mask builders)
REGISTRIES = (("transformers.modeling_utils", "ALL_ATTENTION_FUNCTIONS"),
              ("transformers.masking_utils", "ALL_MASK_ATTENTION_FUNCTIONS"))


def registry_patch() -> str | None:
    """``ALL_ATTENTION_FUNCTIONS['sdpa'] is module.function`` for the first entry of :data:`REGISTRIES` whose
    function comes from outside the homes (a caller's attention function registered or put in place of
    transformers' own); None when there is none."""
    for module_name, attr in REGISTRIES:
        registry = getattr(sys.modules.get(module_name), attr, None)
        try:
            items = list(registry.items()) if registry is not None else []
        except (TypeError, AttributeError):
            continue
        for key, fn in items:
            if (where := _from_elsewhere(fn, ())) is not None:
                return f"transformers' {attr}[{key!r}] is {where}"
    return None


def code_patch(classes: list[type]) -> str | None:
    """The first patch (:func:`torch_patch`, :func:`registry_patch`, :func:`class_patch` of each of ``classes``,
    :func:`module_function_patch` of their modules) in words, or None."""
    if (found := torch_patch() or registry_patch()) is not None:
        return found
    seen: set[type] = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass in seen:
                continue
            seen.add(klass)
            if (found := class_patch_own(klass)) is not None:
                return found
    return module_function_patch({c.__module__ for c in seen})


def class_patch_own(klass: type) -> str | None:
    """:func:`class_patch` for ``klass``'s own ``__dict__`` only (the MRO walked by the caller, each class once)."""
    if klass is object:
        return None
    items = list(vars(klass).items())
    values = tuple(v for _, v in items)
    if _unchanged(klass, values):
        return None
    own = (klass.__module__, _package(klass.__module__))
    for name, value in items:
        if (where := _from_elsewhere(value, own)) is not None:
            return f"{klass.__name__}.{name} is replaced on the class by {where}"
    _CLEAN[klass] = values
    return None
