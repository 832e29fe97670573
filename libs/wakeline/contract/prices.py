"""What a model's tokens cost: `ModelPrice`, and `PriceTable`, the prices by model id.

Read by the brain, which binds a session's price into its log when the session gets a budget
(so the same log gives the same decision whatever the settings say later), and by the gateway,
which shows what a session cost. Prices are US dollars per million tokens, as the Anthropic
price list has them; cache writes cost 1.25x the input price and cache reads 0.1x unless a
model's entry says otherwise. The scripted models cost nothing. `DEFAULT_PRICES` holds the
models the project knows; `WAKELINE_MODEL_PRICES` (`CommonSettings.model_prices`) adds or
replaces entries. What a session spent is `wakeline.log.spending`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The API bills cache writes (5-minute) at 1.25x the input price, cache reads at 0.1x.
CACHE_WRITE_SHARE = 1.25
CACHE_READ_SHARE = 0.1
# One US dollar in the unit spend is counted in: a price per million tokens in dollars is
# then a whole number per token (to a millionth of a cent), so sums never drift.
PICODOLLARS = 10**12
_PER_MTOK = PICODOLLARS // 10**6
_DATED = re.compile(r"^(?P<model>.+)-\d{8}$")  # claude-sonnet-4-5-20250929: a dated snapshot of claude-sonnet-4-5
SCRIPTED_PREFIX = "scripted:"
Usd = Field(ge=0, le=100_000)


class ModelPrice(BaseModel):
    """One model's price in US dollars per million tokens. The cache prices default to the
    API's shares of the input price: 1.25x for a cache write, 0.1x for a cache read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_usd_per_mtok: float = Usd
    output_usd_per_mtok: float = Usd
    cache_write_usd_per_mtok: float = Usd
    cache_read_usd_per_mtok: float = Usd

    @model_validator(mode="before")
    @classmethod
    def _cache_shares(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "input_usd_per_mtok" in data:
            data = dict(data)
            base = data["input_usd_per_mtok"]
            if isinstance(base, (int, float)):
                data.setdefault("cache_write_usd_per_mtok", round(base * CACHE_WRITE_SHARE, 6))
                data.setdefault("cache_read_usd_per_mtok", round(base * CACHE_READ_SHARE, 6))
        return data

    def per_token(self) -> tuple[int, int, int, int]:
        """Picodollars a token: (input, output, cache write, cache read)."""
        return tuple(round(usd * _PER_MTOK) for usd in (  # type: ignore[return-value]
            self.input_usd_per_mtok, self.output_usd_per_mtok, self.cache_write_usd_per_mtok,
            self.cache_read_usd_per_mtok))


def _price(input_usd: float, output_usd: float, **cache: float) -> ModelPrice:
    return ModelPrice.model_validate({"input_usd_per_mtok": input_usd, "output_usd_per_mtok": output_usd, **cache})


FREE = _price(0, 0)
# From the Anthropic price list (platform.claude.com/docs/en/about-claude/pricing). A model
# missing here has no price until the settings give it one: a dollar cap on it is refused.
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "claude-fable-5-1": _price(10, 50, cache_read_usd_per_mtok=0.25),
    "claude-mythos-5-1": _price(10, 50, cache_read_usd_per_mtok=0.25),
    "claude-fable-5": _price(10, 50),
    "claude-mythos-5": _price(10, 50),
    "claude-opus-5": _price(5, 25),
    "claude-opus-4-8": _price(5, 25),
    "claude-opus-4-7": _price(5, 25),
    "claude-opus-4-6": _price(5, 25),
    "claude-opus-4-5": _price(5, 25),
    "claude-opus-4-1": _price(15, 75),
    "claude-opus-4-0": _price(15, 75),
    "claude-opus-4": _price(15, 75),
    "claude-sonnet-4-6": _price(3, 15),
    "claude-sonnet-4-5": _price(3, 15),
    "claude-sonnet-4-0": _price(3, 15),
    "claude-sonnet-4": _price(3, 15),
    "claude-3-7-sonnet": _price(3, 15),
    "claude-haiku-4-5": _price(1, 5),
    "claude-3-5-haiku": _price(0.8, 4),
    "claude-3-haiku": _price(0.25, 1.25, cache_write_usd_per_mtok=0.3, cache_read_usd_per_mtok=0.03),
}


class PriceTable:
    """Prices by model id: an exact entry, else the entry of the model a dated id snapshots
    (`<model>-YYYYMMDD`), else free for `scripted:<policy>`, else none."""

    def __init__(self, prices: Mapping[str, ModelPrice] = DEFAULT_PRICES):
        self._prices = dict(prices)

    @classmethod
    def with_overrides(cls, overrides: Mapping[str, Mapping[str, float]]) -> PriceTable:
        """The defaults with the settings' entries added or replacing theirs; raises
        `pydantic.ValidationError` naming a malformed entry."""
        given = {model: ModelPrice.model_validate(price) for model, price in overrides.items()}
        return cls({**DEFAULT_PRICES, **given})

    def price_for(self, model: str) -> ModelPrice | None:
        if model in self._prices:
            return self._prices[model]
        dated = _DATED.match(model)
        if dated and dated["model"] in self._prices:
            return self._prices[dated["model"]]
        return FREE if model.startswith(SCRIPTED_PREFIX) else None


DEFAULT_TABLE = PriceTable()  # the defaults alone: tests, and readers given no settings
