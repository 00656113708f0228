"""`python3 -m fieldguide.notebooks` (`make notebooks`): notebooks/generate.py."""

import sys

from fieldguide.notebooks.generate import main

sys.exit(main())
