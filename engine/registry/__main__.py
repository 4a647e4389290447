"""``python -m engine.registry --port PORT --db PATH [--host H] [--log-file PATH]``.

Serves the registry with uvicorn until SIGTERM/SIGINT. Quiet: without ``--log-file`` only
warnings reach stderr; with it, server and access logs go to the file. A port already in
use (or an unusable database) ends the process with exit code 1 and one line on stderr.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any


def _log_config(log_file: str | None) -> dict[str, Any]:
    if log_file:
        handler: dict[str, Any] = {
            "class": "logging.FileHandler",
            "filename": log_file,
            "encoding": "utf-8",
            "formatter": "plain",
        }
        level = "INFO"
    else:
        handler = {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
        }
        level = "WARNING"
    logger = {"handlers": ["out"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"out": handler},
        "loggers": {"uvicorn": logger, "uvicorn.access": logger, "engine": logger},
    }


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says TCP; with proto 0 every keep-alive response waited ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.registry", description="zync's Confluent-compatible Schema Registry"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    parser.add_argument("--log-file", default=None, help="write server and access logs here")
    args = parser.parse_args(argv)

    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        print(
            f"schema registry: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1

    # deferred: uvicorn and the FastAPI app load once the arguments are checked
    import uvicorn

    from engine.registry.app import create_app
    from engine.registry.errors import RegistryError

    try:
        app = create_app(args.db)
    except (RegistryError, OSError) as exc:
        sock.close()
        print(f"schema registry: cannot open database {args.db}: {exc}", file=sys.stderr)
        return 1

    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_config=_log_config(args.log_file),
        access_log=bool(args.log_file),
        server_header=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
