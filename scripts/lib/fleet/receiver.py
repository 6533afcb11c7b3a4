#!/usr/bin/env python3
"""The fleet's test webhook receiver (scripts/fleet-eval --online): an HTTP
server on 127.0.0.1 that answers 200 to every POST and appends its JSON
body, with the time it was received, to a file, one line each:
{"received_unix_ns": ..., "body": {...}}. Writes the port it listens on
to PORT_FILE once it listens.

    receiver.py OUT_FILE PORT_FILE"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        received = time.time_ns()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        with open(self.server.out, "a") as f:
            f.write(json.dumps({"received_unix_ns": received, "body": body}) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    out, port_file = sys.argv[1], sys.argv[2]
    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.out = out
    open(out, "a").close()
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{server.server_address[1]}\n")
    # Renamed into place: a reader never sees half a port.
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
