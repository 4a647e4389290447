"""The row evaluator without Spark: plans written by hand in Spark's JSON form, what it
computes, and every way it refuses (:class:`Unsupported`) — when compiling (the rule
stays with Spark) and when running (the pass goes to Spark). What it computes is
checked against Spark itself in tests/integration/test_rowwise_*.py."""

from __future__ import annotations

import decimal
import json
from typing import Any

import pytest

from engine.etl.rowwise.analysed import Analysed
from engine.etl.rowwise.compiled import Session
from engine.etl.rowwise.datatypes import parse_type
from engine.etl.rowwise.java_numbers import double_text, float_text, to_float32
from engine.etl.rowwise.json_read import parse_json
from engine.etl.rowwise.json_write import json_string, json_text, to_json, writer
from engine.etl.rowwise.rule_predicate import compile_predicate
from engine.etl.rowwise.rule_select import compile_select
from engine.etl.rowwise.unsupported import Unsupported

EXPR = "org.apache.spark.sql.catalyst.expressions."
PLAN = "org.apache.spark.sql.catalyst.plans.logical."
Tree = list[dict[str, Any]]


def node(cls: str, *children: Tree, **fields: Any) -> Tree:
    """A tree in Spark's pre-order JSON form."""
    name = cls if "." in cls else EXPR + cls
    out: Tree = [{"class": name, "num-children": len(children), **fields}]
    for child in children:
        out += child
    return out


def lit(value: Any, data_type: str = "integer") -> Tree:
    return node("Literal", value=None if value is None else str(value), dataType=data_type)


def attr(name: str, data_type: Any, ident: int) -> Tree:
    return node("AttributeReference", name=name, dataType=data_type, nullable=True, exprId={"id": ident})


def alias(child: Tree, name: str, ident: int) -> Tree:
    return node("Alias", child, name=name, exprId={"id": ident})


def field(child: Tree, ordinal: int, name: str) -> Tree:
    return node("GetStructField", child, ordinal=ordinal, name=name)


VALUE = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in [("i", "integer"), ("s", "string"), ("d", "double"),
                     ("arr", {"type": "array", "elementType": "integer", "containsNull": True})]
    ],
}  # fmt: skip


def i_(ident: int = 1) -> Tree:
    return field(attr("v", VALUE, ident), 0, "i")


def s_(ident: int = 1) -> Tree:
    return field(attr("v", VALUE, ident), 1, "s")


def relation() -> Tree:
    return node(PLAN + "SubqueryAlias", node(PLAN + "LocalRelation", output=[attr("v", VALUE, 1)]),
                identifier={"name": "view"})  # fmt: skip


def select(*items: tuple[Tree, str, str], where: Tree | None = None, child: Tree | None = None) -> Analysed:
    """``SELECT <item AS name>... FROM view [WHERE ...]`` with the output types given."""
    below = child or relation()
    if where is not None:
        below = node(PLAN + "Filter", below, condition=where)
    plan = node(PLAN + "Project", below,
                projectList=[alias(tree, name, 100 + n) for n, (tree, name, _) in enumerate(items)])  # fmt: skip
    schema = {"type": "struct", "fields": [
        {"name": name, "type": t, "nullable": True, "metadata": {}} for _, name, t in items]}  # fmt: skip
    return Analysed(json.dumps(plan), json.dumps(schema))


def one(tree: Tree, data_type: str, row: dict[str, Any]) -> Any:
    """The value of one expression over a row ``{"v": (i, s, d, arr)}``."""
    result = compile_select(select((tree, "x", data_type))).run(row)
    return result[0]["x"]


ROW = {"v": (7, "Héllo", 2.5, [1, 2])}


# ----------------------------------------------------------------------------- evaluating


def test_a_select_with_where_gives_one_row_or_none() -> None:
    compiled = compile_select(
        select((node("Add", i_(), lit(1)), "key", "integer"), (s_(), "value", "string"),
               where=node("GreaterThan", i_(), lit(5)))  # fmt: skip
    )
    assert compiled.run(ROW) == [{"key": 8, "value": "Héllo"}]
    assert compiled.json_texts(ROW) == [{"key": "8", "value": '"Héllo"'}]
    assert compiled.run({"v": (5, "x", 0.0, [])}) == []
    assert compiled.run({"v": (None, "x", 0.0, [])}) == []  # NULL is not true
    assert compiled.run({"v": None}) == []


def test_hidden_columns_are_left_out() -> None:
    analysed = select((i_(), "__zo1", "integer"), (s_(), "key", "string"), (lit(None, "void"), "value", "void"))
    compiled = compile_select(analysed, hidden=("__zo1",))
    assert [c.name for c in compiled.columns] == ["key", "value"]
    assert compiled.json_texts(ROW) == [{"key": '"Héllo"', "value": None}]  # NULL value: a tombstone


def test_three_valued_logic() -> None:
    t, f, n = lit("true", "boolean"), lit("false", "boolean"), lit(None, "void")
    cases = {
        ("And", "t", "n"): None, ("And", "f", "n"): False, ("And", "t", "t"): True,
        ("Or", "t", "n"): True, ("Or", "f", "n"): None, ("Or", "f", "f"): False,
    }  # fmt: skip
    trees = {"t": t, "f": f, "n": n}
    for (op, a, b), expected in cases.items():
        assert one(node(op, trees[a], trees[b]), "boolean", ROW) is expected, (op, a, b)
    assert one(node("Not", n), "boolean", ROW) is None
    in_list = node("In", i_(), lit(1), lit(None, "integer"))
    assert one(in_list, "boolean", ROW) is None  # not found, a NULL in the list
    assert one(node("In", i_(), lit(7), lit(None, "integer")), "boolean", ROW) is True
    assert one(node("EqualNullSafe", lit(None, "integer"), lit(None, "integer")), "boolean", ROW) is True


def test_a_predicate_matches_only_when_true() -> None:
    plan = node(PLAN + "Project", node(PLAN + "LocalRelation", output=[attr("v", VALUE, 1)]),
                projectList=[alias(node("GreaterThan", i_(), lit(5)), "b", 9)])  # fmt: skip
    predicate = compile_predicate(Analysed(json.dumps(plan), "{}"))
    assert predicate.test(ROW) is True
    assert predicate.matches(ROW)
    assert predicate.test({"v": (None, "", 0.0, [])}) is None
    assert not predicate.matches({"v": (None, "", 0.0, [])})
    assert not predicate.matches({"v": (1, "", 0.0, [])})


def test_strings_count_characters_and_compare_code_points() -> None:
    assert one(node("Length", s_()), "integer", {"v": (0, "a😀é", 0.0, [])}) == 3
    substring = node("Substring", s_(), lit(-2), lit(2147483647))
    assert one(substring, "string", {"v": (0, "a😀é", 0.0, [])}) == "😀é"
    assert one(node("LessThan", s_(), lit("\ue000", "string")), "boolean", {"v": (0, "😀", 0.0, [])}) is False
    assert one(node("Upper", s_()), "string", {"v": (0, "abc", 0.0, [])}) == "ABC"


def test_casts_read_only_text_every_mode_reads_alike() -> None:
    cast = node("Cast", s_(), dataType="integer", timeZoneId="UTC", evalMode=None)
    assert one(cast, "integer", {"v": (0, "+007", 0.0, [])}) == 7
    for text in ("1.5", " 12 ", "1e3", "2147483648", "abc"):
        with pytest.raises(Unsupported):
            one(cast, "integer", {"v": (0, text, 0.0, [])})
    to_decimal = node("Cast", node("Cast", lit("2.675", "string"), dataType="double", timeZoneId="UTC"),
                      dataType="decimal(5,2)", timeZoneId="UTC")  # fmt: skip
    assert one(to_decimal, "decimal(5,2)", ROW) == decimal.Decimal("2.68")  # the double's Java text, half up


# ------------------------------------------------------------------------ refusals: compile


@pytest.mark.parametrize(
    ("tree", "data_type", "reason"),
    [
        (node("Rand", lit(1)), "double", "the expression Rand"),
        (node("Like", s_(), lit("a%", "string"), escapeChar=None), "boolean", "the expression Like"),
        (lit("2024-05-01 10:00:00", "timestamp"), "timestamp", "a literal of type timestamp"),
        (lit("[B@1f2e3d", "binary"), "binary", "a literal of type binary"),
        (node("Divide", node("Cast", i_(), dataType="decimal(10,0)"), lit("1.5", "decimal(2,1)")),
         "decimal(24,13)", "Divide over"),
        (node("StructsToJson", s_(), options=None, timeZoneId="UTC"), "string", "the expression StructsToJson"),
        (node("CurrentTimestamp"), "timestamp", "the expression CurrentTimestamp"),
        (node("Cast", s_(), dataType="interval"), "string", "the type interval"),
        (node("Cast", node("CreateArray", i_()), dataType="string"), "string", "casting array<integer> to string"),
        (node("Upper", i_()), "string", "Upper over integer"),
    ],
)  # fmt: skip
def test_what_is_not_implemented_is_refused_when_compiling(tree: Tree, data_type: str, reason: str) -> None:
    with pytest.raises(Unsupported) as refused:
        compile_select(select((tree, "x", data_type)))
    assert reason in refused.value.reason


def test_plan_nodes_other_than_project_and_filter_are_refused() -> None:
    for cls in ("Generate", "Aggregate", "Sort", "GlobalLimit", "Window", "Join"):
        below = node(PLAN + cls, relation())
        with pytest.raises(Unsupported, match=f"the plan node {cls}"):
            compile_select(select((i_(), "x", "integer"), child=below))


def test_a_type_other_than_sparks_refuses_the_rule() -> None:
    with pytest.raises(Unsupported, match="Spark says long"):
        compile_select(select((i_(), "x", "long")))


def test_a_with_of_several_definitions_is_refused() -> None:
    definition = node("CommonExpressionDef", i_(), id=None)
    reference = node("CommonExpressionRef", id=None, dataType="integer", nullable=True)
    two = node("With", node("Add", reference, reference), definition, definition)
    with pytest.raises(Unsupported, match="several common expressions"):
        compile_select(select((two, "x", "integer")))
    single = node("With", node("Add", reference, reference), definition)
    assert one(single, "integer", ROW) == 14


# ------------------------------------------------------------------------ refusals: running


@pytest.mark.parametrize(
    ("tree", "data_type", "row"),
    [
        (node("Add", i_(), lit(2147483647)), "integer", ROW),  # overflow: ANSI raises
        (node("Divide", node("Cast", i_(), dataType="double"), lit("0.0", "double")), "double", ROW),
        (node("GetArrayItem", field(attr("v", VALUE, 1), 3, "arr"), lit(5), failOnError=True), "integer", ROW),
        (node("Upper", s_()), "string", {"v": (0, "straße", 0.0, [])}),  # not ASCII
        (node("Cast", s_(), dataType="decimal(4,2)", timeZoneId="UTC"), "decimal(4,2)", {"v": (0, "123.456", 0.0, [])}),
        (node("Multiply", field(attr("v", VALUE, 1), 2, "d"), lit("1.0E308", "double")), "double", ROW),
        (node("ElementAt", field(attr("v", VALUE, 1), 3, "arr"), lit(0), failOnError=False), "integer", ROW),
    ],
)  # fmt: skip
def test_where_spark_would_fail_the_row_is_refused(tree: Tree, data_type: str, row: dict[str, Any]) -> None:
    compiled = compile_select(select((tree, "x", data_type)))
    with pytest.raises(Unsupported):
        compiled.run(row)


def test_an_index_out_of_bounds_without_fail_on_error_is_null() -> None:
    item = node("GetArrayItem", field(attr("v", VALUE, 1), 3, "arr"), lit(5), failOnError=False)
    assert one(item, "integer", ROW) is None


def test_every_branch_is_evaluated() -> None:
    """Spark skips the branch it does not take; a failure there refuses the row."""
    failing = node("Divide", node("Cast", i_(), dataType="double"), lit("0.0", "double"))
    guarded = node("If", lit("true", "boolean"), lit("1.0", "double"), failing)
    with pytest.raises(Unsupported):
        one(guarded, "double", ROW)


# ----------------------------------------------------------------------------------- JSON


STRUCT = parse_type({"type": "struct", "fields": [
    {"name": "a", "type": "integer"}, {"name": "s", "type": "string"},
    {"name": "d", "type": "double"}, {"name": "f", "type": "float"}, {"name": "m", "type": "decimal(5,2)"},
    {"name": "n", "type": {"type": "struct", "fields": [{"name": "x", "type": "long"}]}},
]})  # fmt: skip


def test_reading_json_as_from_json_does() -> None:
    value = parse_json('{"s": {"k": [1, 2.50, 1e5, -0, null, "é"]}, "a": 1, "zz": "skipped", "m": "1.005"}', STRUCT)
    assert value == (1, '{"k":[1,2.5,100000.0,0,null,"é"]}', None, None, decimal.Decimal("1.01"), None)
    assert parse_json('{"n": null, "d": -0.0, "f": 1.1}', STRUCT)[2:] == (-0.0, to_float32(1.1), None, None)
    assert parse_json(None, STRUCT) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}', "{'a': 1}", '{"d": NaN}', '{"d": Infinity}', '{"a": 1} trailing', "null", "[]",
        '{"a": 2147483648}', '{"a": "1"}', '{"a": 1.0}', '{"a": true}', '{"d": "1.5"}', '{"d": 1e400}',
        '{"s": "\\ud800"}', '{"m": 1234.5}', '{"m": "1,234.5"}', '{"f": 16777217.0}', '{"n": [1]}', "",
    ],
)  # fmt: skip
def test_text_spark_might_read_otherwise_is_refused(text: str) -> None:
    with pytest.raises(Unsupported):
        parse_json(text, STRUCT)


def test_writing_json_as_jacksons_generator_does() -> None:
    assert json_string('a"\\/\b\t\n\x0b\f\r\x1f\x7f\u2028é😀') == '"a\\"\\\\/\\b\\t\\n\\u000B\\f\\r\\u001F\x7f\u2028é😀"'
    written = to_json((None, "x", -0.0, to_float32(1.1), decimal.Decimal("0.10"), (None,)), STRUCT)
    assert written == '{"a":null,"s":"x","d":-0.0,"f":1.1,"m":0.10,"n":{"x":null}}'
    kinds = parse_type({"type": "struct", "fields": [
        {"name": "t", "type": "timestamp"}, {"name": "dt", "type": "date"}, {"name": "b", "type": "binary"},
        {"name": "e", "type": "decimal(20,10)"},
        {"name": "m", "type": {"type": "map", "keyType": "integer", "valueType": "string"}}]})  # fmt: skip
    value = (-1, 0, b"\x00\xff\x10", decimal.Decimal("1E-10"), {1: None})
    assert to_json(value, kinds) == (
        '{"t":"1969-12-31T23:59:59.999Z","dt":"1970-01-01","b":"AP8Q","e":1E-10,"m":{"1":null}}'
    )
    assert json_text(None, STRUCT) is None
    assert json_text(5, parse_type("long")) == "5"
    assert json_text("x", parse_type("string")) == '"x"'
    assert json_text(None, parse_type("void")) is None


def test_what_cannot_be_written_exactly_is_refused() -> None:
    with pytest.raises(Unsupported, match="time zone"):
        writer(parse_type("timestamp"), "Europe/Oslo")
    with pytest.raises(Unsupported, match="map keys"):
        writer(parse_type({"type": "map", "keyType": "double", "valueType": "string"}))
    with pytest.raises(Unsupported, match="years"):
        json_text(10**18, parse_type("timestamp"))


def test_doubles_and_floats_in_java_layout() -> None:
    cases = {
        1.0: "1.0", 0.001: "0.001", 1e-4: "1.0E-4", 1e7: "1.0E7", 9999999.0: "9999999.0",
        123.456: "123.456", -0.0: "-0.0", 1e300: "1.0E300", 0.1 + 0.2: "0.30000000000000004",
        12345678.0: "1.2345678E7", -1.5e-7: "-1.5E-7",
    }  # fmt: skip
    for value, text in cases.items():
        assert double_text(value) == text
    assert float_text(to_float32(1.1)) == "1.1"
    for refused in (5e-324, 2.0**60, 2e23, 1e23, 2.3851136372966235e25, float("nan")):
        with pytest.raises(Unsupported):
            double_text(refused)
    with pytest.raises(Unsupported):
        float_text(to_float32(2.0**30))


def test_session_settings_reach_the_compiled_rule() -> None:
    analysed = select((s_(), "key", "string"))
    other = Analysed(analysed.plan, analysed.schema, Session(time_zone="Europe/Oslo"))
    assert compile_select(other).session.time_zone == "Europe/Oslo"


def test_a_denorm_pair_whose_timestamps_are_null() -> None:
    """The view row of a pair: the order columns as the pass computes them (greatest()
    skips a NULL timestamp); the compiled SELECT reads ``left`` and ``right``."""
    from engine.etl.config_file import parse_config
    from engine.etl.rowwise.rule_set import RowRule

    config = parse_config(
        "name: n\ninputs: [{topic: A, pool: Raw}, {topic: B, pool: Raw}]\n"
        "outputs: [{topic: O, pool: Staging}]\ntransforms:\n"
        "  - {type: denorm, left: A, right: B, join-on: 'true', out: O, sql: 'SELECT 1 AS key, 2 AS value'}\n"
    )
    envelope = {"type": "struct", "fields": [{"name": "seqno", "type": "long"}]}
    plan = node(PLAN + "Project", node(PLAN + "SubqueryAlias", node(
        PLAN + "LocalRelation", output=[attr("left", envelope, 1), attr("right", envelope, 2),
                                        attr("__zts", "timestamp", 3)])),  # fmt: skip
        projectList=[alias(field(attr("left", envelope, 1), 0, "seqno"), "key", 10),
                     alias(attr("__zts", "timestamp", 3), "value", 11)])  # fmt: skip
    schema = {"type": "struct", "fields": [{"name": "key", "type": "long"}, {"name": "value", "type": "timestamp"}]}
    select_ = compile_select(Analysed(json.dumps(plan), json.dumps(schema)))
    rule = RowRule(0, config.transforms[0], {}, None, select_, {})
    left, right = (5, ("A", 0, 1, None), None, None), (7, ("B", 0, 2, 1_000), None, None)
    assert rule.outputs(left, right) == [{"key": "5", "value": '"1970-01-01T00:00:00.001Z"'}]
    assert rule.outputs(left, (7, ("B", 0, 2, None), None, None)) == [{"key": "5", "value": None}]


def test_an_error_nothing_foresaw_refuses_instead_of_failing_the_pass() -> None:
    misread = field(attr("v", VALUE, 1), 9, "nine")  # an ordinal the struct has not
    with pytest.raises(Unsupported, match="^unforeseen IndexError"):
        compile_select(select((misread, "x", "integer")))
    compiled = compile_select(select((i_(), "x", "integer")))
    with pytest.raises(Unsupported, match="^unforeseen TypeError"):
        compiled.run({"v": 5})  # not a struct's value
