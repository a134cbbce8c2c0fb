"""DLIO's files of a run: written from a Result in DLIO's formats (files, log, hydra, host), and read back
from DLIO's own output folders (folder)."""
