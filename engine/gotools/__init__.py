"""Go programs zync's development and deployment use (promtool for the alerting rules,
helm for the charts `zync build` writes), declared in ``tools.toml`` and built once by
``go install`` into zync's cache (:mod:`.tools`)."""
