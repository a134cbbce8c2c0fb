"""The command line: the root group and its options (main), one module per command family."""
