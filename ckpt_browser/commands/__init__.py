"""The subcommands, one module each: `cmd_NAME(args) -> exit code`. The parser is cli.py's;
each command imports what it reads inside itself, so `import ckpt_browser.cli` stays light."""
