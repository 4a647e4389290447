"""Reading an ETL configuration: YAML text into the model of :mod:`engine.etl.config`,
the topics rules name checked against the inputs and outputs, and every mistake told in
one line with its file, line and rule (a misspelt key with the key it resembles)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from engine.etl.config import DenormRule, EtlConfig, EtlConfigError, StatelessRule
from engine.settings.yaml_text import read_yaml


def load_config(path: str | Path) -> EtlConfig:
    """Read and check an ETL configuration file; raises :class:`EtlConfigError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EtlConfigError(f"{path}: no such ETL configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EtlConfigError(f"{path}: cannot read: {reason}") from None
    return parse_config(text, source=str(path))


def parse_config(text: str, *, source: str = "<config>") -> EtlConfig:
    """Parse the YAML text of an ETL configuration; raises :class:`EtlConfigError`."""
    try:
        data, node = read_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EtlConfigError(f"{source}{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise EtlConfigError(f"{source}: expected a mapping with name, inputs, outputs, transforms")
    try:
        config = EtlConfig.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise EtlConfigError(_describe(exc, data, node, source)) from None
    _check_references(config, node)
    return config


def _check_references(config: EtlConfig, node: yaml.Node | None) -> None:
    """Topics named by rules are inputs/outputs; one staging pool; unique rule names."""
    source = config.source
    inputs = config.input_topics
    outputs = config.output_topics
    seen: set[str] = set()
    for topic in inputs:
        if topic in seen:
            raise EtlConfigError(f"{source}: input topic {topic!r} is listed twice")
        seen.add(topic)
    pools = sorted({o.pool for o in config.outputs})
    if len(pools) > 1:
        line = _line(node, ("outputs",)) or _line(node, ("output",))
        raise EtlConfigError(
            f"{source}{_at(line)}: all outputs must go to one staging pool, "
            f"they name {', '.join(repr(p) for p in pools)}"
        )
    every = [o.topic for o in config.outputs]
    if len(set(every)) != len(every):
        raise EtlConfigError(f"{source}: an output topic is listed twice")
    delivered_only = {o.topic: o.from_ for o in config.outputs if o.from_ is not None}
    for index, output in enumerate(config.outputs):
        if output.from_ is not None and output.from_ not in outputs:
            line = _line(node, ("outputs", index, "from")) or _line(node, ("output", "from"))
            raise EtlConfigError(
                f"{source}{_at(line)}: output {output.topic!r}: `from` names topic "
                f"{output.from_!r}, which is not an output the rules write"
                f"{_suggest(output.from_, outputs)} (outputs: {', '.join(outputs)})"
            )
    _check_tables(config, node)
    names: set[str] = set()
    for index, rule in enumerate(config.transforms):
        where = f"{source}{_at(_line(node, ('transforms', index)))}: {config.describe_rule(index)}"
        for key, topic in _rule_topics(rule):
            if topic not in inputs:
                line = _line(node, ("transforms", index, key))
                raise EtlConfigError(
                    f"{source}{_at(line)}: {config.describe_rule(index)}: `{key}` names "
                    f"topic {topic!r}, which is not an input"
                    f"{_suggest(topic, inputs)} (inputs: {', '.join(inputs)})"
                )
        if rule.out in delivered_only:
            line = _line(node, ("transforms", index, "out"))
            raise EtlConfigError(
                f"{source}{_at(line)}: {config.describe_rule(index)}: `out` names topic "
                f"{rule.out!r}, which is delivered from {delivered_only[rule.out]!r}: "
                f"write to {delivered_only[rule.out]!r}"
            )
        if rule.out not in outputs:
            line = _line(node, ("transforms", index, "out"))
            raise EtlConfigError(
                f"{source}{_at(line)}: {config.describe_rule(index)}: `out` names topic "
                f"{rule.out!r}, which is not an output{_suggest(rule.out, outputs)} "
                f"(outputs: {', '.join(outputs)})"
            )
        label = config.rule_label(index)
        if label in names:
            raise EtlConfigError(f"{where}: rule name {label!r} is used twice")
        names.add(label)


def _check_tables(config: EtlConfig, node: yaml.Node | None) -> None:
    """A table comes from an output, has a name of its own (no other table's, no pool's
    of this configuration: both are names in the lake and in SQL)."""
    source = config.source
    every = [o.topic for o in config.outputs]
    pools = {i.pool.lower(): i.pool for i in config.inputs} | {
        o.pool.lower(): o.pool for o in config.outputs
    }
    seen: set[str] = set()
    for index, table in enumerate(config.tables):
        where = f"{source}{_at(_line(node, ('tables', index)))}: table {table.name!r}"
        if table.from_ not in every:
            line = _line(node, ("tables", index, "from"))
            raise EtlConfigError(
                f"{source}{_at(line)}: table {table.name!r}: `from` names topic "
                f"{table.from_!r}, which is not an output{_suggest(table.from_, every)} "
                f"(outputs: {', '.join(every)})"
            )
        if table.name.lower() in pools:
            raise EtlConfigError(
                f"{where}: pool {pools[table.name.lower()]!r} has this name (tables and "
                "pools share the lake's and SQL's names): give the table another"
            )
        if table.name.lower() in seen:
            raise EtlConfigError(f"{where}: two tables have this name")
        seen.add(table.name.lower())


def _rule_topics(rule: Any) -> list[tuple[str, str]]:
    if isinstance(rule, DenormRule):
        return [("left", rule.left), ("right", rule.right)]
    if isinstance(rule, StatelessRule):
        return [("in", rule.in_)]
    found = [("in", t) for t in rule.in_]
    if rule.transaction_topic:
        found.append(("transaction-topic", rule.transaction_topic))
    return found


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _at(line: int | None) -> str:
    return f": line {line}" if line else ""


def _line(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest YAML node along ``loc`` (keys and indexes)."""
    best: int | None = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    best = key.start_mark.line + 1
                    node = value
                    break
            else:
                continue  # e.g. a union tag in the pydantic location: skip it
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            continue
    return best


_TYPE_LABELS = {"denorm", "stateless", "txn"}


def _describe(exc: ValidationError, data: dict[str, Any], node: yaml.Node | None, source: str) -> str:
    """One line for the first pydantic error: file, line, rule and what is wrong."""
    errors = exc.errors()
    # a misspelt key explains the "missing" error it causes: report it first
    first = min(errors, key=lambda e: 0 if e["type"] == "extra_forbidden" else 1)
    loc = tuple(first["loc"])
    line = _line(node, loc)
    prefix = f"{source}{_at(line)}"
    rule_part = ""
    if len(loc) >= 2 and loc[0] == "transforms" and isinstance(loc[1], int):
        index = loc[1]
        raw = data.get("transforms") or []
        rule = raw[index] if index < len(raw) and isinstance(raw[index], dict) else {}
        kind = rule.get("type")
        name = rule.get("name")
        kind_text = f"{kind}" if isinstance(kind, str) else "rule"
        named = f" {name!r}" if isinstance(name, str) else ""
        rule_part = f"rule {index + 1} ({kind_text}{named}): "
        loc = tuple(p for p in loc[2:] if p not in _TYPE_LABELS)
    elif len(loc) >= 2 and loc[0] == "tables" and isinstance(loc[1], int):
        raw = data.get("tables") or []
        table = raw[loc[1]] if loc[1] < len(raw) and isinstance(raw[loc[1]], dict) else {}
        name = table.get("name")
        rule_part = f"table {name!r}: " if isinstance(name, str) else f"table {loc[1] + 1}: "
        loc = loc[2:]
    field = ".".join(str(p) for p in loc if p != "source")
    message = _message(first, field, loc)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{prefix}: {rule_part}{message}{more}"


def _message(error: Any, field: str, loc: tuple[Any, ...]) -> str:
    kind = error["type"]
    where = f"`{field}`" if field else "the rule" if not loc else "value"
    if kind == "missing":
        return f"{where} is missing"
    if kind == "extra_forbidden":
        key = loc[-1] if loc else field
        if key in _OUTPUT_KEYS and loc[:1] == ("inputs",):
            return f"`{key}` is a key of outputs, not of inputs"
        return f"unknown key `{key}`{_suggest(str(key), _KEYS)}"
    if kind == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag")
        return f"unknown rule type {tag!r}: use denorm, stateless or txn"
    if kind == "union_tag_not_found":
        return "`type` is missing: use denorm, stateless or txn"
    text = str(error.get("msg", kind))
    text = text.removeprefix("Value error, ")
    value = error.get("input")
    shown = ""
    if isinstance(value, str | int | float) and not isinstance(value, bool) and kind != "value_error":
        shown = f" (got {value!r})"
    return f"{where}: {text}{shown}" if field else f"{text}{shown}"


_OUTPUT_KEYS = ("envelope", "from")
_KEYS = [
    "name", "inputs", "outputs", "output", "transforms", "topic", "pool", "type", "where",
    "left", "right", "join-on", "out", "expire-after", "sql", "in", "txn-id",
    "complete-when", "transaction-topic", "envelope", "from", "tables", "keys", "history",
    "location",
]
