"""The only place a model runs on inputs: texts -> :class:`~probes.capture.activations.Activations`.

* :mod:`.activations`: the :class:`Activations` type analyses read (ragged token axis, named keys);
* :mod:`.extract`: :func:`extract` (batching, float16 fallback, torchrun sharding via :mod:`.distributed`);
* :mod:`.store`: the on-disk cache entry (keys, locks, checksums, resume) and :mod:`.cache`, its CLI;
* :mod:`.windows`: windowed execution of causal LMs (scoring and generation); :mod:`.timing`: forward timing.
"""
