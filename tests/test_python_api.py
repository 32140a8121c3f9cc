"""The Python call of every kind of input does what the command line does: ``<analysis>.run(model, texts)`` on a
loaded model object (with ``tokenizer=``) or a name, and a list of the caller's texts, builds every input the
CLI builds (windows for redundancy, the perturbed sentences of probing's bigram_shift, documents for an LM),
records the settings used, says which task it could not build and why, and leaves the model's train/eval mode.
"""

from __future__ import annotations

import pytest
import torch

import probes
from analyses import anisotropy, maps, perplexity, probing, redundancy, similarity
from analyses.common import CALLER_TEXTS
from probes.config import SampleConfig
from probes.errors import ProbeError


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """300 sentences of the default corpus, as a list of strings the caller brings."""
    return SampleConfig(n_sentences=300).draw("default", seed=3)[0]


@pytest.fixture(scope="module")
def tiny_bert():
    """A tiny random BertModel object, loaded the default way (its attention kernel as transformers picks it),
    and the committed MiniLM tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=128))
    return model, tok


def test_a_model_object_records_the_settings_used_and_keeps_its_mode(tiny_bert, texts, tmp_path):
    model, tok = tiny_bert
    model.train()
    res = anisotropy.run(model, texts[:20], tokenizer=tok, name="my-bert", n_tokens=5000, cache_dir=tmp_path)
    assert model.training  # left in train mode, as it came
    drawn = int(res.definitions["token_sample"].split()[0])
    assert res.config["n_tokens"] == drawn < 5000  # the occurrences drawn, not the default asked for
    assert res.model_name == "my-bert" and res.corpus == {**res.corpus, "source": CALLER_TEXTS, "n_texts": 20}
    assert not {"corpus", "n_sentences", "min_words", "max_words"} & set(res.config)
    text = repr(res)
    assert text.startswith("<anisotropy result: my-bert; inputs 20 texts given by the caller") and len(text) < 400
    model.eval()


def test_maps_of_a_model_object_loaded_the_default_way(tiny_bert, texts, tmp_path):
    model, tok = tiny_bert
    res = maps.run(model, texts[:8], tokenizer=tok, name="my-bert", examples=1, cache_dir=tmp_path)
    assert res.maps_captured == ["attention"] and 0 <= res.maps.pairs()[0][1].local_share_overall <= 1


def test_probing_runs_every_default_task_on_a_list_of_texts(texts, tmp_path):
    small = {"n_boot": 50, "min_per_class": 5, "word_content_skip": 20}  # 300 sentences: smaller classes
    res = probing.run("tiny-bert", texts, **small, cache_dir=tmp_path)
    ran = {t.task for t in res.tasks}
    assert ran == set(probing.Config().task) - {"source"}  # bigram_shift's perturbed sentences were built
    (skipped,) = res.skipped
    assert skipped.task == "source" and "texts=" in skipped.reason  # a list of texts has no documents
    assert "skipped" in res.summary()
    # from a corpus name, the documents are there: source runs too
    corpus = probing.run("tiny-bert", "default", n_sentences=300, task=["source"], **small, cache_dir=tmp_path)
    assert [t.task for t in corpus.tasks] == ["source"] and not corpus.skipped


def test_redundancy_cuts_windows_from_the_callers_texts(texts, tmp_path):
    res = redundancy.run("tiny-bert", texts, window_length=[8, 12], n_windows=4, cache_dir=tmp_path)
    assert [w.window for w in res.windows] == [8, 12] and all(w.n_windows == 4 for w in res.windows)
    assert res.corpus["name"] == CALLER_TEXTS and res.corpus["windows"] == {"8": 4, "12": 4}
    assert "corpus" not in res.config  # the config's corpus ("default") did not apply: the windows are the caller's
    with pytest.raises(ProbeError, match="--window-length 600 is too long"):
        redundancy.run("tiny-bert", texts, window_length=[600], cache_dir=tmp_path)


def test_perplexity_scores_the_callers_texts_as_documents(texts, tmp_path):
    res = perplexity.run("tiny-gpt2", [" ".join(texts[i:i + 10]) for i in range(0, 40, 10)], overlap=[0])
    (row,) = res.rows
    assert res.corpus["source"] == CALLER_TEXTS and res.corpus["n_texts"] == 4 and "corpus" not in res.config
    assert row.scored_tokens > 0 and row.token_perplexity > 1


def test_a_pairwise_analysis_takes_the_pair(texts, tmp_path):
    res = similarity.run(("tiny-bert", "tiny-albert"), texts[:30], rsa_units=8, cache_dir=tmp_path)
    assert (res.model_a, res.model_b) == ("tiny-bert", "tiny-albert") and res.corpus["n_texts"] == 30
    with pytest.raises(ProbeError, match="model= takes the pair"):
        similarity.run("tiny-bert", texts[:30], cache_dir=tmp_path)


def test_a_wrong_argument_is_one_line_naming_it(texts, tiny_bert, tmp_path):
    with pytest.raises(ProbeError, match="anisotropy has no setting 'n_token'"):
        anisotropy.run("tiny-bert", texts, n_token=10)
    with pytest.raises(ProbeError, match="n_tokens must be >= 2, got 1"):
        anisotropy.run("tiny-bert", texts, n_tokens=1)
    with pytest.raises(ProbeError, match="tokenizer= and name= go with a model object"):
        anisotropy.run("tiny-bert", texts, tokenizer=tiny_bert[1], cache_dir=tmp_path)
    with pytest.raises(ProbeError, match="texts= takes a list of strings"):
        anisotropy.run("tiny-bert", [1, 2], cache_dir=tmp_path)
    with pytest.raises(ProbeError, match="sentence= must be one of cls, mean, mean_all, last, not 'g'"):
        probes.extract(tiny_bert[0], texts, tokenizer=tiny_bert[1], sentence="g", cache_dir=tmp_path)


def test_sentence_picks_the_vector_of_an_object_and_of_a_name(tiny_bert, texts, tmp_path):
    model, tok = tiny_bert
    own = {"tokenizer": tok, "name": "my-bert", "cache_dir": tmp_path}
    first = anisotropy.run(model, texts[:20], **own)
    pooled = anisotropy.run(model, texts[:20], sentence="mean_all", **own)
    assert first.model.sentence_vector == "cls" and pooled.model.sentence_vector == "mean_all"
    assert "mean over all tokens incl. [CLS]/[SEP]" in pooled.model.extra["sentence_pooling"]
    # the same states, another sentence vector: the token statistics agree, the sentence ones do not
    assert [la.token.mean for la in first.layers] == [la.token.mean for la in pooled.layers]
    assert first.layers[-1].sentence.mean != pooled.layers[-1].sentence.mean
    # the same as the extraction with sentence= and compute
    acts = probes.extract(model, texts[:20], sentence="mean_all", progress=False, **own)
    assert anisotropy.compute(anisotropy.Config(), acts=acts).layers == pooled.layers

    named = anisotropy.run("tiny-bert", texts[:20], sentence="mean", cache_dir=tmp_path)
    assert named.model.sentence_vector == "mean" and named.model.requested == "tiny-bert?sentence=mean"
    with pytest.raises(ProbeError, match="similarity takes no sentence="):
        similarity.run(("tiny-bert", "tiny-bert"), texts[:20], sentence="mean", cache_dir=tmp_path)
    with pytest.raises(ProbeError, match="sentence= must be one of cls, mean, mean_all, last, not 'max'"):
        anisotropy.run(model, texts[:20], sentence="max", **own)


def test_run_without_a_cache_writes_no_entry_and_gives_the_cached_numbers(tmp_path, monkeypatch):
    from analyses import anisotropy

    monkeypatch.setenv("PROBES_CACHE", str(tmp_path / "user-cache"))  # where the default cache would go
    texts = [f"Sentence {i} says something about the sea and the ship." for i in range(12)]
    plain = anisotropy.run("tiny-bert", texts, n_tokens=60, cache_dir=None)
    assert not (tmp_path / "user-cache").exists()
    cached = anisotropy.run("tiny-bert", texts, n_tokens=60, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").rglob("meta.json"))
    assert abs(plain.layers[-1].token.mean - cached.layers[-1].token.mean) < 1e-3
