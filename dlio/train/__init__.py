"""Training emulation: the plan of what each rank reads (planner), the epoch loop that runs it in the
C core (loop), and the session that ties generation, training, checkpoints and results together."""
