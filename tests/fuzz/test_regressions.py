"""Every failing input the fuzzing found, kept under regressions/ and run again through every
reader of its target (the name up to the first '-') and the CLI, with the same properties as
test_properties.py. A file `<target>-<digest>--<name>` is one file given by that name; a folder
`<target>-<digest>/` is a checkpoint folder. See regressions/README.md.
"""

from __future__ import annotations

import pytest

from .cases import load, regressions
from .harness import check, explain

CASES = regressions()


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_regression(path):
    case = load(path)
    failures = check(case)
    assert not failures, explain(case, failures)


def test_regressions_are_named_for_a_target():
    from .cases import REGRESSIONS, TARGETS

    stray = [p.name for p in REGRESSIONS.iterdir()
             if p.name != "README.md" and p not in CASES]
    assert not stray, f"not <target>-<digest>--<name> or <target>-<digest>/ ({TARGETS}): {stray}"
