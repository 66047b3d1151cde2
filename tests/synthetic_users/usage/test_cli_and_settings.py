"""`billing set-customer`, and the webhook and Stripe settings as an operator writes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from synthetic_users import cli
from synthetic_users._config import ConfigError, load_settings
from synthetic_users._store import Store
from synthetic_users._usage import UsageStore

if TYPE_CHECKING:
    from pathlib import Path


def test_set_customer_stores_the_stripe_customer_and_a_second_call_replaces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--data-dir", str(tmp_path), "billing", "set-customer", "--customer", "acme"]
    assert cli.main([*base, "--stripe-customer", "cus_First1"]) == 0
    assert cli.main([*base, "--stripe-customer", "cus_Second2"]) == 0
    assert "billed to cus_Second2" in capsys.readouterr().err
    store = Store.open(tmp_path / "synthetic-users.db")
    assert UsageStore(store).stripe_customer("acme") == "cus_Second2"
    store.close()


@pytest.mark.parametrize(
    ("customer", "stripe_customer", "named"),
    [("Acme", "cus_A1", "--customer"), ("acme", "acct_123", "--stripe-customer")],
)
def test_set_customer_refuses_bad_ids(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    customer: str,
    stripe_customer: str,
    named: str,
) -> None:
    argv = ["--data-dir", str(tmp_path), "billing", "set-customer"]
    argv += ["--customer", customer, "--stripe-customer", stripe_customer]
    assert cli.main(argv) == 2
    assert named in capsys.readouterr().err


def test_the_defaults_post_nothing_to_stripe_and_refuse_loopback_webhooks() -> None:
    settings = load_settings({})
    assert settings.stripe_api_key is None and settings.allow_loopback is False
    assert settings.webhook_retry_schedule[0] == 5 and sum(settings.webhook_retry_schedule) < 86400
    assert sum(settings.webhook_retry_schedule) > 20 * 3600  # about a day of retries
    assert set(settings.stripe_meters) == {"browser_minutes", "model_tokens"}


def test_the_environment_sets_webhooks_and_stripe() -> None:
    settings = load_settings(
        {
            "SYNTHETIC_USERS_ALLOW_LOOPBACK": "1",
            "SYNTHETIC_USERS_WEBHOOK_TIMEOUT_S": "2.5",
            "SYNTHETIC_USERS_WEBHOOK_RETRY_SCHEDULE": "1, 2,4",
            "STRIPE_API_KEY": "sk_test_x",
            "STRIPE_API_BASE": "http://127.0.0.1:12111/",
            "STRIPE_METERS": "turns=su_turns,input_tokens=su_in",
        }
    )
    assert settings.allow_loopback and settings.webhook_timeout_s == 2.5
    assert settings.webhook_retry_schedule == (1.0, 2.0, 4.0)
    assert settings.stripe_api_base == "http://127.0.0.1:12111"
    assert settings.stripe_meters == {"turns": "su_turns", "input_tokens": "su_in"}
    assert "sk_test_x" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SYNTHETIC_USERS_WEBHOOK_RETRY_SCHEDULE", "soon"),
        ("SYNTHETIC_USERS_WEBHOOK_RETRY_SCHEDULE", "0,5"),
        ("STRIPE_METERS", "minutes=x"),
        ("STRIPE_METERS", "turns="),
        ("STRIPE_API_BASE", "api.stripe.com"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings({variable: value})
