"""Find the bundled sample checkpoints, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

DEFAULT_SAMPLE = "tiny-llama-run/checkpoint-6"
SHOWN_AS = f"bundled sample ({DEFAULT_SAMPLE})"  # not its site-packages path


def samples_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "_samples", here.parent / "sample_checkpoints"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the bundled sample checkpoints are missing from this install")


def default_sample() -> str:
    return str(samples_dir() / DEFAULT_SAMPLE)
