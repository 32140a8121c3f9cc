"""recipes: how the suite's own checkpoints were trained (they write folders that probes/ loads).

* :mod:`recipes.train`: masked-LM pre-training of the S-LSTM and its BERT-/ALBERT-style baselines
  (``checkpoints/slstm-small``, ``bert-small``, ``albert-small``).
* :mod:`recipes.train_lm`: the small GPT-2 models, with and without the recurrence module
  (``checkpoints/gpt2-small-base``, ``gpt2-small-recurrent``).

Recipes may import ``probes`` (models, corpora, the window rule); ``probes`` never imports them.
"""
