"""Property-based tests over every reader: for each target, hypothesis draws damaged
checkpoints (strategies.py) and harness.check asserts the properties on each:

- a result, or only a documented exception (`CheckpointError`; `ShardError` from the index
  reader) with a one-line message; `read_header`, `read_pickle_file`, `read_dcp` and the
  unpickler never raise;
- the CLI (`inspect`, `check`, `stats`, `diff --values`) exits with a documented code, never as
  a bug, with one line on stderr, strict JSON with --json, no control characters in text;
- no file created or modified anywhere (audit hook + snapshots of the case folder and the cwd),
  no program run; peak memory and time under guards.MEMORY_LIMIT and TIME_LIMIT per call.

Deterministic: derandomized, no example database. The reader tests measure memory with
tracemalloc on every call; the CLI tests, which run the same readers again and cost 4x more
under tracemalloc, measure time only, and `run_fuzz.py` measures both everywhere.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .guards import snapshot
from .harness import check, explain
from .strategies import SAMPLES, STRATEGIES

FAILURES = Path(tempfile.gettempdir()) / "ckpt-fuzz-failures"


def fuzz_settings(n: int) -> settings:
    """No shrinking: a failing case is kept whole (see _assert_holds), and shrinking a
    300 KB DCP folder would cost minutes of the suite's time."""
    return settings(max_examples=n, database=None, derandomize=True, deadline=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=list(HealthCheck), print_blob=False)


@pytest.fixture(scope="module", autouse=True)
def samples_untouched():
    """The bundled samples the strategies read are never changed."""
    before = snapshot(SAMPLES)
    cwd = os.getcwd()
    yield
    assert os.getcwd() == cwd
    assert snapshot(SAMPLES) == before


def _assert_holds(case, **kw) -> None:
    failures = check(case, **kw)
    if failures:
        kept = case.save(FAILURES)
        raise AssertionError(f"{explain(case, failures)}\nthe case is kept at {kept}; copy it "
                             "into tests/fuzz/regressions/ to keep it as a regression")


# examples per target: (reader test, CLI test), sized so the module runs in under a minute on
# two cores (the suite's budget); run_fuzz.py runs the same strategies for as long as it is
# given, and what it finds is kept in regressions/
EXAMPLES = {"safetensors": (150, 60), "index": (80, 40), "torch": (100, 50),
            "pickle": (180, 60), "dcp": (30, 15), "state": (40, 20)}


def _reader_test(target: str):
    @fuzz_settings(EXAMPLES[target][0])
    @given(case=STRATEGIES[target]())
    def test(case):
        _assert_holds(case, cli=())
    test.__name__ = f"test_{target}_readers"
    return test


def _cli_test(target: str):
    @fuzz_settings(EXAMPLES[target][1])
    @given(case=STRATEGIES[target](), as_json=st.booleans())
    def test(case, as_json):
        _assert_holds(case, readers=False, as_json=as_json, memory=False)
    test.__name__ = f"test_{target}_cli"
    return test


for _target in STRATEGIES:
    globals()[f"test_{_target}_readers"] = _reader_test(_target)
    globals()[f"test_{_target}_cli"] = _cli_test(_target)
