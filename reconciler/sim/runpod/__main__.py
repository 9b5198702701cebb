"""`python -m reconciler.sim.runpod`: serve the simulator as a process."""

import sys

from reconciler.sim.runpod.simulator import main

sys.exit(main())
