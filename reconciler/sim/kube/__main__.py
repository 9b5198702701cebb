"""`python -m reconciler.sim.kube`: serve the simulator as a process."""

import sys

from reconciler.sim.kube.simulator import main

sys.exit(main())
