"""The demo shop mails an order confirmation to the email typed at checkout, and the persona's
inbox (the real SMTP server and mailbox) stores it with the order's link."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx

from study.shop import BY_SLUG, DemoShop
from synthetic_users._inbox import InboxServer, Mailbox
from synthetic_users._store import NewRun, Store

if TYPE_CHECKING:
    from pathlib import Path

SHIPPING = {
    "full_name": "Ada Lovelace",
    "street": "12 Garden Street",
    "city": "Springfield",
    "postcode": "12345",
}
PAYMENT = {"card_name": "Ada Lovelace", "card_number": "4242424242424242", "expiry": "12/30"}


def checkout(shop: DemoShop, email: str) -> str:
    with httpx.Client(base_url=shop.origin, follow_redirects=True, timeout=10) as http:
        http.post("/cart/add", data={"slug": next(iter(BY_SLUG))})
        http.post("/checkout/shipping", data={**SHIPPING, "email": email})
        placed = http.post("/checkout/payment", data={**PAYMENT, "cvc": "123"})
        assert "Order confirmed" in placed.text, placed.text
        return str(placed.url)


async def test_placing_an_order_mails_its_confirmation_with_the_order_link(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "su.db")
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url="http://127.0.0.1:9/",
            task="buy",
            turn_budget=5,
            model="scripted",
            personas=[{"name": "Ada"}],
            request_hash="h",
        ),
    )
    session_id = store.sessions(run.run_id)[0].session_id
    store.start_session(session_id)
    mailbox = Mailbox(store, "inbox.localhost")
    address = mailbox.address_for(session_id)
    server = InboxServer(mailbox, host="127.0.0.1", port=0, max_bytes=1 << 20)
    await server.start()
    shop = DemoShop(slow_step_s=0, smtp_port=server.port).start()
    try:
        order_url = await asyncio.to_thread(checkout, shop, address)
        # An address the inbox does not know is refused, and the shop still confirms the order.
        await asyncio.to_thread(checkout, shop, "someone@inbox.localhost")
    finally:
        shop.stop()
        await server.stop()
    [message] = mailbox.messages(session_id)
    assert message.subject.startswith("Your Fernhill Goods order FG-")
    assert message.mail_from == "orders@fernhill.example"
    assert message.links == (order_url,)
    assert order_url in message.text and "<p>" not in message.text
    assert shop.mail_log[0] == (address, "sent")
    assert shop.mail_log[1][0] == "someone@inbox.localhost"
    assert "550" in shop.mail_log[1][1]
    store.close()
