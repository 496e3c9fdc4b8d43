"""Shutdown that loses no request: the uvicorn server of a ``georag serve`` worker.

At SIGTERM (or SIGINT) uvicorn closes the listening socket at once and then every
connection that is not inside a request. Both lose requests that already reached the
machine: connections the kernel completed but the worker had not yet taken from the
listener's backlog are reset with it, and so are connections taken whose request bytes
still wait unread in their socket buffer (a busy worker reads only between two batches).

:class:`DrainingServer` first marks the worker draining (``GET /health`` answers 503
``"draining"`` from then on, :data:`DRAINING`), then keeps the listener open while the
event loop accepts and reads: until no connection waits in the backlog and no accepted
connection holds unread bytes without a request begun (checked every ``POLL_S``, for at
most ``DRAIN_S`` seconds). Then it shuts down as uvicorn does: every request begun is
answered (the micro-batcher keeps running), the connections close, the lifespan ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import time

import uvicorn

__all__ = ["DRAINING", "DRAIN_S", "DrainingServer"]

#: the key of the lifespan state (copied into every request's scope) set when draining
DRAINING = "georag.draining"
#: how long, at most, the listener stays open for what reached the machine before the signal
DRAIN_S = 10.0
POLL_S = 0.005


def _readable(sockets: list) -> bool:
    """Whether any of ``sockets`` has bytes (or a connection) to read now."""
    poller = select.poll()
    for sock in sockets:
        with contextlib.suppress(OSError, ValueError):
            if sock is not None and sock.fileno() >= 0:
                poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class DrainingServer(uvicorn.Server):
    """A uvicorn server that accepts and reads what reached it before it shuts down."""

    def handle_exit(self, sig, frame) -> None:
        lifespan = getattr(self, "lifespan", None)
        if lifespan is not None:
            lifespan.state[DRAINING] = True
        super().handle_exit(sig, frame)

    def _waiting(self) -> bool:
        """A connection in the backlog, or an accepted one with unread bytes and no
        request in progress."""
        listeners = [sock for server in self.servers for sock in server.sockets or ()]
        idle = [
            connection.transport.get_extra_info("socket")
            for connection in list(self.server_state.connections)
            if getattr(connection, "cycle", None) is None or connection.cycle.response_complete
        ]
        return _readable(listeners) or _readable(idle)

    async def shutdown(self, sockets=None) -> None:
        deadline = time.monotonic() + DRAIN_S
        while self._waiting() and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        await super().shutdown(sockets)
