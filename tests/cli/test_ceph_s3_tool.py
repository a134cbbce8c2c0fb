"""tools/ceph-s3.sh, the tests' S3 gateway: a port another process listens on is refused before anything starts
(it said it started: the readiness check found the other gateway's port)."""

import os
import socket
import subprocess

from conftest import REPO


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as other:  # another gateway on the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        d = tmp_path / "ceph"
        env = {**os.environ, "D": str(d), "RGW_PORT": str(port), "MON_PORT": str(port + 1)}
        p = subprocess.run(
            ["bash", os.path.join(REPO, "tools", "ceph-s3.sh"), "start"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stderr.strip() == (
        f"ceph-s3.sh: 127.0.0.1:{port} is in use by another process (another gateway?): stop it, or set RGW_PORT"
        " / MON_PORT"
    )
    assert not d.exists()  # nothing made, nothing started
