"""Rules evaluated without Spark: Spark's analysed plan of a rule, evaluated row by row.

A small pass (a handful of new change events) costs Spark more in analysis, optimisation
and job start than in work. Spark analyses each rule once, when the configuration is
checked against the input types; this package evaluates that analysed plan in Python,
for the plan nodes, expression classes and types it implements exactly, and refuses
everything else (docs/design.md, "Rules evaluated without Spark"):

* :mod:`~engine.etl.rowwise.unsupported` — :class:`Unsupported`, the one refusal, at
  compile time (the rule stays with Spark) or at run time (the pass goes to Spark);
* :mod:`~engine.etl.rowwise.datatypes` — Spark types from their JSON, and the Python
  values that stand for Spark's internal ones;
* :mod:`~engine.etl.rowwise.json_read`, :mod:`~engine.etl.rowwise.json_write`,
  :mod:`~engine.etl.rowwise.java_numbers` — Spark's ``from_json`` and ``to_json``,
  byte for byte, and the JVM's rendering of doubles and floats;
* :mod:`~engine.etl.rowwise.plan_tree`, :mod:`~engine.etl.rowwise.relations` — the
  analysed plan's JSON as trees, and the input relation whose rows the caller supplies;
* :mod:`~engine.etl.rowwise.compiler` (:mod:`~engine.etl.rowwise.compiled`) with the
  expression families :mod:`~engine.etl.rowwise.references`,
  :mod:`~engine.etl.rowwise.logic`, :mod:`~engine.etl.rowwise.conditionals`,
  :mod:`~engine.etl.rowwise.arithmetic`, :mod:`~engine.etl.rowwise.casts`,
  :mod:`~engine.etl.rowwise.strings`, :mod:`~engine.etl.rowwise.containers`,
  :mod:`~engine.etl.rowwise.times` — expressions made Python closures;
* :mod:`~engine.etl.rowwise.rule_select` (:func:`compile_select`) and
  :mod:`~engine.etl.rowwise.rule_predicate` (:func:`compile_predicate`) — a rule's
  SELECT, ``where`` and ``join-on``; :mod:`~engine.etl.rowwise.analysed` takes a plan,
  schema and settings from a Spark frame; :mod:`~engine.etl.rowwise.rule_set`
  (:func:`compile_rules`) compiles a configuration's rules, as a pass would use them.

Importing the package imports none of its modules, and none of them imports pyspark
at import time.
"""
