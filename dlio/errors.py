"""Errors a person can act on. The CLI prints str(e) on one line and exits with e.exit_code."""


class DlioError(Exception):
    """Bad input or an unusable environment: one line, exit status 2."""

    exit_code = 2


class DlioRunError(DlioError):
    """The run failed while measuring (I/O error, rank failure): exit status 1."""

    exit_code = 1
