"""ckpt-browser: look inside model and training checkpoints without loading them."""

__version__ = "0.1.0"
