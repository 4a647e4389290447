"""The HTTP API every long-running zync process serves (docs/design.md#operating-zync).

``zync run``, ``zync from-kafka``, ``zync to-kafka --continuous`` and the console's engine
serve, from a thread of their own, liveness and readiness probes, Prometheus metrics, a
versioned JSON status and control of their loops — on a Unix socket under the zync home
(mode 0600) and, when asked, on TCP with a bearer token:

* :mod:`~engine.serve.served_process` — what a process serves: its loops, observer and events;
* :mod:`~engine.serve.health` — liveness (a wedged or failed loop) and readiness;
* :mod:`~engine.serve.status_document` — the status document (schema :data:`~engine.serve.status_document.SCHEMA`);
* :mod:`~engine.serve.documents` — snapshots as JSON and back (the console reads them);
* :mod:`~engine.serve.metrics` — the Prometheus exposition, from the loops' reports;
* :mod:`~engine.serve.journal` — events and log lines since a cursor, JSON log lines;
* :mod:`~engine.serve.auth` — who may read and who may control;
* :mod:`~engine.serve.sockets` — the Unix socket's path and the listening sockets;
* :mod:`~engine.serve.protocol` — HTTP/1.1 with deadlines against slow clients;
* :mod:`~engine.serve.app` — the routes; :mod:`~engine.serve.server` — uvicorn in a thread;
* :mod:`~engine.serve.client` — the client the console and scripts use.
"""
