"""``python -m agentgym_cli COMMAND [flags]``: the same as ``agentgym-rl COMMAND [flags]``."""

import sys

from agentgym_cli.main import main

sys.exit(main())
