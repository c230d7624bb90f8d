"""Fixtures every test folder can use."""

import pytest


@pytest.fixture(scope="session")
def moe_checkpoint(tmp_path_factory):
    """The 163-shard DeepSeek-V3-shaped checkpoint of tests/moe.py, sparse, made once."""
    from tests.moe import NAME, make_moe

    return make_moe(tmp_path_factory.mktemp("moe") / NAME)
