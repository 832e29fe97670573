"""`Usage`: the tokens a model call used, and what its prompt cache saved."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from wakeline.contract.events.frozen import Frozen


def _zero(value: int) -> bool:
    return value == 0


class Usage(Frozen):
    input_tokens: int = 0
    output_tokens: int = 0
    # Prompt caching (Claude): tokens written to and read from the prefix cache, besides
    # `input_tokens` (which counts only what was neither). Left out of the dump when 0 so
    # usage sealed before they existed keeps its canonical JSON (and hash).
    cache_creation_input_tokens: int = Field(default=0, exclude_if=_zero)
    cache_read_input_tokens: int = Field(default=0, exclude_if=_zero)

    # What the API bills for cached input, as a share of the base input price: a cache
    # read costs a tenth, a cache write (5-minute) a quarter more.
    CACHE_READ_PRICE: ClassVar[float] = 0.1
    CACHE_WRITE_PRICE: ClassVar[float] = 1.25

    def cache_hit_rate(self) -> float:
        """The share of all input tokens that were read from the prefix cache (for /cost)."""
        total = self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
        return self.cache_read_input_tokens / total if total else 0.0

    def cache_saved_input_tokens(self) -> float:
        """What caching saved, in input tokens at the base price: reads at a tenth instead of
        full price, less the extra quarter paid on writes (negative when writes were not read)."""
        return (self.cache_read_input_tokens * (1 - self.CACHE_READ_PRICE)
                - self.cache_creation_input_tokens * (self.CACHE_WRITE_PRICE - 1))

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
                     cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens)
