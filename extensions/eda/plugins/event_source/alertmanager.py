# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An event source for ansible-rulebook: Alertmanager's webhook, one event per alert.

    sources:
      - gpuops.cluster.alertmanager:
          host: 0.0.0.0
          port: 5050
          token: "{{ heal_webhook_token }}"   # optional: Alertmanager's http_config authorization

Alertmanager posts a group of alerts (its webhook format, version 4) to ``http://HOST:PORT/`` (any
path); each alert becomes one event, ``{"alert": {"status", "labels", "annotations", "startsAt",
"endsAt", "fingerprint"}, "meta": {"receiver", "group_key", "path"}}``, so that a rule reads
``event.alert.labels.node``. With ``token``, a request without ``Authorization: Bearer <token>`` is
refused (401). A body that is not Alertmanager's (not JSON, no list of alerts, over 1 MiB) is refused
(400, 413) with the reason; at most ``max_alerts`` (100) alerts of one post become events.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any

from aiohttp import web

LOGGER = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024
FIELDS = ("status", "labels", "annotations", "startsAt", "endsAt", "fingerprint")


def events(payload, path="/", max_alerts=100):
    """The events of one webhook post: ``(events, problem)``, ``problem`` None when the post is Alertmanager's."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        return [], "not Alertmanager's webhook: no list of alerts"
    meta = {"receiver": str(payload.get("receiver", "")), "group_key": str(payload.get("groupKey", "")), "path": path}
    out = []
    for alert in payload["alerts"][:max_alerts]:
        if not isinstance(alert, dict):
            continue
        kept = {name: alert.get(name) for name in FIELDS if name in alert}
        for name in ("labels", "annotations"):
            value = kept.get(name)
            kept[name] = {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
        out.append({"alert": kept, "meta": meta})
    return out, None


async def main(queue: asyncio.Queue, args: dict[str, Any]) -> None:
    """Serve the webhook until cancelled, putting each alert on ``queue``."""
    host = str(args.get("host", "127.0.0.1"))
    port = int(args.get("port", 5050))
    token = str(args.get("token") or "")
    max_alerts = int(args.get("max_alerts", 100))

    async def receive(request: web.Request) -> web.Response:
        if token:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return web.json_response({"error": "a bearer token is required"}, status=401)
        try:
            payload = json.loads(await request.read())
        except ValueError as exc:
            return web.json_response({"error": f"not JSON: {exc}"}, status=400)
        found, problem = events(payload, request.path, max_alerts)
        if problem:
            return web.json_response({"error": problem}, status=400)
        for event in found:
            await queue.put(event)
        LOGGER.info("gpuops.cluster.alertmanager: %d alert(s) from %s", len(found), request.remote)
        return web.json_response({"events": len(found)}, status=202)

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/{tail:.*}", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        await asyncio.Future()
    finally:
        await runner.cleanup()


if __name__ == "__main__":

    class _Print:
        async def put(self, event):
            print(json.dumps(event))

    asyncio.run(main(_Print(), {"port": 5050}))
