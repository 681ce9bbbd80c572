import sys

from kubetune_webhook.main import main

sys.exit(main())
