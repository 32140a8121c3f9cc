"""Model families adapted to the :class:`~probes.models.encoder.Encoder` interface (and causal LMs with their
head, :mod:`.lm`): Hugging Face models (:mod:`.hf`, ConvBERT kernels in :mod:`.convbert`), the S-LSTM
(:mod:`.slstm`, :mod:`.slstm_encoder`, the authors' checkpoints in :mod:`.slstm_import`), the Graph-Transformer
(:mod:`.mog`, :mod:`.mog_encoder`), the MoG lens (:mod:`.mog_lens`) and the recurrence module (:mod:`.recurrent`).
Models import only :mod:`probes.checkpoints` and the base modules (errors, io, precision, config)."""
