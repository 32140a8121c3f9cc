"""analyses.topic_model.fit_lda: the fit is saved without pickle and read back to the same numbers; a damaged file
is fitted again with a warning; the in-process memo; no cache folder, no file."""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict

import numpy as np
import pytest

from analyses import topic_model as tm
from analyses import topics as tp

THEMES = [
    "ship sea whale boat harpoon waves sailor captain deck storm ocean".split(),
    "ball dance gentleman manners fortune dinner sister marriage letter estate".split(),
    "engine railway station train carriage steam platform ticket signal journey".split(),
]


def corpus(n: int = 36, words: int = 60) -> list[str]:
    """Seeded texts, each mostly of one theme's words with a few of the others'."""
    rng = np.random.default_rng(0)
    texts = []
    for i in range(n):
        own, other = THEMES[i % 3], THEMES[(i + 1) % 3]
        texts.append(" ".join(rng.choice(own if rng.random() < 0.85 else other) for _ in range(words)))
    return texts


TEXTS = corpus()
PROBE = ["the whale and the harpoon at sea", "dinner at the ball with the gentleman", "the steam engine at the station",
         "", "sea ball train"]


def cfg(**kw) -> tp.Config:
    """The settings of topics' fast runs (3 topics, 1 pass, 5 iterations) and a dictionary filter for 36 texts."""
    return tp.Config(**{"topics": 3, "lda_passes": 1, "lda_iterations": 5, "no_below": 2, "no_above": 0.9, **kw})


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch):
    """Each test starts with an empty in-process memo (and leaves the module's own untouched)."""
    monkeypatch.setattr(tm, "_MEMO", OrderedDict())


def forget(monkeypatch):
    monkeypatch.setattr(tm, "_MEMO", OrderedDict())


def no_fit(monkeypatch):
    def refuse(texts, cfg):
        raise AssertionError("the LDA was fitted again")

    monkeypatch.setattr(tm, "_fit", refuse)


def assert_same_model(a, da, b, db):
    (lda_a, dict_a), (lda_b, dict_b) = (a, da), (b, db)
    assert lda_a is not lda_b
    assert dict_a.token2id == dict_b.token2id
    assert [dict_a[i] for i in range(len(dict_a))] == [dict_b[i] for i in range(len(dict_b))]
    for text in PROBE + TEXTS[:3]:
        assert dict_a.doc2bow(tm.preprocess(text)) == dict_b.doc2bow(tm.preprocess(text))
    assert lda_b.state.sstats.dtype == lda_a.state.sstats.dtype == np.float32
    assert np.array_equal(lda_a.state.sstats, lda_b.state.sstats)
    assert np.array_equal(lda_a.expElogbeta, lda_b.expElogbeta)  # sync_state rebuilds what the last M step set
    assert np.array_equal(lda_a.get_topics(), lda_b.get_topics())
    assert np.array_equal(lda_a.alpha, lda_b.alpha) and np.array_equal(lda_a.eta, lda_b.eta)
    for texts, seed in ((PROBE, 0), (TEXTS, 3)):
        theta = tm.topic_distributions(lda_a, dict_a, texts, seed)
        assert np.array_equal(theta, tm.topic_distributions(lda_b, dict_b, texts, seed))
    assert tm.top_words(lda_a) == tm.top_words(lda_b)
    assert lda_a.num_terms == lda_b.num_terms and lda_a.num_topics == lda_b.num_topics


def test_the_lda_read_back_gives_the_fitted_numbers_and_holds_no_pickle(tmp_path, monkeypatch):
    fitted = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)
    key = tm.lda_key(TEXTS, cfg())
    entry = tmp_path / ".lda" / key
    assert sorted(p.name for p in entry.iterdir()) == ["lda.json", "lda.npz"]
    meta = json.loads((entry / "lda.json").read_text())
    assert meta["key"] == key and meta["tokens"] == [fitted[1][i] for i in range(len(fitted[1]))]
    with np.load(entry / "lda.npz", allow_pickle=False) as z:  # plain arrays only
        assert z["sstats"].dtype == np.float32 and z["sstats"].shape == (3, len(fitted[1]))
    forget(monkeypatch)
    no_fit(monkeypatch)
    read = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)
    assert_same_model(*fitted, *read)
    # the RNG is where the fit left it: gensim's own inference, without a reseed, draws the same numbers
    bows = [fitted[1].doc2bow(tm.preprocess(t)) for t in PROBE[:3]]
    assert np.array_equal(fitted[0].inference(bows)[0], read[0].inference(bows)[0])


def test_the_memo_skips_the_read_and_the_key_sees_every_setting(tmp_path, monkeypatch):
    first = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)

    def refuse(*args):
        raise AssertionError("read from disk")

    monkeypatch.setattr(tm, "load_lda", refuse)
    again = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)
    assert again[0] is first[0] and again[1] is first[1]  # the same objects, nothing read
    keys = {tm.lda_key(TEXTS, cfg())}
    for change in ({"topics": 4}, {"seed": 1}, {"lda_passes": 2}, {"lda_iterations": 6}, {"no_below": 3},
                   {"no_above": 0.8}):
        keys.add(tm.lda_key(TEXTS, cfg(**change)))
    keys.add(tm.lda_key(TEXTS[:-1], cfg()))
    keys.add(tm.lda_key(TEXTS[:-1] + [TEXTS[-1] + " "], cfg()))
    keys.add(tm.lda_key(TEXTS, cfg(lda_chunk_words=5)))  # not an LDA setting: the chunks themselves are hashed
    assert len(keys) == 9


def damage_cut(entry):
    data = (entry / "lda.npz").read_bytes()
    (entry / "lda.npz").write_bytes(data[: len(data) // 2])


def damage_flip(entry):
    data = bytearray((entry / "lda.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit inside an array: the zip's CRC-32
    (entry / "lda.npz").write_bytes(bytes(data))


def damage_values(entry):  # a complete npz of other numbers (a torn pair of writes): the arrays' sha256
    with np.load(entry / "lda.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(entry / "lda.npz", **{**arrays, "sstats": arrays["sstats"] * 2})


def damage_json(entry):
    (entry / "lda.json").write_text('{"format": 1, "key": ')


def damage_key(entry):
    meta = json.loads((entry / "lda.json").read_text())
    (entry / "lda.json").write_text(json.dumps({**meta, "key": "0" * 64}))


def damage_version(entry):
    meta = json.loads((entry / "lda.json").read_text())
    (entry / "lda.json").write_text(json.dumps({**meta, "gensim": "0.0.1"}))


def damage_arrays(entry):  # a complete npz of another shape, its digest rewritten to match
    with np.load(entry / "lda.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["sstats"] = arrays["sstats"][:, :-1]
    np.savez(entry / "lda.npz", **arrays)
    meta = json.loads((entry / "lda.json").read_text())
    (entry / "lda.json").write_text(json.dumps({**meta, "arrays_sha256": tm.arrays_sha256(arrays)}))


def damage_words(entry):  # the word list that indexes the arrays, reversed: the arrays' own checksum still holds
    meta = json.loads((entry / "lda.json").read_text())
    (entry / "lda.json").write_text(json.dumps({**meta, "tokens": meta["tokens"][::-1]}))


def damage_numdocs(entry):
    meta = json.loads((entry / "lda.json").read_text())
    (entry / "lda.json").write_text(json.dumps({**meta, "numdocs": meta["numdocs"] + 1}))


@pytest.mark.parametrize("damage", [damage_cut, damage_flip, damage_values, damage_json, damage_key, damage_version,
                                    damage_arrays, damage_words, damage_numdocs])
def test_a_damaged_saved_lda_is_fitted_again_with_a_warning(tmp_path, monkeypatch, damage):
    fitted = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)
    entry = tmp_path / ".lda" / tm.lda_key(TEXTS, cfg())
    damage(entry)
    forget(monkeypatch)
    with pytest.warns(UserWarning, match="cannot be used.*fitting it again"):
        again = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path)
    assert_same_model(*fitted, *again)
    forget(monkeypatch)  # the refit replaced the damaged files: read back without a warning
    no_fit(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same_model(*fitted, *tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path))


def test_without_a_cache_folder_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = tm.fit_lda(TEXTS, cfg())
    assert tm.fit_lda(TEXTS, cfg())[0] is first[0]  # the memo
    assert list(tmp_path.iterdir()) == []
    assert tm.lda_folder(None) is None
    assert tm.lda_folder(tmp_path / "cache") == tmp_path / "cache" / ".lda"


def test_an_unwritable_cache_is_a_warning_not_an_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.warns(UserWarning, match="cannot save the fitted LDA"):
        lda, dictionary = tm.fit_lda(TEXTS, cfg(), cache_dir=tmp_path / "file")
    assert lda.num_topics == 3


@pytest.mark.slow
def test_topics_keeps_the_lda_in_the_runs_activation_cache(tmp_path, monkeypatch):
    """The command line's cache is <out>/cache, and a second run reads the LDA from it: the same result file."""
    args = ["--model-a", "tiny-gpt2-recurrent", "--model-b", "tiny-gpt2", "--n-contexts", "4",
            "--continuation-tokens", "3", "--topics", "3", "--lda-passes", "1", "--lda-iterations", "5",
            "--no-figures", "--out", str(tmp_path / "out")]
    monkeypatch.chdir(tmp_path)
    tp.main(args)
    (entry,) = (tmp_path / "out" / "cache" / ".lda").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["lda.json", "lda.npz"]
    first = (tmp_path / "out" / "results" / "topics" / "tiny-gpt2-recurrent-vs-tiny-gpt2.json").read_bytes()
    forget(monkeypatch)
    no_fit(monkeypatch)
    tp.main(args)
    again = (tmp_path / "out" / "results" / "topics" / "tiny-gpt2-recurrent-vs-tiny-gpt2.json").read_bytes()
    assert again == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
