import sys

from .build import main

sys.exit(main(sys.argv[1:]))
