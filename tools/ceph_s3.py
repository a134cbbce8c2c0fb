"""Start and stop a throwaway Ceph RADOS Gateway (tools/ceph-s3.sh) on free loopback ports.

Used by the tests' session fixture and by bench/vs_s3.py. Needs Debian's ceph-mon, ceph-osd and
radosgw packages (`apt-get install --no-install-recommends ceph-mon ceph-osd radosgw`).
"""

import os
import shutil
import socket
import subprocess
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ceph-s3.sh")
ACCESS_KEY = "testkey"
SECRET_KEY = "testsecret"


def missing() -> str:
    """Why the gateway cannot run here ('' when it can)."""
    for prog in ("radosgw", "ceph-mon", "ceph-osd", "monmaptool"):
        if not shutil.which(prog):
            return f"{prog} not found (apt-get install --no-install-recommends ceph-mon ceph-osd radosgw)"
    return ""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the OS picks it, so parallel users differ)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CephS3:
    """One gateway: start() takes about 2 s; stop() kills the daemons and removes their folder."""

    def __init__(self, folder: str = None, rgw_port: int = 0, mon_port: int = 0, mem_gb: int = 2):
        self.folder = folder or tempfile.mkdtemp(prefix="dlio-ceph-")
        self.rgw_port = rgw_port or free_port()
        self.mon_port = mon_port or free_port()
        self.env = dict(
            os.environ,
            D=self.folder,
            RGW_PORT=str(self.rgw_port),
            MON_PORT=str(self.mon_port),
            MEM_GB=str(mem_gb),
            S3_ACCESS_KEY=ACCESS_KEY,
            S3_SECRET_KEY=SECRET_KEY,
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.rgw_port}"

    def aws_env(self) -> dict:
        """The AWS variables a client needs to reach this gateway."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def start(self, attempts: int = 2) -> "CephS3":
        """Start; a failed start (seen once in a while on a loaded machine) is retried on new ports."""
        for attempt in range(attempts):
            p = subprocess.run(["bash", SCRIPT, "start"], env=self.env, capture_output=True, text=True, timeout=180)
            if not p.returncode:
                return self
            logs = subprocess.run(
                f"tail -n 3 {self.folder}/log/* 2>/dev/null", shell=True, capture_output=True, text=True
            ).stdout
            self.stop()
            self.rgw_port, self.mon_port = free_port(), free_port()
            self.env.update(RGW_PORT=str(self.rgw_port), MON_PORT=str(self.mon_port))
        raise RuntimeError(f"ceph-s3.sh start failed (exit {p.returncode}): {p.stderr.strip()[-300:]} {logs[-700:]}")

    def add_user(self, uid: str, access_key: str, secret_key: str) -> None:
        """Another S3 user (e.g. the keys written in DLIO's S3 configs: access-key / secret-key)."""
        subprocess.run(
            [
                "radosgw-admin",
                "-c",
                f"{self.folder}/ceph.conf",
                "user",
                "create",
                f"--uid={uid}",
                f"--display-name={uid}",
                f"--access-key={access_key}",
                f"--secret-key={secret_key}",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def stop(self) -> None:
        subprocess.run(["bash", SCRIPT, "stop"], env=self.env, capture_output=True, timeout=60)

    def __enter__(self) -> "CephS3":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
