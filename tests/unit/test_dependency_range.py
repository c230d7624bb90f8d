"""The installed package's own metadata admits every torch it was tried with: a cap below one
of them makes `pip install` downgrade a user's torch (a multi-GB download that can break
their environment), and reading checkpoints never imports torch at all."""

from __future__ import annotations

from importlib.metadata import requires

from packaging.requirements import Requirement
from packaging.version import Version

TRIED = ("2.13.0", "2.14.1")  # CI's wheel; the newest the sample generators ran beside


def test_the_torch_range_admits_every_torch_tried():
    reqs = [Requirement(r) for r in requires("ckpt-browser") or []]
    torch = [r for r in reqs if r.name == "torch" and r.marker is None]
    assert len(torch) == 1, reqs
    for v in TRIED:
        assert torch[0].specifier.contains(Version(v)), (str(torch[0]), v)


def test_reading_a_checkpoint_never_imports_torch():
    import subprocess
    import sys

    from .helpers import RUN6

    code = ("import sys; from ckpt_browser.cli import main; "
            f"rc = main(['check', {str(RUN6)!r}, '--json']); "
            "assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
