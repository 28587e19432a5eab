"""Servers on 127.0.0.1 that stand in for the network in the wandb fault tests: one that answers
HTTP, one that accepts connections and never replies (a stuck proxy or server), and a port that
refuses. Nothing here sends traffic to any other address."""

import contextlib
import http.server
import socket
import threading


@contextlib.contextmanager
def silent_server():
    """Yields the URL of a server that accepts every connection and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def answering_server():
    """Yields the URL of an HTTP server that answers every GET with 404."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def refusing_url() -> str:
    """The URL of a loopback port that nothing listens on (connections are refused)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
