"""What tokens cost (`wakeline.contract.prices`) and what a session spent (`wakeline.log.spending`): pure."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wakeline.contract.budget import Budget, Spent
from wakeline.contract.events import Usage
from wakeline.contract.prices import DEFAULT_TABLE, PICODOLLARS, FREE, ModelPrice, PriceTable
from wakeline.log.spending import Spend, cost_of

SONNET = DEFAULT_TABLE.price_for("claude-sonnet-4-5")
MILLION = 1_000_000


def test_cache_writes_cost_a_quarter_more_than_input_and_cache_reads_a_tenth() -> None:
    assert SONNET is not None
    assert (SONNET.cache_write_usd_per_mtok, SONNET.cache_read_usd_per_mtok) == (3.75, 0.3)
    usage = Usage(input_tokens=MILLION, output_tokens=MILLION, cache_creation_input_tokens=MILLION,
                  cache_read_input_tokens=MILLION)
    assert cost_of(usage, SONNET) == 22_050_000_000_000  # 3 + 15 + 3.75 + 0.30 dollars, in picodollars
    assert cost_of(Usage(cache_read_input_tokens=1), SONNET) == 300_000  # 0.3 $/Mtok: 3e-7 $ a token


def test_a_model_may_price_its_cache_otherwise_than_by_the_shares() -> None:
    haiku3 = DEFAULT_TABLE.price_for("claude-3-haiku")
    assert haiku3 is not None and (haiku3.cache_write_usd_per_mtok, haiku3.cache_read_usd_per_mtok) == (0.3, 0.03)
    assert cost_of(Usage(cache_read_input_tokens=MILLION), haiku3) == 3 * PICODOLLARS // 100


def test_a_dated_snapshot_is_priced_as_its_model_but_a_neighbouring_model_is_not() -> None:
    assert DEFAULT_TABLE.price_for("claude-sonnet-4-5-20250929") == SONNET
    assert DEFAULT_TABLE.price_for("claude-opus-4-20250514") == DEFAULT_TABLE.price_for("claude-opus-4")
    # claude-opus-4-9 starts like claude-opus-4, but is not a snapshot of it: no price, not Opus 4's
    assert DEFAULT_TABLE.price_for("claude-opus-4-9") is None
    assert DEFAULT_TABLE.price_for("claude-unknown") is None


def test_the_scripted_models_cost_nothing() -> None:
    assert DEFAULT_TABLE.price_for("scripted:demo") == FREE
    assert cost_of(Usage(input_tokens=10**9, output_tokens=10**9), FREE) == 0


def test_the_settings_add_and_replace_prices_with_the_cache_shares_filled_in() -> None:
    table = PriceTable.with_overrides({"my-model": {"input_usd_per_mtok": 2, "output_usd_per_mtok": 8},
                                       "claude-sonnet-4-5": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}})
    assert table.price_for("my-model") == ModelPrice(input_usd_per_mtok=2, output_usd_per_mtok=8,
                                                     cache_write_usd_per_mtok=2.5, cache_read_usd_per_mtok=0.2)
    assert table.price_for("claude-sonnet-4-5").input_usd_per_mtok == 1  # type: ignore[union-attr]
    assert table.price_for("claude-haiku-4-5") == DEFAULT_TABLE.price_for("claude-haiku-4-5")  # the rest stay


@pytest.mark.parametrize("entry", [{"input_usd_per_mtok": 1}, {"input_usd_per_mtok": -1, "output_usd_per_mtok": 1},
                                   {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1, "per_request": 1}])
def test_a_malformed_price_in_the_settings_is_refused(entry) -> None:
    with pytest.raises(ValidationError):
        PriceTable.with_overrides({"m": entry})


def test_calls_made_before_a_price_was_bound_are_priced_when_one_is_and_later_ones_at_theirs() -> None:
    spend = Spend().charged(Usage(input_tokens=MILLION))
    assert spend.spent().usd is None  # no price yet: the dollars are unknown
    assert spend.spent(fallback=SONNET).usd == 3.0  # a reader may price them at its table
    assert SONNET is not None
    spend = spend.priced_at(SONNET).charged(Usage(output_tokens=MILLION))
    cheaper = ModelPrice(input_usd_per_mtok=1, output_usd_per_mtok=1, cache_write_usd_per_mtok=1,
                         cache_read_usd_per_mtok=1)
    spend = spend.priced_at(cheaper).charged(Usage(output_tokens=MILLION))  # a new price: from here on
    assert spend.spent() == Spent(input_tokens=MILLION, output_tokens=2 * MILLION, usd=3.0 + 15.0 + 1.0)


def test_input_tokens_against_a_budget_are_every_token_the_model_read() -> None:
    spent = Spend().charged(Usage(input_tokens=5, cache_creation_input_tokens=7, cache_read_input_tokens=11,
                                  output_tokens=3)).spent(FREE)
    assert (spent.input_tokens, spent.output_tokens) == (23, 3)


def test_a_cap_is_reached_at_its_figure_exactly() -> None:
    budget = Budget(input_tokens=100, output_tokens=10, usd=0.5)
    assert budget.reached(Spent(input_tokens=99, output_tokens=9, usd=0.499999)) == ()
    assert budget.reached(Spent(input_tokens=100, output_tokens=10, usd=0.5)) == ("input_tokens", "output_tokens",
                                                                                   "usd")
    assert budget.reached(Spent(usd=None)) == ("usd",)  # dollars that cannot be counted: closed
    assert Budget(output_tokens=10).reached(Spent(usd=None)) == ()  # no dollar cap: no matter


def test_a_budget_names_at_least_one_cap_and_a_change_replaces_only_the_caps_it_names() -> None:
    with pytest.raises(ValidationError):
        Budget()
    with pytest.raises(ValidationError):
        Budget(usd=0)
    assert Budget(usd=1, output_tokens=10).merged(Budget(usd=5)) == Budget(usd=5, output_tokens=10)
    assert Budget(usd=1).model_dump(mode="json") == {"usd": 1.0}  # caps not set are left out


def test_spends_add_up_for_a_check_over_many_sessions() -> None:
    total = Spent(input_tokens=1, output_tokens=2, usd=0.25) + Spent(input_tokens=3, output_tokens=4, usd=0.5)
    assert total == Spent(input_tokens=4, output_tokens=6, usd=0.75)
    assert (total + Spent(usd=None)).usd is None
    assert Budget(usd=0.75).reached(total) == ("usd",)
