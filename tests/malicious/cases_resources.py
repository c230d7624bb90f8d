"""Resource attacks and pickles our inert model cannot follow: hash-colliding keys, integers too long
to print, operations on objects that are not plain containers (issue 13)."""

from __future__ import annotations

from tests.malicious.make_corpus import (  # noqa: F401
    CLEAN, DAMAGED, ODD, UNSAFE, Build, Call, G, Get, NewObj, PersId, Put, Raw, case, dumps,
    hf_checkpoint, hf_optimizer_case, put, system, torch_zip,
)
