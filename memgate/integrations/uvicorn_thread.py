"""Run an ASGI app under a real uvicorn server in a background thread (tests, benchmarks, and
``memgate serve http``'s foreground loop share the same server object)."""

from __future__ import annotations

import threading
import time
from typing import Any, Literal


class ServerThread:
    """``with ServerThread(app) as url: ...``: uvicorn on 127.0.0.1, a free port, stopped at exit."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 lifespan: Literal["auto", "on", "off"] = "off") -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                                    lifespan=lifespan))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.host = host

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://{self.host}:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


__all__ = ["ServerThread"]
