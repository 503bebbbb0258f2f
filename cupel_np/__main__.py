import sys

from cupel_np.cli.commands import main

sys.exit(main())
