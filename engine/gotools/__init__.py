"""Go programs zync's development and deployment use (promtool; next, helm), declared in
``tools.toml`` and built once by ``go install`` into zync's cache (:mod:`.tools`)."""
