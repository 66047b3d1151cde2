"""A self-signed certificate and a small HTTPS login site, for real-Chromium tests of `https://`.

Chromium reaches the site under its real name (`https://example.com`) through
`--host-resolver-rules` (`MAP example.com:443 127.0.0.1:<port>`) and accepts the certificate
with `--ignore-certificate-errors`; nothing leaves the machine.
"""

from __future__ import annotations

import datetime
import html
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from pathlib import Path


def self_signed(folder: Path, *names: str) -> tuple[Path, Path]:
    """A certificate for `names` (and 127.0.0.1) and its key, as PEM files in `folder`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def resolver_flags(port: int, *names: str) -> list[str]:
    """Chromium flags that send `https://<name>` to 127.0.0.1:`port` and accept its certificate."""
    rules = ", ".join(f"MAP {n}:443 127.0.0.1:{port}" for n in names)
    return [f"--host-resolver-rules={rules}", "--ignore-certificate-errors"]


LOGIN = """<!doctype html><html lang=en><head><meta charset=utf-8><title>Sign in</title></head>
<body><main><h1>Sign in</h1>{message}<form method=post action=/login>
<label>User <input name=user autocomplete=username></label>
<label>Password <input name=password type=password autocomplete=current-password></label>
<button type=submit>Sign in</button></form></main></body></html>"""
WELCOME = """<!doctype html><html lang=en><head><meta charset=utf-8><title>Account</title></head>
<body><main><h1>Welcome, {user}</h1></main></body></html>"""


@dataclass
class LoginSite:
    """`/login` over HTTPS: a user field, a password field and a "Sign in" button."""

    cert: Path
    key: Path
    password: str
    logins: list[tuple[str, bool]] = field(default_factory=list)  # (user, accepted)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def start(self) -> LoginSite:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, status: int, body: str = "", location: str = "") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                if location:
                    self.send_header("Location", location)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/login":
                    self._send(200, LOGIN.format(message=""))
                elif self.path.startswith("/welcome?user="):
                    self._send(200, WELCOME.format(user=html.escape(self.path.split("=", 1)[1])))
                else:
                    self._send(404, "<h1>Not found</h1>")

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                user = form.get("user", [""])[0]
                ok = form.get("password", [""])[0] == site.password
                site.logins.append((user, ok))
                if ok:
                    self._send(303, location=f"/welcome?user={user}")
                else:
                    self._send(200, LOGIN.format(message="<p role=alert>Wrong password.</p>"))

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
