"""Checkpoint emulation: what a checkpoint is made of per rank (layout) and how it is written and
read back through the C core (io)."""
