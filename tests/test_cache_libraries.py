"""A cache entry knows the library code that computed it: its versions are recorded, and a hit under other versions
is checked (one batch recomputed) before it is served; a forward that changed behind a version change is never
served stale. Also: transformers' hub-kernel decorator (the kernels package) is library code, not a patch.

Model: the seeded random-init ``tiny-bert`` (checkpoints.yaml); caches in ``tmp_path``. A library upgrade is played
by giving :func:`probes.capture.libraries.library_versions` other versions, a forward change by shifting every state
the encoder class returns (the suite's own Encoder class is no torch module: no run-time patch check sees it, as no
check sees a library release change its forward).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import probes
import probes.capture.libraries as libraries
from probes import extract

TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here.",
         "Five texts, so that a batch of two leaves one over.", "And a sixth one, the longest of them all by far."]
OTHER = {"torch": "2.12.0", "transformers": "5.23.0", "tokenizers": "0.23.3", "kernels": None}


def run(**kw):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        acts = extract("tiny-bert", TEXTS, progress=False, batch_size=4, **kw)
    return acts, [str(w.message) for w in seen]


def states(acts):
    return np.asarray(acts.hidden), np.asarray(acts.sentence)


@pytest.fixture()
def made_under_other_versions(tmp_path, monkeypatch):
    """An entry of tiny-bert computed under OTHER's versions; this process then runs its own."""
    mine = libraries.library_versions()
    monkeypatch.setattr(libraries, "library_versions", lambda: dict(OTHER))
    acts, _ = run(cache_dir=tmp_path)
    assert acts.meta["libraries"] == OTHER
    monkeypatch.setattr(libraries, "library_versions", lambda: dict(mine))
    return tmp_path, acts


def test_an_entry_records_the_versions_that_computed_it(tmp_path):
    acts, _ = run(cache_dir=tmp_path)
    assert acts.meta["libraries"] == libraries.library_versions()
    assert set(acts.meta["libraries"]) == {"torch", "transformers", "tokenizers", "kernels"}
    again, said = run(cache_dir=tmp_path)  # same versions: served, nothing said, nothing checked
    assert "libraries_checked" not in again.meta and not any("computed under" in s for s in said)


def test_a_hit_under_other_versions_is_checked_once_then_reused(made_under_other_versions):
    cache, first = made_under_other_versions
    acts, said = run(cache_dir=cache)
    told = [s for s in said if "computed under" in s]
    assert len(told) == 1 and "transformers 5.23.0" in told[0] and "equal bit for bit" in told[0], said
    assert "reused" in told[0]
    assert acts.meta["libraries"] == OTHER  # the versions that made the states, not the reader's
    checked = acts.meta["libraries_checked"]
    assert checked["versions"] == libraries.library_versions() and checked["equal"] and checked["texts"] >= 1
    for a, b in zip(states(acts), states(first)):
        np.testing.assert_array_equal(a, b)
    later, said = run(cache_dir=cache)  # the check is remembered for this entry: not run, not said again
    assert not any("computed under" in s for s in said)
    assert later.meta["libraries_checked"]["versions"] == libraries.library_versions()


def test_a_forward_changed_behind_a_version_change_is_never_served(made_under_other_versions, monkeypatch):
    cache, first = made_under_other_versions
    enc = probes.load("tiny-bert")
    forward = type(enc).forward

    def shifted(self, *a, **kw):  # what a release that changes the forward does to every state
        out = forward(self, *a, **kw)
        return dataclasses.replace(out, hidden=[h + 0.25 for h in out.hidden])

    monkeypatch.setattr(type(enc), "forward", shifted)
    fresh, _ = run(cache_dir=None)
    acts, said = run(cache_dir=cache)
    assert any("different" in s and "extracting again" in s for s in said), said
    for a, b in zip(states(acts), states(fresh)):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)  # float16 storage
    assert np.abs(states(acts)[0] - states(first)[0]).max() > 0.2  # not the stale states
    assert acts.meta["libraries"] == libraries.library_versions()  # the new entry is this process's
    again, said = run(cache_dir=cache)
    assert not any("computed under" in s for s in said)
    np.testing.assert_array_equal(states(again)[0], states(acts)[0])


def test_a_record_of_a_check_belongs_to_its_entry(made_under_other_versions):
    """A check remembered for one entry is not taken for another entry written later under the same key."""
    cache, first = made_under_other_versions
    run(cache_dir=cache)
    entry = cache / "tiny-bert" / first.meta["key"]
    assert libraries.checked_before(entry) is not None
    meta = entry / "meta.json"
    meta.write_text(meta.read_text(encoding="utf-8").replace('"doc": "', '"doc": "0'), encoding="utf-8")
    assert libraries.checked_before(entry) is None


def test_a_check_compares_after_rounding_to_the_storage_dtype():
    tol = libraries.tolerance("float16", "float32")
    assert tol == pytest.approx(2 * float(np.finfo(np.float16).eps))
    assert libraries.tolerance("float32", "float32") == pytest.approx(1e-5)
    assert libraries.tolerance("float32", "bfloat16") == pytest.approx(2.0 ** -6)


def test_the_hub_kernel_decorator_is_library_code():
    """kernels' use_kernel_forward_from_hub puts a kernel_condition lambda of its own on the class: not a patch."""
    kernels = pytest.importorskip("kernels")
    import torch

    from probes.models.patches import class_patch

    @kernels.use_kernel_forward_from_hub("SomeActivation")
    class SomeActivation(torch.nn.Module):
        def forward(self, x):
            return x

    assert class_patch(SomeActivation) is None


def test_a_module_running_a_hub_kernel_is_named_and_not_cached(tmp_path):
    """kernelize puts a downloaded kernel's forward on the instance with its repository: named in one line."""
    enc = probes.load("tiny-bert")

    class Repo:  # what kernels' LayerRepository keeps (private attributes)
        _repo_id, _revision, layer_name = "kernels-community/activation", "a1b2c3", "GeLU"

    act = next(m for m in enc.model.modules() if type(m).__name__.endswith("Activation"))
    act.__dict__["_kernel_repo"] = Repo()
    act.__dict__["forward"] = act.forward
    with pytest.warns(UserWarning, match=r"runs a hub kernel \(kernels-community/activation@a1b2c3, layer GeLU"):
        extract(enc, TEXTS[:2], progress=False, cache_dir=tmp_path)
    assert not list(tmp_path.rglob("meta.json"))
