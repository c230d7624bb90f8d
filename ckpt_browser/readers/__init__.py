"""Readers turn files into model objects. No Textual here, and no torch for safetensors."""

from ckpt_browser.readers.layout import open_layout
from ckpt_browser.readers.load import finish, iter_files

__all__ = ["finish", "iter_files", "open_layout"]
