"""A model's name -> its :class:`CheckpointSpec` -> the loader of its family.

* :mod:`.registry`: ``checkpoints.yaml`` (and a user's registry) parsed into frozen specs, each with a fingerprint
  of the weights it names;
* :mod:`.names`: every name that is not an entry (``hf:org/name``, a model folder, ``name?sentence=mean``) and
  :func:`get_spec`, the one resolver;
* :mod:`.loaders`: family -> loader (imported by name, so this layer never imports ``probes.models``).
"""
