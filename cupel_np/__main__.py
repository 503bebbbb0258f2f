import sys

from cupel_np.cli import main

sys.exit(main())
