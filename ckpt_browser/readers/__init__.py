"""Readers turn files into model objects: file formats only, no framework's names (those are
in producers/). No Textual here, and no torch for safetensors."""

from ckpt_browser.readers.load import finish, iter_files

__all__ = ["finish", "iter_files"]
