"""The YAML reader of registry files: ``yaml.safe_load``'s types, refusing what a registry never needs.

* **Anchors and aliases** (``&a`` / ``*a``, and merge keys ``<<: *a``) are refused: a registry entry is a few
  lines written once, and an alias is how a 769-byte file becomes 10^10 values when something walks it (an
  "alias bomb": nested lists of aliases, built as shared references, expanded by ``str()``). The check is made
  as each value is built, so nothing is ever expanded.
* **A key given twice** in one mapping is an error naming the key and its line (plain YAML keeps the last one
  silently, so an entry would change without a word).
* libyaml's parser (``yaml.CSafeLoader``) reads the file when PyYAML was built with it, about twice as fast as the
  pure-Python parser (the rest of the time is PyYAML's Python constructor, the same for both). The time is linear
  in the file's size: a registry of 200,000 entries (29 MB) took 72 s on a busy 2-core machine, 20,000 entries
  (2.9 MB) about 7 s, a registry of a few hundred entries milliseconds; a file is parsed once per process while it
  is unchanged. PyYAML is the limit for registries of hundreds of thousands of entries.

Errors are ``yaml.YAMLError`` with the line and column; the registry turns them into one ``error:`` line.
"""

from __future__ import annotations

from collections.abc import Hashable

import yaml
from yaml.constructor import ConstructorError

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


class RegistryLoader(_Base):  # type: ignore[misc, valid-type]
    """``yaml.SafeLoader`` without anchors, aliases or merge keys, and without repeated keys."""

    def construct_object(self, node, deep=False):
        # a node built before (or being built) is reached again only through an alias
        if node in self.constructed_objects or node in self.recursive_objects:
            raise ConstructorError(None, None, "an alias (*name) repeats an anchored value: anchors and aliases "
                                   "are not allowed in a registry (write each value out)", node.start_mark)
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):
            raise ConstructorError(None, None, f"expected a mapping, found {node.id}", node.start_mark)
        mapping = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                raise ConstructorError(None, None, "merge keys (<<) are not allowed in a registry (write each "
                                       "field out)", key_node.start_mark)
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise ConstructorError("while reading a mapping", node.start_mark, "found an unhashable key",
                                       key_node.start_mark)
            if key in mapping:
                raise ConstructorError(None, None, f"the key {key!r} is given twice in one mapping (the second "
                                       "would silently replace the first)", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def load(text: str):
    """The document in ``text``, as ``yaml.safe_load`` would give it, with the refusals above."""
    return yaml.load(text, Loader=RegistryLoader)  # noqa: S506 (a SafeLoader subclass)
