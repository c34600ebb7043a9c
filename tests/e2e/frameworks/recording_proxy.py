"""A loopback reverse proxy that writes down what an agent framework sends.

The framework suite (agent_frameworks.sh) puts it between a framework and
`areal-host serve`, so the checks see each request body exactly as the
framework's own HTTP client sent it (tool_choice, the assistant turn of a tool
call with content null, absent or empty, the tool results) without hooking
into any framework. Responses, streamed ones included, pass through as the
gateway sent them.

    recording_proxy.py UPSTREAM_URL LOG_JSONL PORT_FILE
"""
import http.client
import http.server
import json
import os
import sys
import threading
import urllib.parse

upstream = urllib.parse.urlsplit(sys.argv[1])
log_path, port_file = sys.argv[2], sys.argv[3]
log_lock = threading.Lock()
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body of a reply ends where its connection does: streams pass as they come

    def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        with log_lock, open(log_path, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "body": parsed}) + "\n")
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=300)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "host"}
        headers["Host"] = upstream.netloc
        conn.request(self.command, self.path, body=body, headers=headers)
        reply = conn.getresponse()
        self.send_response(reply.status, reply.reason)
        for k, v in reply.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.end_headers()
        while chunk := reply.read1(65536):
            self.wfile.write(chunk)
            self.wfile.flush()
        conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = _forward

    def log_message(self, *args):  # the request log above is the record
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
# Renamed into place: the harness waits for the whole file.
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
