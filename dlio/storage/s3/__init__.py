"""Object storage (S3): settings, a client that runs s3dlio in worker processes, and io points.

Pointing dlio-fast at an S3 endpoint (AWS, MinIO, Ceph RGW, AIStore's S3 API, SeaweedFS ...):

    pip install 'dlio-fast[s3]'          # s3dlio (Python >= 3.11), zstandard, boto3
    export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_REGION=us-east-1
    dlio-fast io s3://BUCKET/PREFIX --endpoint http://HOST:PORT --rw read,write,randread --bs 1m,16m --qd 1,8

--endpoint wins over AWS_ENDPOINT_URL (leave both out for AWS itself only if s3dlio's default
endpoint suits). The bucket must exist; test objects go under PREFIX/.dlio-fast-io/ and are removed
afterwards unless --keep. AWS_MAX_ATTEMPTS (DLIO's storage_options.s3_max_attempts) bounds the
client's retries, and so how long a dead server takes to be reported. A local throwaway server for
trying it: tools/ceph-s3.sh (Debian's ceph-mon, ceph-osd, radosgw).
"""
