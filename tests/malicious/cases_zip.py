"""Zip parser differentials: archives where two readers could see different contents (issue 13)."""

from __future__ import annotations

from tests.malicious.make_corpus import (  # noqa: F401
    CLEAN, DAMAGED, ODD, UNSAFE, Build, Call, G, Get, NewObj, PersId, Put, Raw, case, dumps,
    hf_checkpoint, hf_optimizer_case, put, system, torch_zip,
)
