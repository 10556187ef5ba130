"""A TCP proxy on loopback that slows the replies down: a slow network for download-progress tests."""

from __future__ import annotations

import socket
import threading
import time

__all__ = ["ThrottlingProxy"]


class ThrottlingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream``; replies at most ``rate`` bytes/s.

    Requests pass at full speed. Threads, stopped by :meth:`close`.

    :param upstream: ``(host, port)`` of the real server.
    :param rate: bytes per second from the upstream to the client.
    """

    def __init__(self, upstream: tuple[str, int], rate: int) -> None:
        self.upstream, self.rate = upstream, rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, 0), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self.rate), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rate: int) -> None:
        chunk = max(1024, rate // 20) if rate else 1 << 16
        try:
            while data := src.recv(chunk):
                dst.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
