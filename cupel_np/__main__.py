import sys

from cupel_np.cli.app import main

sys.exit(main())
