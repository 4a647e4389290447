"""The invoice demo: Debezium events of two tables in four batches (``demo/invoices``),
the ETL configuration that denormalizes them, and :mod:`demo.scenario`, which drives
them through the engine (``zync demo``, the console's ``n`` key, ``zync demo --no-tui``);
:mod:`demo.scenario_outputs` reads where the outputs land.

It uses the engine only through :mod:`engine.api`. Nothing happens at import time.
"""
