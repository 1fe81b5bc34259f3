"""``python -m coolsampler.cli``: the ``coolsampler`` command where its entry point is not installed
(inside the image, or from a bare checkout with ``PYTHONPATH=workflow``)."""

import sys

from coolsampler.cli import main

sys.exit(main())
