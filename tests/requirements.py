"""What a test needs from its machine, decided one way: under CI a missing need fails the
test, anywhere else it skips it, saying what to start.

A skipped check is not a passed one, and CI is where everything must be present: there a
missing broker, database, browser or tool is a failure. `CI` is read as most runners set
it (`CI=true`; `1`, `yes` and `on` count too).
"""

from __future__ import annotations

from typing import NoReturn

import pytest
from pydantic_settings import BaseSettings


class _CiSettings(BaseSettings):
    ci: str = ""  # a string, so an unusual spelling reads as "not CI" rather than a validation error


def under_ci() -> bool:
    return _CiSettings().ci.strip().lower() in ("true", "1", "yes", "on")


def missing(what: str) -> NoReturn:
    """Ends the test over a need the machine does not meet: fails under CI, skips elsewhere."""
    if under_ci():
        pytest.fail(f"{what} (CI: a missing requirement fails the test, never skips it)", pytrace=False)
    pytest.skip(what)


def require(condition: object, what: str) -> None:
    """`missing(what)` unless `condition` holds."""
    if not condition:
        missing(what)
