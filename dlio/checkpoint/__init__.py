"""Checkpoint emulation: what a checkpoint is made of per rank (layout), when training takes one
(schedule), what it costs in words (summary), and how it is written and read back through the C core
(transfers, save, load, record), alone in DLIO's checkpoint-only mode (only_mode)."""
