"""Saved personas: create, read, list, delete, and use by id in a run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.synthetic_users.api.conftest import RUN, Api, conforms, paths, problem

DEV = {
    "name": "Dev",
    "background": "Developer who hates forms.",
    "goals": ["Finish in under a minute"],
    "digital_literacy": "high",
    "patience": "low",
    "device": "mobile",
    "locale": "en-US",
}


async def test_a_persona_is_saved_with_defaults_filled_in(api: Api) -> None:
    response = await api.client.post("/personas", json={"name": "Ana"}, headers=api.auth())
    assert response.status_code == 201
    body = response.json()
    conforms(body, "SavedPersona")
    assert response.headers["location"] == f"/personas/{body['persona_id']}"
    assert (body["digital_literacy"], body["patience"], body["device"], body["locale"]) == (
        "medium",
        "medium",
        "desktop",
        "en-US",
    )
    got = await api.client.get(f"/personas/{body['persona_id']}", headers=api.auth())
    assert got.status_code == 200 and got.json() == body


async def test_personas_are_listed_newest_first_and_per_customer(api: Api) -> None:
    ids = []
    for name in ("A", "B", "C"):
        created = await api.client.post("/personas", json={"name": name}, headers=api.auth())
        ids.append(created.json()["persona_id"])
    page = (await api.client.get("/personas?limit=2", headers=api.auth())).json()
    conforms(page, "PersonaList")
    assert [p["persona_id"] for p in page["personas"]] == ids[::-1][:2]
    rest = await api.client.get(
        "/personas", params={"cursor": page["next_cursor"]}, headers=api.auth()
    )
    assert [p["persona_id"] for p in rest.json()["personas"]] == ids[:1]
    assert "next_cursor" not in rest.json()
    theirs = await api.client.get("/personas", headers=api.auth(api.other_key))
    assert theirs.json() == {"personas": []}


async def test_a_deleted_persona_is_gone_but_runs_keep_their_copy(api: Api) -> None:
    saved = (await api.client.post("/personas", json=DEV, headers=api.auth())).json()
    run = await api.create_run({**RUN, "personas": [{"persona_id": saved["persona_id"]}]})
    assert run.status_code == 202
    deleted = await api.client.delete(f"/personas/{saved['persona_id']}", headers=api.auth())
    assert deleted.status_code == 204 and deleted.content == b""
    problem(
        await api.client.get(f"/personas/{saved['persona_id']}", headers=api.auth()),
        404,
        "persona_not_found",
    )
    problem(
        await api.client.delete(f"/personas/{saved['persona_id']}", headers=api.auth()),
        404,
        "persona_not_found",
    )
    sid = api.store.sessions(run.json()["run_id"])[0].session_id
    detail = await api.client.get(
        f"/runs/{run.json()['run_id']}/sessions/{sid}", headers=api.auth()
    )
    assert detail.json()["persona"] == {"persona_id": saved["persona_id"], **DEV}


async def test_another_customers_persona_cannot_be_read_or_used(api: Api) -> None:
    saved = (await api.client.post("/personas", json=DEV, headers=api.auth())).json()
    theirs = api.auth(api.other_key)
    problem(
        await api.client.get(f"/personas/{saved['persona_id']}", headers=theirs),
        404,
        "persona_not_found",
    )
    run = await api.client.post(
        "/runs", json={**RUN, "personas": [{"persona_id": saved["persona_id"]}]}, headers=theirs
    )
    assert paths(problem(run, 400, "validation_failed")) == ["/personas/0/persona_id"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"name": "X", "digital_literacy": "expert"}, "/digital_literacy"),
        ({"name": "X", "device": "tablet"}, "/device"),
        ({"name": "X", "locale": "english please"}, "/locale"),
        ({"name": "X", "goals": ["ok"] * 11}, "/goals"),
        ({"name": "X", "shoe_size": 9}, "/shoe_size"),
        ({"background": "no name"}, "/name"),
    ],
)
async def test_a_bad_persona_is_a_400_naming_the_field(
    api: Api, body: dict[str, Any], path: str
) -> None:
    response = await api.client.post("/personas", json=body, headers=api.auth())
    assert paths(problem(response, 400, "validation_failed")) == [path]


@pytest.mark.parametrize("persona_id", ["per_" + "0" * 32, "nope"])
async def test_an_unknown_persona_is_a_404(api: Api, persona_id: str) -> None:
    problem(
        await api.client.get(f"/personas/{persona_id}", headers=api.auth()),
        404,
        "persona_not_found",
    )
