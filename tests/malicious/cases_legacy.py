"""Legacy (pre-zip) torch files and files not opened by their names: every pickle in them goes
through the same policy (issue 13)."""

from __future__ import annotations

from tests.malicious.make_corpus import (  # noqa: F401
    CLEAN, DAMAGED, ODD, UNSAFE, Build, Call, G, Get, NewObj, PersId, Put, Raw, case, dumps,
    hf_checkpoint, hf_optimizer_case, put, system, torch_zip,
)
