"""``python -m localcluster.nodeagent``: run the node agent."""

import sys

from .agent import main

sys.exit(main())
