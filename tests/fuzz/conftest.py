"""Hypothesis keeps its caches (and patches of failing examples) in a throwaway folder, not in
`.hypothesis/` of the repository: these tests check that nothing is written, and write nothing."""

from __future__ import annotations

import atexit
import shutil
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

_home = tempfile.mkdtemp(prefix="ckpt-fuzz-hypothesis-")
set_hypothesis_home_dir(_home)
atexit.register(shutil.rmtree, _home, ignore_errors=True)
