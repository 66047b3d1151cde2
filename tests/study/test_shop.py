"""The demo shop over plain HTTP: its pages, the happy path, each built-in flaw, separate carts."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from study import shop as shop_module
from study.shop import CONFUSING_ERROR, DEAD_LINK_PATH, FLAW_CLUES, FLAWS, DemoShop, flaws_in

if TYPE_CHECKING:
    from collections.abc import Iterator

SHIPPING = {
    "full_name": "Rosa Lindqvist",
    "email": "rosa@example.test",
    "street": "12 Garden Street",
    "city": "Springfield",
    "postcode": "94107",
}
PAYMENT = {
    "card_name": "Rosa Lindqvist",
    "card_number": "4242 4242 4242 4242",
    "expiry": "12/30",
    "cvc": "123",
}
SLOW_STEP_S = 0.3


@pytest.fixture
def shop() -> Iterator[DemoShop]:
    running = DemoShop(slow_step_s=SLOW_STEP_S).start()
    try:
        yield running
    finally:
        running.stop()


def browser(shop: DemoShop) -> httpx.Client:
    """A client with its own cookie jar, as a browser profile has."""
    return httpx.Client(base_url=shop.origin, follow_redirects=True, timeout=10)


def buy_jacket(client: httpx.Client) -> httpx.Response:
    assert client.post("/cart/add", data={"slug": "rain-jacket"}).status_code == 200
    shipped = client.post("/checkout/shipping", data=SHIPPING)
    assert shipped.url.path == "/checkout/payment", shipped.text
    return client.post("/checkout/payment", data=PAYMENT)


def test_flaws_are_the_documented_ones() -> None:
    assert set(FLAWS) == {
        "unlabeled-field",
        "slow-step",
        "confusing-error",
        "dead-link",
        "missing-alt",
    }
    assert all(description for description in FLAWS.values())
    documented = shop_module.__doc__ or ""
    assert all(f"`{flaw}`" in documented for flaw in FLAWS), "each flaw id is in the docstring"


def test_home_lists_products_that_link_to_their_pages_with_add_to_cart(shop: DemoShop) -> None:
    with browser(shop) as client:
        home = client.get("/")
        assert home.status_code == 200
        links = re.findall(r'href="(/product/[^"]+)"', home.text)
        assert len(links) == 4
        for link in links:
            page = client.get(link)
            assert page.status_code == 200
            assert "<button>Add to cart</button>" in page.text


def test_search_finds_the_product_by_name_and_says_when_nothing_matches(shop: DemoShop) -> None:
    with browser(shop) as client:
        found = client.get("/search", params={"q": "rain"})
        assert 'href="/product/rain-jacket"' in found.text
        assert "/product/wool-socks" not in found.text
        none = client.get("/search", params={"q": "umbrella"})
        assert "No products match your search." in none.text


def test_the_happy_path_ends_on_an_order_confirmation(shop: DemoShop) -> None:
    with browser(shop) as client:
        confirmed = buy_jacket(client)
        assert confirmed.status_code == 200
        assert confirmed.url.path.startswith("/order/")
        assert "<h1>Order confirmed</h1>" in confirmed.text
        assert "Thank you, Rosa Lindqvist." in confirmed.text
        assert "Cart (0)" in confirmed.text, "the order empties the cart"


def test_dead_link_in_the_navigation_answers_404(shop: DemoShop) -> None:
    with browser(shop) as client:
        home = client.get("/")
        assert f'<a href="{DEAD_LINK_PATH}">Shipping &amp; returns</a>' in home.text
        dead = client.get(DEAD_LINK_PATH)
    assert dead.status_code == 404
    assert "<h1>404 Not Found</h1>" in dead.text


def test_slow_step_holds_continue_to_payment_for_the_configured_delay(shop: DemoShop) -> None:
    with browser(shop) as client:
        client.post("/cart/add", data={"slug": "travel-mug"})
        started = time.monotonic()
        client.post("/checkout/shipping", data=SHIPPING)
        waited = time.monotonic() - started
    # A lower bound only: the delay is the flaw, and a slow machine may add to it.
    assert waited >= SLOW_STEP_S


def test_confusing_error_names_no_field_when_the_postcode_is_missing_or_bad(
    shop: DemoShop,
) -> None:
    with browser(shop) as client:
        client.post("/cart/add", data={"slug": "wool-socks"})
        for postcode in ("", "?"):
            answer = client.post("/checkout/shipping", data={**SHIPPING, "postcode": postcode})
            assert answer.url.path == "/checkout/shipping"
            alert = re.search(r'<p role="alert">([^<]*)</p>', answer.text)
            assert alert is not None
            assert alert.group(1) == CONFUSING_ERROR
            assert "postcode" not in alert.group(1).casefold()
            assert 'value="Rosa Lindqvist"' in answer.text, "what was typed stays"


def test_other_shipping_fields_get_messages_that_name_them(shop: DemoShop) -> None:
    with browser(shop) as client:
        answer = client.post("/checkout/shipping", data={**SHIPPING, "email": "rosa"})
    assert "Please enter a valid email address" in answer.text
    assert CONFUSING_ERROR not in answer.text


def test_the_postcode_input_has_no_label_aria_label_title_or_placeholder(shop: DemoShop) -> None:
    with browser(shop) as client:
        form = client.get("/checkout").text
    inputs = re.findall(r"<input [^>]*>", form)
    postcode = next(i for i in inputs if 'name="postcode"' in i)
    assert not re.search(r"\b(aria-label|aria-labelledby|title|placeholder|id)=", postcode)
    assert f"<label>Postcode {postcode}" not in form
    labelled = [i for i in inputs if 'name="postcode"' not in i]
    assert len(labelled) == 4
    assert all(f"{i}</label>" in form for i in labelled), "the other fields are labelled"


def test_the_home_banner_image_has_no_alt_text(shop: DemoShop) -> None:
    with browser(shop) as client:
        home = client.get("/").text
        images = re.findall(r"<img [^>]*>", home)
        assert images and all("alt=" not in i for i in images)
        assert client.get("/banner.svg").headers["content-type"] == "image/svg+xml"


def test_each_browser_sees_its_own_cart_and_the_log_records_its_cookie(shop: DemoShop) -> None:
    with browser(shop) as first, browser(shop) as second:
        first.post("/cart/add", data={"slug": "rain-jacket"})
        second.post("/cart/add", data={"slug": "canvas-tote"})
        second.post("/cart/add", data={"slug": "canvas-tote"})
        first_cart, second_cart = first.get("/cart").text, second.get("/cart").text
        first_cookie, second_cookie = first.cookies["shop_session"], second.cookies["shop_session"]
    assert "Rain jacket" in first_cart and "Canvas tote bag" not in first_cart
    assert second_cart.count("Canvas tote bag") == 2 and "Rain jacket" not in second_cart
    assert first_cookie != second_cookie
    carts = [r for r in shop.log() if r.path == "/cart" and r.method == "GET"]
    assert {r.cookie for r in carts} == {first_cookie, second_cookie}
    assert [r.cookie for r in carts[-2:]] == [first_cookie, second_cookie]


def test_going_back_to_a_form_answer_shows_the_form_not_a_404(shop: DemoShop) -> None:
    with browser(shop) as client:
        again = client.get("/checkout/shipping")
    assert again.url.path == "/checkout"
    assert "Checkout: shipping" in again.text


def test_payment_before_shipping_and_unknown_orders_are_not_shown(shop: DemoShop) -> None:
    with browser(shop) as client, browser(shop) as other:
        assert client.get("/checkout/payment").url.path == "/checkout"
        order = buy_jacket(client).url.path
        assert other.get(order).status_code == 404, "an order is only shown to its own browser"


@pytest.mark.parametrize(
    ("note", "flaw"),
    [
        ("Unlabeled field (Postcode): A box next to 'Postcode' has no label.", "unlabeled-field"),
        ("Slow step (Continue to payment): I waited 2.7 s for the page.", "slow-step"),
        ("The page says 'Error E-4012: request could not be processed.'", "confusing-error"),
        ("Error page (/help/shipping-returns): I got '404 Not Found'.", "dead-link"),
        ("Image without alt text (banner.svg): it has no description.", "missing-alt"),
    ],
)
def test_a_reaction_s_note_is_matched_to_the_flaw_it_describes(note: str, flaw: str) -> None:
    assert flaws_in(note) == {flaw}


def test_every_flaw_has_clues_and_a_happy_note_matches_none() -> None:
    assert set(FLAW_CLUES) == set(FLAWS)
    assert flaws_in("Reached 'Order confirmed': the task looks done.") == set()
