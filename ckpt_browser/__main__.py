import sys

from ckpt_browser.cli import main

sys.exit(main())
