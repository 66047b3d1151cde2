"""The heuristic persona on snapshots built from the connector's own models.

Pages are `SnapshotResult`s shaped like the ones Understudy returns for the demo shop (an image
without alt is role `image` with an empty name, an unlabeled input a `textbox` named "", an alert
a node whose text is its children). The persona's history is what a loop would keep: the
rendered text of each earlier observation with the call made on it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest

from synthetic_users._actions import parse_action
from synthetic_users._llm._base import (
    Decision,
    Exchange,
    Model,
    Observation,
    Outcome,
    PersonaProfile,
    PriorReaction,
    ToolCall,
    ToolSpec,
    TurnRequest,
)
from synthetic_users._llm._heuristic import (
    ISSUE_LABELS,
    REACTION_KINDS,
    SLOW_STEP_MS,
    HeuristicPersona,
    read_snapshot,
    read_text,
)
from understudy_connector._snapshot import render_snapshot
from understudy_connector.generated.models import SnapshotResult

ORIGIN = "http://127.0.0.1:8123"
TASK = "Buy a rain jacket and have it delivered to your home."
ACTIONS = ("click", "type", "fill", "select_option", "press_key", "scroll", "navigate")
CATALOGUE = (*ACTIONS, "react", "finish")
TOOLS = tuple(ToolSpec(name, name, {"type": "object"}) for name in CATALOGUE)
PERSONA = PersonaProfile("Sam Okafor", goals=("get it quickly",))
NAV = [
    {"ref": "g1e1", "role": "navigation", "name": "Main", "depth": 1},
    {"ref": "g1e2", "role": "link", "name": "Home", "depth": 2},
    {"ref": "g1e3", "role": "link", "name": "Cart (0)", "depth": 2},
    {"ref": "g1e4", "role": "link", "name": "Shipping & returns", "depth": 2},
]


def snapshot(path: str, title: str, nodes: list[dict[str, Any]]) -> SnapshotResult:
    return SnapshotResult.model_validate(
        {
            "name": "snapshot",
            "url": f"{ORIGIN}{path}",
            "title": title,
            "generation": 1,
            "nodes": [{"role": "RootWebArea", "name": title, "depth": 0}, *nodes],
            "truncated": False,
        }
    )


def text(name: str, depth: int = 2) -> dict[str, Any]:
    return {"role": "StaticText", "name": name, "depth": depth}


def heading(name: str, ref: str = "g1e9") -> dict[str, Any]:
    return {"ref": ref, "role": "heading", "name": name, "depth": 1}


def field(ref: str, label: str, value: str | None = None) -> list[dict[str, Any]]:
    """A labelled input as Chromium shows it: the label's text, then the named textbox."""
    box: dict[str, Any] = {"ref": ref, "role": "textbox", "name": label, "depth": 3}
    if value is not None:
        box["value"] = value
    return [text(f"{label} ", 3), box]


def home() -> SnapshotResult:
    return snapshot(
        "/",
        "Fernhill Goods",
        [
            *NAV,
            {
                "ref": "g1e8",
                "role": "image",
                "name": "",
                "depth": 1,
                "attributes": {"src": "b.svg"},
            },
            heading("Welcome to Fernhill Goods"),
            {"ref": "g1e12", "role": "searchbox", "name": "Search products", "depth": 2},
            {"ref": "g1e14", "role": "button", "name": "Search", "depth": 2},
            {"ref": "g1e19", "role": "link", "name": "Rain jacket", "depth": 2},
            {"ref": "g1e22", "role": "link", "name": "Wool socks", "depth": 2},
            {"ref": "g1e25", "role": "link", "name": "Travel mug", "depth": 2},
        ],
    )


def product() -> SnapshotResult:
    return snapshot(
        "/product/rain-jacket",
        "Rain jacket",
        [
            *NAV,
            heading("Rain jacket"),
            {"ref": "g1e12", "role": "button", "name": "Add to cart", "depth": 2},
        ],
    )


def checkout(values: dict[str, str] | None = None, alert: str = "") -> SnapshotResult:
    v = values or {}
    nodes = [*NAV, heading("Checkout: shipping")]
    if alert:
        nodes += [{"ref": "g1e10", "role": "alert", "name": "", "depth": 1}, text(alert)]
    nodes += [
        {"ref": "g1e11", "role": "form", "name": "", "depth": 1},
        *field("g1e12", "Full name", v.get("Full name")),
        *field("g1e16", "Email", v.get("Email")),
        *field("g1e20", "Street address", v.get("Street address")),
        *field("g1e24", "City", v.get("City")),
        text("Postcode", 3),  # a <span> beside the input, not its label
        {"ref": "g1e27", "role": "textbox", "name": "", "depth": 3}
        | ({"value": v["postcode"]} if "postcode" in v else {}),
        {"ref": "g1e29", "role": "button", "name": "Continue to payment", "depth": 2},
    ]
    return snapshot("/checkout", "Checkout: shipping", nodes)


FILLED = {
    "Full name": "Sam Okafor",
    "Email": "sam-okafor@example.test",
    "Street address": "12 Garden Street",
    "City": "Springfield",
}


def not_found() -> SnapshotResult:
    return snapshot("/help/shipping-returns", "404 Not Found", [*NAV, heading("404 Not Found")])


def request(
    page: SnapshotResult,
    *,
    persona: PersonaProfile = PERSONA,
    turn: int = 1,
    history: tuple[Exchange, ...] = (),
    outcome: Outcome | None = None,
    prior: tuple[PriorReaction, ...] = (),
    must_finish: bool = False,
) -> TurnRequest:
    observation = Observation(page.url, page.title, page, render_snapshot(page), outcome)
    return TurnRequest(
        persona=persona,
        task=TASK,
        target_url=f"{ORIGIN}/",
        turn=turn,
        turn_budget=30,
        observation=observation,
        history=history,
        tools=TOOLS,
        prior_reactions=prior,
        must_finish=must_finish,
    )


def after(req: TurnRequest, decision: Decision, page: SnapshotResult) -> TurnRequest:
    """The next turn's request: `decision` ran on `req`'s page and the tab now shows `page`."""
    done = Exchange(req.observation.text, decision.call, decision.reason, Outcome(True, "done"))
    return request(
        page,
        persona=req.persona,
        turn=req.turn + 1,
        history=(*req.history, done),
        outcome=Outcome(True, "done"),
    )


def decide(req: TurnRequest, seed: int = 0) -> Decision:
    return HeuristicPersona(seed).choose(req)


def reacts(decision: Decision, kind: str) -> bool:
    call = decision.call
    return call.name == "react" and str(call.arguments["note"]).startswith(ISSUE_LABELS[kind])


def test_it_is_a_model_and_its_label_says_it_is_not_a_language_model() -> None:
    persona: Model = HeuristicPersona(seed=3)
    assert "heuristic" in persona.label
    assert "not a language model" in persona.label


async def test_decide_is_the_same_choice_as_choose() -> None:
    req = request(home())
    assert await HeuristicPersona(5).decide(req) == decide(req, 5)


def test_same_seed_and_request_give_the_same_decision_even_from_a_new_instance() -> None:
    low = replace(PERSONA, digital_literacy="low")
    persona = HeuristicPersona(seed=7)
    for turn in range(1, 30):
        req = request(home(), persona=low, turn=turn, prior=reacted_to_banner())
        first = persona.choose(req)
        persona.choose(request(product(), persona=low, turn=turn))  # no state carried over
        assert HeuristicPersona(seed=7).choose(req) == first


def test_the_seed_changes_a_low_literacy_persona_s_exploration() -> None:
    low = replace(PERSONA, digital_literacy="low")
    clicks = {
        seed: [
            decide(request(home(), persona=low, turn=t, prior=reacted_to_banner()), seed).call
            for t in range(1, 30)
        ]
        for seed in (1, 2)
    }
    assert clicks[1] != clicks[2]
    targets = {str(c.arguments["ref"]) for c in clicks[1] + clicks[2]}
    assert "g1e19" in targets and len(targets) > 1, "mostly the jacket, sometimes elsewhere"


def test_a_high_literacy_persona_goes_straight_for_the_task_s_words() -> None:
    high = replace(PERSONA, digital_literacy="high")
    for turn in range(1, 20):
        call = decide(request(home(), persona=high, turn=turn, prior=reacted_to_banner())).call
        assert call == ToolCall("click", {"ref": "g1e19", "ease": 7})


def reacted_to_banner() -> tuple[PriorReaction, ...]:
    note = f"{ISSUE_LABELS['missing-alt']} (b.svg): no description"
    return (PriorReaction(1, "neutral", note, f"{ORIGIN}/"),)


def test_the_product_page_leads_to_add_to_cart() -> None:
    call = decide(request(product())).call
    assert call.name == "click" and call.arguments["ref"] == "g1e12"


ERROR_500 = snapshot("/checkout", "Server Error", [*NAV, heading("500 Internal Server Error")])
PROBLEM_PAGES = {
    "error-page": (not_found(), None),
    "error-page-500": (ERROR_500, None),
    "slow": (product(), Outcome(True, "clicked", elapsed_ms=9_000)),
    "confusing-error": (
        checkout(FILLED, alert="Error E-4012: request could not be processed."),
        None,
    ),
    "validation": (checkout(FILLED, alert="Please enter a valid email address."), None),
    "unlabeled": (checkout(), None),
    "missing-alt": (home(), None),
    "dead-end": (snapshot("/cart", "Your cart", [heading("Your cart"), text("Empty.")]), None),
}


@pytest.mark.parametrize("case", sorted(PROBLEM_PAGES))
def test_reacts_to_each_observable_problem_once(case: str) -> None:
    page, outcome = PROBLEM_PAGES[case]
    kind = case.removesuffix("-500")
    req = request(page, outcome=outcome)
    seen = []
    for _ in range(6):  # a few turns on the same page, the persona's calls fed back to it
        decision = decide(req)
        seen.append(decision)
        if decision.call.name in ("navigate", "finish"):
            break
        req = after(req, decision, page)
    reactions = [d for d in seen if reacts(d, kind)]
    assert len(reactions) == 1, [d.call for d in seen]
    assert reacts(seen[0], kind) or any(reacts(d, kind) for d in seen[:3])


@pytest.mark.parametrize("case", sorted(PROBLEM_PAGES))
def test_a_reaction_from_a_crashed_generation_is_not_repeated(case: str) -> None:
    page, outcome = PROBLEM_PAGES[case]
    kind = case.removesuffix("-500")
    req = request(page, outcome=outcome)
    first = decide(req)
    for _ in range(3):  # it may react first to something else the page shows
        if reacts(first, kind):
            break
        req = after(req, first, page)
        first = decide(req)
    assert reacts(first, kind), first
    note = str(first.call.arguments["note"])
    restarted = replace(req, history=(), prior_reactions=(PriorReaction(1, "x", note, page.url),))
    assert not reacts(decide(restarted), kind)


def test_a_confusing_error_says_it_names_no_field_and_points_at_nothing_else() -> None:
    page = checkout(FILLED, alert="Error E-4012: request could not be processed.")
    call = decide(request(page)).call
    assert call.name == "react" and call.arguments["sentiment"] == "confused"
    assert "E-4012" in str(call.arguments["note"])
    assert "which field" in str(call.arguments["note"])


def test_an_error_that_names_the_field_is_a_validation_message_not_a_confusing_one() -> None:
    page = checkout(FILLED, alert="Error E-17: the email address is not valid.")
    decision = decide(request(page))
    assert reacts(decision, "validation") and not reacts(decision, "confusing-error")


def test_an_unlabeled_field_reaction_names_its_visual_label_and_points_at_it() -> None:
    call = decide(request(checkout())).call
    assert call.name == "react"
    assert str(call.arguments["note"]).startswith("Unlabeled field (Postcode):")
    assert call.arguments["ref"] == "g1e27"


def test_an_image_without_alt_is_named_by_its_file() -> None:
    call = decide(request(home())).call
    assert str(call.arguments["note"]).startswith("Image without alt text (b.svg):")
    assert call.arguments["ref"] == "g1e8"


@pytest.mark.parametrize(
    ("patience", "elapsed_ms", "slow"),
    [
        ("low", SLOW_STEP_MS["low"] + 500, True),
        ("medium", SLOW_STEP_MS["low"] + 500, False),
        ("high", SLOW_STEP_MS["medium"] + 500, False),
        ("high", SLOW_STEP_MS["high"] + 500, True),
    ],
)
def test_how_slow_is_too_slow_depends_on_patience(
    patience: str, elapsed_ms: float, slow: bool
) -> None:
    persona = replace(PERSONA, patience=patience)
    req = request(
        product(), persona=persona, outcome=Outcome(True, "clicked", elapsed_ms=elapsed_ms)
    )
    assert reacts(decide(req), "slow") is slow


def test_a_slow_step_is_named_by_the_control_that_was_used_and_lowers_ease() -> None:
    noted = (PriorReaction(1, "confused", "Unlabeled field (Postcode): ?", f"{ORIGIN}/checkout"),)
    before = request(checkout(FILLED | {"postcode": "94107"}), prior=noted)
    submit = decide(before)
    assert submit.call.arguments["ref"] == "g1e29"
    landed = after(before, submit, product())
    waited = Outcome(True, "clicked", elapsed_ms=9_000)
    slow = replace(landed, observation=replace(landed.observation, last_outcome=waited))
    decision = decide(slow)
    assert str(decision.call.arguments["note"]).startswith("Slow step (Continue to payment):")
    assert int(decision.call.arguments["ease"]) < int(submit.call.arguments["ease"])


def test_fills_the_shipping_form_with_persona_data_then_submits() -> None:
    high = replace(PERSONA, digital_literacy="high", locale="en-GB")
    values: dict[str, str] = {}
    req = request(checkout(), persona=high)
    filled: list[tuple[str, str]] = []
    for _ in range(10):
        decision = decide(req)
        call = decision.call
        if call.name == "click":
            break
        if call.name == "fill":
            filled.append((str(call.arguments["ref"]), str(call.arguments["value"])))
            labels = {
                "g1e12": "Full name",
                "g1e16": "Email",
                "g1e20": "Street address",
                "g1e24": "City",
                "g1e27": "postcode",
            }
            values[labels[str(call.arguments["ref"])]] = str(call.arguments["value"])
        req = after(req, decision, checkout(values))
    assert filled == [
        ("g1e12", "Sam Okafor"),
        ("g1e16", "sam-okafor@example.test"),
        ("g1e20", "12 Garden Street"),
        ("g1e24", "Springfield"),
        ("g1e27", "SW1A 1AA"),  # guessed from the text beside it, in the persona's locale
    ]
    assert call == ToolCall("click", {"ref": "g1e29", "ease": 6})


def test_a_low_literacy_persona_leaves_the_unlabeled_box_until_an_error_shows() -> None:
    low = replace(PERSONA, digital_literacy="low")
    already = (PriorReaction(1, "confused", "Unlabeled field (Postcode): ?", f"{ORIGIN}/checkout"),)
    submit = decide(request(checkout(FILLED), persona=low, prior=already))
    assert submit.call.name == "click" and submit.call.arguments["ref"] == "g1e29"
    error = checkout(FILLED, alert="Error E-4012: request could not be processed.")
    noted = (*already, PriorReaction(2, "confused", "Confusing error (/checkout): ?", error.url))
    retry = decide(request(error, persona=low, prior=noted))
    assert retry.call.name == "fill"
    assert retry.call.arguments == {"ref": "g1e27", "value": "94107", "ease": 2}


def test_fills_payment_fields_with_a_test_card() -> None:
    page = snapshot(
        "/checkout/payment",
        "Checkout: payment",
        [
            heading("Checkout: payment"),
            *field("g1e12", "Name on card", "Sam Okafor"),
            *field("g1e16", "Card number"),
            *field("g1e20", "Expiry date (MM/YY)"),
            *field("g1e24", "Security code (CVC)"),
            {"ref": "g1e26", "role": "button", "name": "Place order", "depth": 2},
        ],
    )
    call = decide(request(page)).call
    assert call.arguments == {"ref": "g1e16", "value": "4242 4242 4242 4242", "ease": 7}


def test_finishes_successfully_on_a_confirmation() -> None:
    page = snapshot("/order/FG-1000", "Order confirmed", [*NAV, heading("Order confirmed")])
    call = decide(request(page)).call
    assert call.name == "finish" and call.arguments["success"] is True
    assert "Order confirmed" in str(call.arguments["summary"])


def test_must_finish_finishes_and_says_whether_the_task_was_done() -> None:
    unfinished = decide(request(checkout(), must_finish=True)).call
    assert unfinished.name == "finish" and unfinished.arguments["success"] is False
    assert "Checkout: shipping" in str(unfinished.arguments["summary"])
    done = snapshot("/order/FG-1", "Order confirmed", [heading("Order confirmed")])
    assert decide(request(done, must_finish=True)).call.arguments["success"] is True


def test_after_an_error_page_it_goes_back_to_where_it_came_from() -> None:
    start = request(home(), prior=reacted_to_banner())
    to_dead_link = Decision(ToolCall("click", {"ref": "g1e4", "ease": 7}), "help")
    req = after(start, to_dead_link, not_found())
    react = decide(req)
    assert reacts(react, "error-page") and react.call.arguments["sentiment"] == "angry"
    assert int(react.call.arguments["ease"]) <= 4
    back = decide(after(req, react, not_found())).call
    assert back == ToolCall("navigate", {"url": f"{ORIGIN}/", "ease": 4})


def test_a_page_that_goes_nowhere_is_a_dead_end_then_it_goes_back() -> None:
    start = request(product())
    empty = snapshot("/cart", "Your cart", [heading("Your cart"), text("Your cart is empty.")])
    req = after(start, decide(start), empty)
    react = decide(req)
    assert reacts(react, "dead-end") and react.call.arguments["sentiment"] == "frustrated"
    back = decide(after(req, react, empty)).call
    assert back.name == "navigate" and back.arguments["url"] == f"{ORIGIN}/product/rain-jacket"


def moves_until_dead_end(persona: PersonaProfile) -> int:
    """How many clicks that change nothing the persona makes before it calls it a dead end."""
    colours = ("red", "blue", "green", "black", "grey", "navy", "olive", "sand", "plum", "teal")
    links = [
        {"ref": f"g1e{20 + n}", "role": "link", "name": f"Rain jacket, {c}", "depth": 2}
        for n, c in enumerate(colours)
    ]
    page = snapshot("/jackets", "Jackets", [heading("Jackets"), *links])
    req = request(page, persona=persona)
    for clicks in range(10):
        decision = decide(req)
        if reacts(decision, "dead-end"):
            return clicks
        assert decision.call.name == "click"
        req = after(req, decision, page)  # the link goes nowhere: the same page again
    raise AssertionError("never felt stuck")


@pytest.mark.parametrize(
    ("patience", "literacy", "clicks"),
    [("low", "medium", 3), ("medium", "medium", 4), ("high", "high", 6), ("low", "low", 2)],
)
def test_clicking_without_getting_anywhere_is_a_dead_end_sooner_with_less_patience(
    patience: str, literacy: str, clicks: int
) -> None:
    persona = replace(PERSONA, patience=patience, digital_literacy=literacy)
    assert moves_until_dead_end(persona) == clicks


def test_gives_up_after_enough_bad_experiences() -> None:
    persona = replace(PERSONA, patience="low")
    prior = tuple(PriorReaction(n, "frustrated", f"Problem {n}", ORIGIN) for n in range(5))
    call = decide(request(product(), persona=persona, prior=prior)).call
    assert call.name == "finish" and call.arguments["success"] is False


def test_uses_only_the_tools_offered() -> None:
    only_finish = replace(request(home()), tools=(ToolSpec("finish", "end", {}),))
    call = decide(only_finish).call
    assert call.name == "finish" and call.arguments["success"] is False


def test_every_decision_has_an_ease_from_1_to_7_a_reason_and_a_catalogue_action() -> None:
    pages = [home(), product(), checkout(), checkout(FILLED), not_found(), ERROR_500]
    pages += [page for page, _ in PROBLEM_PAGES.values()]
    outcomes = [
        None,
        Outcome(False, "failed", "element_not_found", 50),
        Outcome(True, "ok", None, 20_000),
    ]
    levels = ("low", "medium", "high")
    for page, outcome, literacy, patience, seed in itertools.product(
        pages, outcomes, levels, levels, range(3)
    ):
        persona = replace(PERSONA, digital_literacy=literacy, patience=patience)
        decision = decide(request(page, persona=persona, outcome=outcome), seed)
        ease = decision.call.arguments["ease"]
        assert isinstance(ease, int) and 1 <= ease <= 7
        assert decision.reason
        assert decision.call.name in CATALOGUE
        # What the loop runs: valid against the spec's action schema, a reaction's kind included.
        action = parse_action({"name": decision.call.name, "arguments": decision.call.arguments})
        if action.name == "react":
            assert action.arguments["kind"] in REACTION_KINDS.values()


def test_friction_lowers_the_ease() -> None:
    calm = decide(request(product())).call.arguments["ease"]
    broken = decide(request(not_found())).call.arguments["ease"]
    failed = decide(request(product(), outcome=Outcome(False, "x", "element_not_found"))).call
    assert broken < calm and failed.arguments["ease"] < calm


COMPACT_CHECKOUT = """# Checkout: shipping — http://127.0.0.1:8123/checkout/shipping (g7s7)
banner
 Fernhill Goods
 navigation "Main"
  [Home](g7e4) · [Cart (1)](g7e5) · [Shipping & returns](g7e6)
main
 h1 Checkout: shipping
 alert
  Error E-4012: request could not be processed.
 textbox "Full name" ="Sam Okafor" [g7e13]
 textbox "Email" [g7e17]
 Postcode
 textbox [g7e28]
 img src=banner.svg [g7e8]
 button "Continue to payment" [g7e30]"""


@pytest.mark.parametrize(
    ("header", "url", "title"),
    [
        ("# Sign in — http://127.0.0.1:81/login (g2s1)", "http://127.0.0.1:81/login", "Sign in"),
        ("# A — B — https://shop.test/x (g1s3)", "https://shop.test/x", "A — B"),
        ("# http://127.0.0.1:8123/plain (g2s1)", "http://127.0.0.1:8123/plain", ""),
    ],
)
def test_a_compact_header_gives_the_url_and_only_a_real_title(
    header: str, url: str, title: str
) -> None:
    page = read_text(f'{header}\nbutton "Go" [g2e1]')
    assert (page.url, page.title) == (url, title)


def test_a_compact_snapshot_reads_like_the_structured_one() -> None:
    page = read_text(COMPACT_CHECKOUT)
    assert page.url == "http://127.0.0.1:8123/checkout/shipping"
    assert page.title == "Checkout: shipping"
    assert page.alerts == ("Error E-4012: request could not be processed.",)
    assert page.headings == ("Checkout: shipping",)
    names = [(e.role, e.name, e.ref) for e in page.elements]
    assert names[:3] == [
        ("link", "Home", "g7e4"),
        ("link", "Cart (1)", "g7e5"),
        ("link", "Shipping & returns", "g7e6"),
    ]
    full_name, postcode, image = page.elements[3], page.elements[5], page.elements[6]
    assert (full_name.value, postcode.name, postcode.context) == ("Sam Okafor", "", "Postcode")
    assert (image.role, image.name, image.detail) == ("img", "", "banner.svg")


def test_a_compact_only_snapshot_gets_the_same_reactions() -> None:
    compact = SnapshotResult.model_validate(
        {
            "name": "snapshot",
            "url": f"{ORIGIN}/checkout/shipping",
            "title": "Checkout: shipping",
            "generation": 7,
            "nodes": [],
            "truncated": False,
            "text": COMPACT_CHECKOUT,
        }
    )
    req = request(compact)
    kinds = []
    for _ in range(4):
        decision = decide(req)
        kinds += [k for k in ISSUE_LABELS if reacts(decision, k)]
        req = after(req, decision, compact)
    assert kinds == ["confusing-error", "unlabeled", "missing-alt"]
    assert decision.call == ToolCall(
        "fill", {"ref": "g7e17", "value": "sam-okafor@example.test", "ease": 3}
    )


def test_the_rendered_fallback_text_reads_like_the_nodes() -> None:
    page = checkout(FILLED)
    from_nodes = read_snapshot(page.url, page.title, page, "")
    from_text = read_text(render_snapshot(page))
    assert from_text.elements == from_nodes.elements
    assert from_text.url == page.url and from_text.title == page.title


def test_searches_for_the_thing_the_task_names_when_no_link_matches() -> None:
    page = snapshot(
        "/",
        "Shop",
        [
            heading("Shop"),
            {"ref": "g1e12", "role": "searchbox", "name": "Search products", "depth": 2},
            {"ref": "g1e14", "role": "button", "name": "Search", "depth": 2},
            {"ref": "g1e15", "role": "link", "name": "About us", "depth": 2},
        ],
    )
    req = request(page)
    typed = decide(req)
    assert typed.call == ToolCall(
        "type", {"ref": "g1e12", "text": "rain jacket", "submit": True, "ease": 7}
    )
    assert decide(after(req, typed, page)).call.name != "type", "one search per page"


def test_adds_to_cart_only_on_the_page_of_the_thing_wanted() -> None:
    socks = snapshot(
        "/product/wool-socks",
        "Wool socks",
        [
            *NAV,
            heading("Wool socks"),
            {"ref": "g1e12", "role": "button", "name": "Add to cart", "depth": 2},
        ],
    )
    call = decide(request(socks)).call
    assert call.arguments.get("ref") != "g1e12"


def test_random_choices_do_not_depend_on_the_site_s_port() -> None:
    low = replace(PERSONA, digital_literacy="low")
    here = home()
    moved = here.model_copy(update={"url": "http://127.0.0.1:9999/"})
    for turn in range(1, 30):
        a = decide(request(here, persona=low, turn=turn, prior=reacted_to_banner()), 4)
        b = decide(request(moved, persona=low, turn=turn, prior=reacted_to_banner()), 4)
        assert a == b


def test_names_with_quotes_and_brackets_survive_both_text_forms() -> None:
    odd = 'It\'s "odd" [g9e9] (x)'
    page = snapshot("/odd", "Odd", [{"ref": "g1e5", "role": "button", "name": odd, "depth": 1}])
    assert read_text(render_snapshot(page)).elements[0].name == odd
    compact = f"# Odd — {ORIGIN}/odd (g1s1)\nbutton {json.dumps(odd)} [g1e5]"
    assert read_text(compact).elements[0].name == odd
    assert read_text('button "broken \\u12" [g1e5]').elements[0].ref == "g1e5"
