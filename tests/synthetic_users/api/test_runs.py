"""Runs: create (fast, validated, idempotent), read, list, cancel, and a session's detail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.synthetic_users.api.conftest import PERSONA, RUN, Api, conforms, paths, problem

TURN: dict[str, Any] = {
    "turn": 1,
    "generation": 1,
    "started_at": "2026-12-01T09:00:00Z",
    "ended_at": "2026-12-01T09:00:01Z",
    "observation": {"url": "https://shop.example/", "title": "Shop"},
    "action": {"name": "click", "arguments": {"ref": "g1e3", "ease": 6}},
    "reason": "The kettles link is what I want.",
    "outcome": {"ok": True, "summary": "clicked 'Kettles'", "elapsed_ms": 120.0},
    "reactions": [],
}


async def test_a_run_is_written_queued_and_answered_202_with_its_location(api: Api) -> None:
    response = await api.create_run()
    assert response.status_code == 202
    body = response.json()
    conforms(body, "RunCreated")
    assert body["status"] == "queued"
    assert response.headers["location"] == f"/runs/{body['run_id']}"
    # The orchestrator heard of it, after it was written.
    assert [r.run_id for r in api.services.created] == [body["run_id"]]
    assert api.store.get_run(body["run_id"]).turn_budget == 30


async def test_a_new_run_shows_one_queued_session_per_persona(api: Api) -> None:
    two = {**RUN, "personas": [PERSONA, {"name": "Dev", "digital_literacy": "high"}]}
    run_id = (await api.create_run(two)).json()["run_id"]
    response = await api.client.get(f"/runs/{run_id}", headers=api.auth())
    assert response.status_code == 200
    run = response.json()
    conforms(run, "Run")
    assert (run["status"], run["model"], run["turn_budget"]) == ("queued", "heuristic", 30)
    assert [s["persona_name"] for s in run["sessions"]] == ["Margaret", "Dev"]
    for session in run["sessions"]:
        assert (session["status"], session["turn"], session["generation"]) == ("queued", 0, 1)
        assert session["reactions"] == []
        assert session["links"]["report_html"].endswith("/report.html")
    assert run["links"]["report_json"] == f"/runs/{run_id}/report.json"


async def test_progress_shows_turn_generation_and_reactions_so_far(api: Api) -> None:
    run_id = (await api.create_run()).json()["run_id"]
    sid = api.store.sessions(run_id)[0].session_id
    api.store.start_session(sid, understudy_session_id="u1", device_id="d1")
    api.store.record_turn(sid, TURN)
    api.store.record_reaction(
        sid,
        generation=1,
        step=1,
        sentiment="confused",
        note="No label",
        url="https://shop.example/",
        kind="unlabeled_control",
    )
    api.store.bump_generation(sid)
    run = (await api.client.get(f"/runs/{run_id}", headers=api.auth())).json()
    conforms(run, "Run")
    session = run["sessions"][0]
    assert (run["status"], session["status"], session["turn"], session["generation"]) == (
        "running",
        "running",
        1,
        2,
    )
    assert [(r["sentiment"], r["note"], r["kind"]) for r in session["reactions"]] == [
        ("confused", "No label", "unlabeled_control")
    ]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"personas": []}, "/personas"),
        ({"personas": [{"name": f"P{i}"} for i in range(11)]}, "/personas"),
        ({"surprise": True}, "/surprise"),
        ({"personas": [{**PERSONA, "age": 70}]}, "/personas/0/age"),
        ({"personas": [PERSONA, {"name": ""}]}, "/personas/1/name"),
        ({"personas": [{"name": "X", "patience": "endless"}]}, "/personas/0/patience"),
        ({"target_url": "/checkout"}, "/target_url"),
        ({"target_url": "shop.example"}, "/target_url"),
        ({"target_url": "ftp://shop.example/"}, "/target_url"),
        ({"target_url": "https://user:pw@shop.example/"}, "/target_url"),
        ({"target_url": "https://shop.example:99999/"}, "/target_url"),
        ({"turn_budget": 0}, "/turn_budget"),
        ({"turn_budget": "30"}, "/turn_budget"),
        ({"task": ""}, "/task"),
        ({"model": "gpt"}, "/model"),
        ({"personas": [{"persona_id": "per_nope"}]}, "/personas/0/persona_id"),
        ({"personas": [{"persona_id": "per_" + "0" * 32}]}, "/personas/0/persona_id"),
        ({"personas": ["Margaret"]}, "/personas/0"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    api: Api, change: dict[str, Any], path: str
) -> None:
    response = await api.create_run({**RUN, **change})
    body = problem(response, 400, "validation_failed")
    assert paths(body) == [path]
    assert body["detail"].startswith(f"{path}: ")
    assert api.services.created == []


@pytest.mark.parametrize(
    "target",
    ["https://shop.example:8443/", "https://[2606:4700::1111]/", "HTTPS://Shop.Example/a?b=c#d"],
)
async def test_absolute_https_targets_are_accepted(api: Api, target: str) -> None:
    response = await api.create_run({**RUN, "target_url": target})
    assert response.status_code == 202, response.text
    assert api.store.get_run(response.json()["run_id"]).target_url == target


async def test_a_whole_number_written_as_a_float_is_an_integer(api: Api) -> None:
    # JSON Schema's integer includes 3.0; a string "3" stays refused (no coercion).
    response = await api.create_run({**RUN, "turn_budget": 3.0})
    assert response.status_code == 202
    assert api.store.get_run(response.json()["run_id"]).turn_budget == 3


async def test_a_body_over_256_kib_is_a_413(api: Api) -> None:
    response = await api.create_run({**RUN, "task": "x" * (256 * 1024)})
    problem(response, 413, "payload_too_large")


async def test_a_missing_field_is_named(api: Api) -> None:
    body = problem(await api.create_run({"task": "Buy"}), 400, "validation_failed")
    assert sorted(paths(body)) == ["/personas", "/target_url"]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b'{"task": "a", "task": "b"}', "application/json"),
        (b'{"task": "a"}', "text/plain"),
        (b'{"turn_budget": NaN}', "application/json"),
        (b"[" * 100_000, "application/json"),
    ],
)
async def test_a_body_that_is_not_json_is_a_400_invalid_json(
    api: Api, content: bytes, content_type: str
) -> None:
    response = await api.client.post(
        "/runs", content=content, headers={**api.auth(), "Content-Type": content_type}
    )
    problem(response, 400, "invalid_json")


async def test_the_same_idempotency_key_and_body_give_the_same_run(api: Api) -> None:
    first = await api.create_run(key="order-42")
    again = await api.create_run(key="order-42")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.headers["location"] == first.headers["location"]
    conforms(again.json(), "RunCreated")
    assert len(api.services.created) == 1  # the orchestrator starts it once


async def test_a_body_meaning_the_same_with_defaults_spelled_out_is_a_replay(api: Api) -> None:
    first = await api.create_run(key="k")
    spelled = {**RUN, "personas": [{**PERSONA, "device": "desktop", "locale": "en-US"}]}
    again = await api.create_run(spelled, key="k")
    assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]


async def test_the_same_idempotency_key_with_another_body_conflicts(api: Api) -> None:
    await api.create_run(key="order-42")
    other = await api.create_run({**RUN, "task": "Return a kettle"}, key="order-42")
    problem(other, 409, "idempotency_conflict")
    assert len(api.services.created) == 1


async def test_idempotency_keys_belong_to_one_customer(api: Api) -> None:
    mine = await api.create_run(key="k")
    theirs = await api.client.post(
        "/runs", json=RUN, headers={**api.auth(api.other_key), "Idempotency-Key": "k"}
    )
    assert theirs.status_code == 202
    assert theirs.json()["run_id"] != mine.json()["run_id"]


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "naïve"])
async def test_a_malformed_idempotency_key_is_a_400_naming_the_header(api: Api, key: str) -> None:
    response = await api.client.post(
        "/runs",
        json=RUN,
        # Latin-1 on the wire, as HTTP/1.1 header bytes outside ASCII arrive.
        headers=[
            (b"Authorization", f"Bearer {api.key}".encode()),
            (b"Idempotency-Key", key.encode("latin-1")),
        ],
    )
    assert paths(problem(response, 400, "validation_failed")) == ["Idempotency-Key"]


async def test_two_idempotency_keys_are_refused(api: Api) -> None:
    response = await api.client.post(
        "/runs",
        json=RUN,
        headers=[*api.auth().items(), ("Idempotency-Key", "a"), ("Idempotency-Key", "b")],
    )
    assert paths(problem(response, 400, "validation_failed")) == ["Idempotency-Key"]


async def test_runs_are_listed_newest_first_a_page_at_a_time(api: Api) -> None:
    ids = [(await api.create_run({**RUN, "task": f"t{i}"})).json()["run_id"] for i in range(5)]
    await api.client.post("/runs", json=RUN, headers=api.auth(api.other_key))
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        response = await api.client.get("/runs", params=params, headers=api.auth())
        assert response.status_code == 200
        body = response.json()
        conforms(body, "RunList")
        seen += [r["run_id"] for r in body["runs"]]
        pages += 1
        cursor = body.get("next_cursor")
        if cursor is None:
            break
    assert seen == ids[::-1]
    assert pages == 3
    first = (await api.client.get("/runs", headers=api.auth())).json()["runs"][0]
    assert (first["task"], first["persona_count"], first["status"]) == ("t4", 1, "queued")


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
        ({"cursor": "has space"}, "cursor"),
        ({"page": "2"}, "page"),
    ],
)
async def test_a_bad_page_parameter_is_a_400_naming_it(
    api: Api, params: dict[str, str], path: str
) -> None:
    response = await api.client.get("/runs", params=params, headers=api.auth())
    assert paths(problem(response, 400, "validation_failed")) == [path]


@pytest.mark.parametrize("run_id", ["run_" + "0" * 32, "not-a-run-id"])
async def test_an_unknown_run_is_a_404(api: Api, run_id: str) -> None:
    for method in ("GET", "DELETE"):
        response = await api.client.request(method, f"/runs/{run_id}", headers=api.auth())
        problem(response, 404, "run_not_found")


async def test_another_customers_run_is_not_found(api: Api) -> None:
    run_id = (await api.create_run()).json()["run_id"]
    response = await api.client.get(f"/runs/{run_id}", headers=api.auth(api.other_key))
    problem(response, 404, "run_not_found")
    listed = (await api.client.get("/runs", headers=api.auth(api.other_key))).json()
    assert listed["runs"] == []


async def test_cancelling_a_run_is_202_then_200_and_tells_the_orchestrator(api: Api) -> None:
    run_id = (await api.create_run()).json()["run_id"]
    first = await api.client.delete(f"/runs/{run_id}", headers=api.auth())
    assert first.status_code == 202
    conforms(first.json(), "Run")
    assert first.json()["status"] == "cancelled"
    assert first.json()["sessions"][0]["status"] == "cancelled"
    again = await api.client.delete(f"/runs/{run_id}", headers=api.auth())
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert [r.run_id for r in api.services.cancelled] == [run_id]
    assert api.store.is_cancelled(run_id)


async def test_cancelling_keeps_what_a_running_session_recorded(api: Api) -> None:
    run_id = (await api.create_run()).json()["run_id"]
    sid = api.store.sessions(run_id)[0].session_id
    api.store.start_session(sid)
    api.store.record_turn(sid, TURN)
    await api.client.delete(f"/runs/{run_id}", headers=api.auth())
    detail = (await api.client.get(f"/runs/{run_id}/sessions/{sid}", headers=api.auth())).json()
    assert [t["turn"] for t in detail["turns"]] == [1]


async def test_a_session_detail_has_its_persona_turns_and_reactions(api: Api) -> None:
    run_id = (await api.create_run()).json()["run_id"]
    sid = api.store.sessions(run_id)[0].session_id
    reaction = {
        "step": 1,
        "generation": 1,
        "sentiment": "delighted",
        "note": "Found it at once",
        "url": "https://shop.example/",
        "screenshot": "step-0001.png",
        "created_at": "2026-12-01T09:00:01Z",
    }
    api.store.record_turn(sid, {**TURN, "reactions": [reaction]})
    response = await api.client.get(f"/runs/{run_id}/sessions/{sid}", headers=api.auth())
    assert response.status_code == 200
    detail = response.json()
    conforms(detail, "SessionDetail")
    assert detail["persona"]["name"] == "Margaret"
    assert detail["persona"]["device"] == "desktop"  # the default, in the snapshot
    assert detail["turns"][0]["reason"] == "The kettles link is what I want."
    assert detail["reactions"][0]["screenshot"] == "step-0001.png"


async def test_a_session_of_another_run_is_not_found(api: Api) -> None:
    first = (await api.create_run()).json()["run_id"]
    second = (await api.create_run()).json()["run_id"]
    sid = api.store.sessions(first)[0].session_id
    response = await api.client.get(f"/runs/{second}/sessions/{sid}", headers=api.auth())
    problem(response, 404, "session_not_found")
    response = await api.client.get(f"/runs/run_{'1' * 32}/sessions/{sid}", headers=api.auth())
    problem(response, 404, "run_not_found")
