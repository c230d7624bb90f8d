"""Pickles that call a callable no deny list names: gadgets from the standard library, numpy, torch and
its dependencies that run a command, evaluate code or write a file (issue 13)."""

from __future__ import annotations

from tests.malicious.make_corpus import (  # noqa: F401
    CLEAN, DAMAGED, ODD, UNSAFE, Build, Call, G, Get, NewObj, PersId, Put, Raw, case, dumps,
    hf_checkpoint, hf_optimizer_case, put, system, torch_zip,
)
