"""The dataset: its shape on disk (spec), what is known of its files (manifest), generation,
verification, byte-range tables (ranges) and the file formats (formats/)."""
