# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The webhook receiver of molecule/dcgm: Alertmanager delivers to it, and it keeps each notification
as one JSON line in /var/log/gpuops-webhook.jsonl for the side effect and the verify to read."""

import http.server
import json

LOG = "/var/log/gpuops-webhook.jsonl"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args):
        return


http.server.HTTPServer(("127.0.0.1", 9099), Handler).serve_forever()
