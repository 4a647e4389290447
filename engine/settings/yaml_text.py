"""YAML text read by libyaml, PyYAML's C parser, when the installed PyYAML has it: a
configuration of hundreds of rules is ~50 kB of YAML, which the pure-Python parser
takes ~70 ms to read (and another ~70 ms to compose for line numbers), libyaml ~9 ms
for both."""

from __future__ import annotations

from typing import Any

import yaml

#: PyYAML's safe loader, in C when PyYAML was built with libyaml (its wheels are).
SafeLoader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """The document of ``text`` as Python values (``yaml.safe_load``'s rules)."""
    return yaml.load(text, Loader=SafeLoader)


def read_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document of ``text`` as Python values and as its node tree (whose marks give
    line numbers for errors), parsed once. Raises ``yaml.YAMLError``."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()
