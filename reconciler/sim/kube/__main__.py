"""`python -m reconciler.sim.kube`: serve the simulator as a process. Importing this module
(as a walk over every module does) serves nothing."""

import sys

from reconciler.sim.kube.simulator import main

if __name__ == "__main__":
    sys.exit(main())
