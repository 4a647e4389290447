"""The apply loop: outputs of a staging pool kept as Delta tables (docs/design.md#tables).

``read`` (the outputs a range of staging versions added), ``decode`` (their JSON text as
typed columns, with the fields each record carries), ``changes`` (the net change per key,
or per key and staging version for history), ``merge`` (one delta-rs MERGE per batch,
the position in the same commit), ``target`` (the table: created, checked, evolved),
``loop`` (one pass over a configuration's tables), ``asof`` (a table's version that
reflects a staging version). The package imports none of its modules.
"""
