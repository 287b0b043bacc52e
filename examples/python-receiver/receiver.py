"""A webhook receiver for the Safety Records Service, in Python 3 (standard library only).

    WEBHOOK_SECRET=whsec_... PORT=4000 python3 receiver.py
    (TLS_CERT=cert.pem TLS_KEY=key.pem to serve HTTPS, as real deliveries need)

It reads the raw body, verifies the Standard Webhooks headers (webhook-id, webhook-timestamp,
webhook-signature) or the Service-Signature header within 5 minutes, answers 204 at once and
skips ids it has handled before (deliveries can repeat).
"""
import base64
import hashlib
import hmac
import json
import os
import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("WEBHOOK_SECRET", "")
TOLERANCE_SECONDS = 300
if not SECRET.startswith("whsec_"):
    sys.exit("Set WEBHOOK_SECRET to the endpoint's whsec_... secret")

seen = set()  # a real receiver keeps this in its database


def fresh(seconds):
    return abs(time.time() - seconds) <= TOLERANCE_SECONDS


def standard_ok(headers, body):
    """HMAC-SHA256 of "id.timestamp.body", keyed with the base64 after whsec_."""
    msg_id = headers.get("webhook-id")
    try:
        timestamp = int(headers.get("webhook-timestamp", ""))
    except ValueError:
        return False
    if not msg_id or not fresh(timestamp):
        return False
    key = base64.b64decode(SECRET[len("whsec_"):])
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected) for s in headers.get("webhook-signature", "").split(" "))


def service_ok(header, body):
    """t=<unix>,v1=<hex HMAC-SHA256 of "t." + body>, keyed with the whole secret."""
    parts = [p.split("=", 1) for p in (header or "").split(",") if "=" in p]
    ts = next((v for k, v in parts if k == "t"), "")
    if not ts.isdigit() or not fresh(int(ts)):
        return False
    expected = hmac.new(SECRET.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(k == "v1" and hmac.compare_digest(v, expected) for k, v in parts)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.headers.get("webhook-signature"):
            ok = standard_ok(self.headers, body)
        else:
            ok = service_ok(self.headers.get("service-signature"), body)
        if not ok:
            print("refused: bad signature", flush=True)
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error":"bad signature"}')
            return
        delivery = json.loads(body)
        self.send_response(204)  # answer first, work after
        self.end_headers()
        if delivery["id"] in seen:
            print(f"repeat {delivery['id']} skipped", flush=True)
            return
        seen.add(delivery["id"])
        print(f"verified {delivery['event']} {delivery['id']} record {delivery['data'].get('id')}", flush=True)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    host = os.environ.get("HOST", "127.0.0.1")
    server = ThreadingHTTPServer((host, int(os.environ.get("PORT", "4000"))), Receiver)
    scheme = "http"
    if os.environ.get("TLS_CERT"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    print(f"listening on {scheme}://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()
