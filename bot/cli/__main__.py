"""`python -m bot.cli` is `massgen-bot`."""

import sys

from bot.cli import main

sys.exit(main())
