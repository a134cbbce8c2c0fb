"""Object storage (S3): settings, a client that runs s3dlio in worker processes, and io points."""
