"""One way to serve a test ASGI app: uvicorn on 127.0.0.1, a free port, a daemon thread.

Shared by the OpenAI-format test servers (tiny LM with logprobs, judge, recording) and the
results viewer's tests and benchmark.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BackgroundServer:
    """Serve ``app`` with uvicorn on ``127.0.0.1:port`` in a daemon thread.

    ``start()`` returns once uvicorn reports it is listening (RuntimeError after 30 s);
    ``stop()`` asks it to exit and joins the thread. ``lifespan``: uvicorn's setting
    (``"on"`` for an app that closes what it holds at shutdown, like the viewer).
    """

    def __init__(self, app: Any, port: int | None = None, name: str = "test server", lifespan: str = "off") -> None:
        import uvicorn

        self.name = name
        self.port = port or free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan=lifespan))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """The server's root URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "BackgroundServer":
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError(f"{self.name} did not start within 30 s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class ServedApp:
    """Base of the test servers that build their ASGI app in ``app()``: ``start()`` serves it
    with :class:`BackgroundServer` on ``self.port`` (set by the subclass), ``stop()`` ends it,
    ``base_url`` is its OpenAI-style base URL. ``server_name`` names it in a start-up error."""

    server_name = "test server"
    port: int
    _serving: BackgroundServer | None = None

    def app(self) -> Any:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Any:
        self._serving = BackgroundServer(self.app(), port=self.port, name=self.server_name).start()
        return self

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.stop()
