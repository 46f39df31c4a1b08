"""Plain threads: a web server whose handlers answer from an informer's lister.

    python examples/lister_web.py [--kubeconfig PATH] [--port 8080]

No ``async`` anywhere. The SyncSharedInformerFactory runs its event loop on a
background thread; ``http.server`` handles each request on a thread of its
own and reads the cache through the lister, directly, with no API request:

    GET /pods                      every pod's key
    GET /pods?namespace=NS         the pods of one namespace
    GET /pods?selector=app%3Dweb   pods matching a label selector
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from kubereflector import Lister, SyncSharedInformerFactory
from kubereflector.client import load_config


def make_handler(pods: Lister) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path != "/pods":
                self.send_error(404)
                return
            try:
                lister = pods.namespaced(query["namespace"]) if "namespace" in query else pods
                found = lister.list(query.get("selector"))
            except ValueError as err:  # a malformed selector names its fault
                self.send_error(400, str(err))
                return
            keys = sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in found)
            body = json.dumps(keys).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass  # quiet

    return Handler


def main(kubeconfig: str | None, port: int) -> None:
    factory = SyncSharedInformerFactory(load_config(kubeconfig))
    pods = factory.lister_for("pods")
    factory.start()  # no running event loop here: a background thread runs it
    try:
        if not all(factory.wait_for_cache_sync(timeout=60).values()):
            raise SystemExit("the pod cache did not sync")
        server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(pods))
        print(f"serving on http://127.0.0.1:{server.server_address[1]}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    finally:
        factory.shutdown()  # stops the informers and joins the loop thread


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve pods from an informer's lister.")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config or in-cluster")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    args = parser.parse_args()
    main(args.kubeconfig, args.port)
