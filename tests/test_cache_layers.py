"""An entry keeps the token states of the layers an analysis reads, and no more.

``extract(..., layers=(-1,))`` (redundancy: one layer) and ``layers=()`` (maps, mog, mog_lens and
probing's perturbed texts: maps or sentence vectors only) store the same numbers as a full entry,
for what they keep, in fewer bytes; a full entry keeps the key it always had.
"""

from __future__ import annotations

import numpy as np
import pytest

from probes import ProbeError, extract
from probes.capture.store import entry_bytes
from probes.corpus import load_corpus, sample_sentences

TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here.",
         "Five texts, so that a batch of two leaves one over."]


def entry(cache, acts):
    return cache / acts.meta["model"]["name"] / acts.meta["key"]


def test_one_layer_is_the_full_entrys_layer_in_fewer_bytes(tmp_path, tiny_bert):
    full = extract(tiny_bert, TEXTS, cache_dir=tmp_path, progress=False, batch_size=2)
    last = extract(tiny_bert, TEXTS, cache_dir=tmp_path, progress=False, batch_size=2, layers=(-1,))
    L = full.n_layers
    assert last.meta["key"] != full.meta["key"] and last.meta["hidden_layers"] == [L] == last.hidden_layers
    assert last.n_layers == L and last.hidden.shape == (1, *full.hidden.shape[1:])
    assert np.array_equal(np.asarray(last.layer_hidden(-1)), np.asarray(full.hidden[L]))
    assert np.array_equal(np.asarray(last.layer_hidden(L)), np.asarray(full.layer_hidden(-1)))
    assert np.array_equal(np.asarray(last.sentence), np.asarray(full.sentence))  # every layer's, always
    with pytest.raises(ProbeError, match=f"keep the states of layers \\[{L}\\] only, not 0"):
        last.layer_hidden(0)
    hidden_bytes = [(entry(tmp_path, a) / "hidden.npy").stat().st_size - 128 for a in (last, full)]  # 128: header
    assert hidden_bytes[0] * (L + 1) == hidden_bytes[1]
    assert entry_bytes(entry(tmp_path, last)) < entry_bytes(entry(tmp_path, full))
    again = extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False, batch_size=2, layers=(-1,))
    assert again.meta["key"] == last.meta["key"] and again.hidden_layers == [L]  # read back from the cache
    with pytest.raises(ProbeError, match="out of range"):
        extract(tiny_bert, TEXTS, cache_dir=None, progress=False, layers=(L + 1,))


def test_no_token_states_for_a_maps_only_entry(tmp_path, tiny_bert):
    full = extract(tiny_bert, TEXTS, cache_dir=tmp_path, progress=False, maps=True)
    bare = extract(tiny_bert, TEXTS, cache_dir=tmp_path, progress=False, maps=True, layers=())
    assert bare.hidden.shape == (0, *full.hidden.shape[1:]) and bare.hidden_layers == []
    for t in range(len(TEXTS)):
        assert np.array_equal(bare.text_attentions(t), full.text_attentions(t))
    assert np.array_equal(np.asarray(bare.sentence), np.asarray(full.sentence))
    assert np.array_equal(bare.token_ids, full.token_ids) and bare.tokens == full.tokens
    hit = extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False, maps=True, layers=())  # verified read
    assert hit.meta["key"] == bare.meta["key"] and hit.hidden.shape[0] == 0
    assert entry_bytes(entry(tmp_path, bare)) < entry_bytes(entry(tmp_path, full))


def test_an_entry_of_every_layer_keeps_its_key(tmp_path):
    """The key of a full entry is what it would be without ``layers`` (CACHE_FORMAT 5: keys over the model's config
    and tokenizer files), so entries of every layer keep their keys: tiny-bert on 300 seeded sentences, float16."""
    texts = sample_sentences(load_corpus(), 300, seed=0)
    acts = extract("tiny-bert", texts, cache_dir=None, progress=False)
    assert acts.meta["key"] == "ecb265f5d2ad2e72225ae13e"
    assert "hidden_layers" not in acts.meta and acts.hidden_layers is None
