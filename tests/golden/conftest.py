"""`--update-golden` rewrites tests/golden/expected/ from the current output instead of comparing.

The option is registered here, so it is known when pytest is started on this folder:
`python -m pytest tests/golden --update-golden`.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/expected/*.txt from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden", default=False))
