"""A model's name -> its :class:`CheckpointSpec` -> the loader of its family.

* :mod:`.registry`: ``checkpoints.yaml`` (and a user's registry) parsed into frozen specs, each with a fingerprint
  of the weights it names;
* :mod:`.names`: every name that is not an entry (``hf:org/name``, a model folder, ``name?sentence=mean``) and
  :func:`get_spec`, the one resolver;
* :mod:`.loaders`: family -> loader (imported by name, so this layer never imports ``probes.models``);
* :mod:`.identity`: what a fingerprint hashes (a folder's weight and input files, forward code versions);
* :mod:`.registry_yaml`: the registry's YAML reader (no aliases, no repeated keys).
"""
