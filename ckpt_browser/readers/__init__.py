"""Readers turn files into model objects. No Textual here, and no torch for safetensors."""

from ckpt_browser.readers.layout import open_layout
from ckpt_browser.readers.load import finish, iter_shards, load_checkpoint

__all__ = ["finish", "iter_shards", "load_checkpoint", "open_layout"]
