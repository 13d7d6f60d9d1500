import sys

from ipufs.cli import main

sys.exit(main())
