"""The bundled demo shop `make study` sends its personas to, with usability flaws built in.

A small multi-page shop served on 127.0.0.1 (stdlib `ThreadingHTTPServer`, port 0), rendered on
the server without scripts: a home page with a product list and a search box, product pages with
"Add to cart", a cart, a two-step checkout (shipping, then payment) and an order confirmation.
The cart and the checkout live in a server-side session named by the `shop_session` cookie, so
each browser profile has its own cart; every request is logged with the cookie it carried.

The flaws are deliberate, deterministic and always present (`FLAWS` lists them by stable id):

- `unlabeled-field`: the shipping form's postcode input has no label, `aria-label`, `title` or
  placeholder. The word "Postcode" is printed beside it in a plain `<span>`, so a sighted person
  can guess, but the accessibility tree names it "" (a snapshot shows a bare `textbox`).
- `slow-step`: "Continue to payment" (POST /checkout/shipping) answers only after
  `slow_step_s` seconds (default 2.5; tests set it lower), whatever the form held.
- `confusing-error`: a missing or malformed postcode (not 4-10 letters, digits, spaces or
  dashes) re-renders the shipping form with "Error E-4012: request could not be processed." and
  no hint which field is wrong. Other fields get plain, field-specific messages.
- `dead-link`: the "Shipping & returns" link in every page's navigation answers 404.
- `missing-alt`: the home page's banner image has no `alt` attribute.

The happy path: open a product, "Add to cart", "Proceed to checkout", fill the five shipping
fields (postcode included), "Continue to payment", fill the card fields (any 13-19 digit card
number, an `MM/YY` expiry, a 3-4 digit CVC), "Place order": the page says "Order confirmed".

With `smtp_port` set, placing an order also mails a confirmation over SMTP (no flaw in it) to the
email typed at checkout, with a link to the order's page (`/order/<number>`, for the same
browser's cart session); `mail_log` records each attempt and what the server answered.
"""

from __future__ import annotations

import html
import re
import secrets
import smtplib
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

FLAWS: dict[str, str] = {
    "unlabeled-field": "the checkout's postcode input has no label, aria-label or placeholder",
    "slow-step": "'Continue to payment' takes seconds to answer (2.5 s by default)",
    "confusing-error": "a bad postcode shows 'Error E-4012' without naming the field",
    "dead-link": "the 'Shipping & returns' link in the navigation answers 404",
    "missing-alt": "the home page's banner image has no alt text",
}
# Words a reaction to each flaw is bound to contain, whoever wrote it (casefolded substrings).
FLAW_CLUES: dict[str, tuple[str, ...]] = {
    "unlabeled-field": ("postcode", "label"),
    "slow-step": ("slow", "waited", "took", "long time"),
    "confusing-error": ("e-4012", "which field", "could not be processed"),
    "dead-link": ("404", "not found", "shipping-returns", "dead link", "broken link"),
    "missing-alt": ("alt text", "alt=", "banner.svg", "no description"),
}
CONFUSING_ERROR = "Error E-4012: request could not be processed."
DEAD_LINK_PATH = "/help/shipping-returns"
COOKIE = "shop_session"
FORM_PAGES = {
    "/cart/add": "/cart",
    "/checkout/shipping": "/checkout",
    "/checkout/payment": "/checkout",
}
DEFAULT_SLOW_STEP_S = 2.5
POSTCODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 -]{2,8}[A-Za-z0-9]")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
EXPIRY = re.compile(r"(0[1-9]|1[0-2])\s*/\s*\d{2}")


def flaws_in(note: str) -> set[str]:
    """The flaws a reaction's note points at, by `FLAW_CLUES` (for the study's printout)."""
    lowered = note.casefold()
    return {flaw for flaw, clues in FLAW_CLUES.items() if any(c in lowered for c in clues)}


@dataclass(frozen=True)
class Product:
    slug: str
    name: str
    price_cents: int
    blurb: str


PRODUCTS = (
    Product("rain-jacket", "Rain jacket", 8900, "A light waterproof jacket that packs small."),
    Product("wool-socks", "Wool socks", 1500, "Warm merino socks, three pairs."),
    Product("travel-mug", "Travel mug", 2400, "Keeps coffee hot for six hours."),
    Product("canvas-tote", "Canvas tote bag", 1900, "A sturdy bag for the weekly shop."),
)
BY_SLUG = {p.slug: p for p in PRODUCTS}
SHIPPING_FIELDS = (  # (form name, visible label); the postcode's label is only a <span>
    ("full_name", "Full name"),
    ("email", "Email"),
    ("street", "Street address"),
    ("city", "City"),
    ("postcode", "Postcode"),
)
PAYMENT_FIELDS = (
    ("card_name", "Name on card"),
    ("card_number", "Card number"),
    ("expiry", "Expiry date (MM/YY)"),
    ("cvc", "Security code (CVC)"),
)


@dataclass(frozen=True)
class ShopRequest:
    """One request as the shop answered it."""

    method: str
    path: str  # path and query
    cookie: str | None  # the `shop_session` value the request carried, if any
    status: int


@dataclass
class ShopSession:
    """One browser's state: its cart (product slugs in order) and the checkout so far."""

    cart: list[str] = field(default_factory=list)
    shipping: dict[str, str] | None = None
    orders: list[str] = field(default_factory=list)


def _money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def _page(title: str, body: str, cart_count: int = 0) -> str:
    nav = (
        '<nav aria-label="Main"><a href="/">Home</a> · '
        f'<a href="/cart">Cart ({cart_count})</a> · '
        f'<a href="{DEAD_LINK_PATH}">Shipping &amp; returns</a></nav>'
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head><body><header><strong>Fernhill Goods</strong> {nav}</header>"
        f"<main>{body}</main></body></html>"
    )


def _product_list(products: tuple[Product, ...] | list[Product]) -> str:
    items = "".join(
        f'<li><a href="/product/{p.slug}">{html.escape(p.name)}</a> {_money(p.price_cents)}</li>'
        for p in products
    )
    return f"<ul>{items}</ul>" if products else "<p>No products match your search.</p>"


def _search_form(query: str = "") -> str:
    return (
        '<form method="get" action="/search" role="search">'
        f'<label>Search products <input type="search" name="q" value="{html.escape(query)}">'
        "</label> <button>Search</button></form>"
    )


def _field(name: str, label: str, value: str, labelled: bool = True) -> str:
    value_attr = f' value="{html.escape(value)}"' if value else ""
    if labelled:
        return f'<p><label>{label} <input name="{name}"{value_attr}></label></p>'
    # The flaw `unlabeled-field`: text beside the input, nothing that names it.
    return f'<p><span>{label}</span> <input name="{name}"{value_attr}></p>'


def _shipping_form(values: dict[str, str], error: str = "") -> str:
    alert = f'<p role="alert">{html.escape(error)}</p>' if error else ""
    fields = "".join(
        _field(name, label, values.get(name, ""), labelled=name != "postcode")
        for name, label in SHIPPING_FIELDS
    )
    return (
        f"<h1>Checkout: shipping</h1>{alert}"
        f'<form method="post" action="/checkout/shipping">{fields}'
        "<button>Continue to payment</button></form>"
    )


def _payment_form(values: dict[str, str], error: str = "") -> str:
    alert = f'<p role="alert">{html.escape(error)}</p>' if error else ""
    fields = "".join(_field(n, label, values.get(n, "")) for n, label in PAYMENT_FIELDS)
    return (
        f"<h1>Checkout: payment</h1>{alert}"
        f'<form method="post" action="/checkout/payment">{fields}'
        "<button>Place order</button></form>"
    )


def shipping_error(form: dict[str, str]) -> str:
    """The message the shipping step shows for this form, or "" when it is accepted."""
    if not form.get("full_name", "").strip():
        return "Please enter your full name."
    if not EMAIL.fullmatch(form.get("email", "").strip()):
        return "Please enter a valid email address, like name@example.com."
    if not form.get("street", "").strip():
        return "Please enter your street address."
    if not form.get("city", "").strip():
        return "Please enter your city."
    if not POSTCODE.fullmatch(form.get("postcode", "").strip()):
        return CONFUSING_ERROR  # the flaw `confusing-error`
    return ""


def payment_error(form: dict[str, str]) -> str:
    """The message the payment step shows for this form, or "" when it is accepted."""
    digits = re.sub(r"[\s-]", "", form.get("card_number", ""))
    if not form.get("card_name", "").strip():
        return "Please enter the name printed on the card."
    if not (digits.isdigit() and 13 <= len(digits) <= 19):
        return "The card number should be 13 to 19 digits."
    if not EXPIRY.fullmatch(form.get("expiry", "").strip()):
        return "Please enter the expiry date as MM/YY."
    if not re.fullmatch(r"\d{3,4}", form.get("cvc", "").strip()):
        return "The security code is the 3 or 4 digits on the back of the card."
    return ""


@dataclass(frozen=True)
class Reply:
    """What the shop answers one request."""

    status: int
    body: str = ""
    content_type: str = "text/html; charset=utf-8"
    location: str = ""


def _not_found(cart_count: int) -> Reply:
    body = "<h1>404 Not Found</h1><p>The page you asked for does not exist.</p>"
    return Reply(404, _page("404 Not Found", body, cart_count))


def _cart(session: ShopSession) -> str:
    if not session.cart:
        return '<h1>Your cart</h1><p>Your cart is empty.</p><a href="/">Shop now</a>'
    items = "".join(
        f"<li>{html.escape(BY_SLUG[s].name)} {_money(BY_SLUG[s].price_cents)}</li>"
        for s in session.cart
    )
    total = _money(sum(BY_SLUG[s].price_cents for s in session.cart))
    return (
        f"<h1>Your cart</h1><ul>{items}</ul><p>Total: {total}</p>"
        '<a href="/checkout">Proceed to checkout</a>'
    )


@dataclass
class DemoShop:
    """A running demo shop; `stop()` shuts it down. `slow_step_s` is the `slow-step` delay."""

    slow_step_s: float = DEFAULT_SLOW_STEP_S
    server: ThreadingHTTPServer | None = None
    sessions: dict[str, ShopSession] = field(default_factory=dict)
    requests: list[ShopRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    smtp_host: str = "127.0.0.1"
    smtp_port: int | None = None  # where order confirmations are mailed; None: no mail
    mail_log: list[tuple[str, str]] = field(default_factory=list)  # (recipient, "sent" | error)

    @property
    def origin(self) -> str:
        assert self.server is not None  # noqa: S101 - started first
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"

    def log(self) -> list[ShopRequest]:
        """A copy of the request log, oldest first."""
        with self.lock:
            return list(self.requests)

    def session_of(self, token: str | None) -> tuple[str, ShopSession, bool]:
        """The session a cookie names, or a new one; the flag says whether it is new."""
        with self.lock:
            if token is not None and token in self.sessions:
                return token, self.sessions[token], False
            token = secrets.token_urlsafe(12)
            self.sessions[token] = ShopSession()
            return token, self.sessions[token], True

    def get(self, path: str, query: str, session: ShopSession) -> Reply:
        """What a GET of `path` answers this session."""
        count = len(session.cart)
        if path == "/":
            banner = '<img src="/banner.svg" width="480" height="60">'  # the flaw `missing-alt`
            body = f"{banner}<h1>Welcome to Fernhill Goods</h1>{_search_form()}"
            return Reply(
                200,
                _page("Fernhill Goods", f"{body}<h2>Products</h2>{_product_list(PRODUCTS)}", count),
            )
        if path == "/banner.svg":
            svg = '<svg xmlns="http://www.w3.org/2000/svg" width="480" height="60">'
            return Reply(
                200, f'{svg}<rect width="480" height="60" fill="#2a6"/></svg>', "image/svg+xml"
            )
        if path == "/search":
            text = parse_qs(query).get("q", [""])[0]
            words = text.casefold().split()
            found = [p for p in PRODUCTS if all(w in p.name.casefold() for w in words)]
            body = f"<h1>Search results</h1>{_search_form(text)}{_product_list(found)}"
            return Reply(200, _page("Search results", body, count))
        if path.startswith("/product/") and path.removeprefix("/product/") in BY_SLUG:
            p = BY_SLUG[path.removeprefix("/product/")]
            body = (
                f"<h1>{html.escape(p.name)}</h1><p>{html.escape(p.blurb)}</p>"
                f"<p>Price: {_money(p.price_cents)}</p>"
                '<form method="post" action="/cart/add">'
                f'<input type="hidden" name="slug" value="{p.slug}">'
                "<button>Add to cart</button></form>"
            )
            return Reply(200, _page(p.name, body, count))
        if path == "/cart":
            return Reply(200, _page("Your cart", _cart(session), count))
        if path == "/checkout":
            return Reply(
                200, _page("Checkout: shipping", _shipping_form(session.shipping or {}), count)
            )
        if path == "/checkout/payment" and session.shipping is not None:
            return Reply(200, _page("Checkout: payment", _payment_form({}), count))
        if path in FORM_PAGES:  # a reload or "back" to a form's answer shows the form again
            return Reply(303, location=FORM_PAGES[path])
        order = path.removeprefix("/order/")
        if path.startswith("/order/") and order in session.orders:
            name = html.escape((session.shipping or {}).get("full_name", ""))
            body = (
                f"<h1>Order confirmed</h1><p>Thank you, {name}. Your order number is {order}.</p>"
                '<a href="/">Keep shopping</a>'
            )
            return Reply(200, _page("Order confirmed", body, count))
        return _not_found(count)  # DEAD_LINK_PATH among them: the flaw `dead-link`

    def post(self, path: str, form: dict[str, str], session: ShopSession) -> Reply:
        """What a form POST to `path` answers this session."""
        count = len(session.cart)
        if path == "/cart/add" and form.get("slug") in BY_SLUG:
            with self.lock:
                session.cart.append(form["slug"])
            return Reply(303, location="/cart")
        if path == "/checkout/shipping":
            time.sleep(self.slow_step_s)  # the flaw `slow-step`
            error = shipping_error(form)
            if error:
                return Reply(200, _page("Checkout: shipping", _shipping_form(form, error), count))
            with self.lock:
                session.shipping = form
            return Reply(303, location="/checkout/payment")
        if path == "/checkout/payment" and session.shipping is not None:
            error = payment_error(form)
            if error:
                return Reply(200, _page("Checkout: payment", _payment_form(form, error), count))
            with self.lock:
                order = f"FG-{1000 + sum(len(s.orders) for s in self.sessions.values())}"
                session.orders.append(order)
                session.cart.clear()
            self._mail_confirmation(session.shipping, order)
            return Reply(303, location=f"/order/{order}")
        return _not_found(count)

    def _mail_confirmation(self, shipping: dict[str, str], order: str) -> None:
        """Mail the order confirmation, as a shop's mailer would; a refusal is only logged."""
        if self.smtp_port is None:
            return
        to = shipping.get("email", "").strip()
        link = self.url(f"/order/{order}")
        name = shipping.get("full_name", "").strip() or "there"
        message = EmailMessage()
        message["From"] = "Fernhill Goods <orders@fernhill.example>"
        message["To"] = to
        message["Subject"] = f"Your Fernhill Goods order {order} is confirmed"
        message.set_content(
            f"Hello {name},\n\nthank you for your order {order}. See it here:\n{link}\n\n"
            "Fernhill Goods\n"
        )
        message.add_alternative(
            f"<p>Hello {html.escape(name)},</p><p>thank you for your order {order}. "
            f'<a href="{link}">View your order</a>.</p><p>Fernhill Goods</p>',
            subtype="html",
        )
        try:
            with smtplib.SMTP(self.smtp_host, self.smtp_port, timeout=10) as client:
                client.send_message(message)
            result = "sent"
        except (smtplib.SMTPException, OSError) as exc:
            result = f"refused: {exc}"
        with self.lock:
            self.mail_log.append((to, result))

    def start(self) -> DemoShop:
        shop = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: the request log is `shop.requests`

            def _serve(self, method: str) -> None:
                carried = next(
                    (
                        value
                        for key, _, value in (
                            part.strip().partition("=")
                            for part in self.headers.get("Cookie", "").split(";")
                        )
                        if key == COOKIE and value
                    ),
                    None,
                )
                token, session, new = shop.session_of(carried)
                url = urlsplit(self.path)
                if method == "GET":
                    reply = shop.get(url.path, url.query, session)
                else:
                    length = int(self.headers.get("Content-Length", "0"))
                    raw = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                    reply = shop.post(url.path, {k: v[0] for k, v in raw.items()}, session)
                with shop.lock:
                    shop.requests.append(ShopRequest(method, self.path, carried, reply.status))
                data = reply.body.encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                if reply.location:
                    self.send_header("Location", reply.location)
                if new:
                    self.send_header(
                        "Set-Cookie", f"{COOKIE}={token}; HttpOnly; Path=/; SameSite=Lax"
                    )
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A short poll interval: `stop()` returns within it.
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
