"""The dataset: DLIO's `dataset` section (section: DatasetSpec), its shape on disk (spec), what is known of
its files (manifest), generation (generate: gen_plan, gen_write, gen_manifest; gen_rate for --dry-run's
estimate), verification, byte-range tables (ranges) and the file formats (formats/)."""
