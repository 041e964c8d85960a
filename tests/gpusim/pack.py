# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pack a gpusim profile's hardware layer into one tar that a node takes in one unarchive.

The layer: the stand-in tools (lspci, ibstat, ...), the profile's captured outputs under
/usr/share/gpusim/profile, the profile's name in /etc/gpusim-profile and the unit that creates the
/dev/nvidia* nodes at boot. Copying these one file at a time cost three module calls per file and
host (about 20 s of every GPU scenario's prepare); one archive costs a transfer and a tar --diff.

The tar is reproducible (root-owned members, one fixed mtime, sorted, files only: the node's
existing folders keep their owners and modes) and named by its digest, so that runs beside each
other (two scenarios, two platforms) write the same file, atomically. Prints the tar's path.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Where each stand-in tool goes: where the real one is looked for first (PATH order, or the nccl
# role's build folder for all_reduce_perf).
TOOLS = {
    "lspci": "usr/local/bin",
    "ibstat": "usr/local/sbin",
    "smpquery": "usr/local/sbin",
    "ibdev2netdev": "usr/local/bin",
    "lscpu": "usr/local/bin",
    "ibv_devinfo": "usr/local/bin",
    "dmesg": "usr/local/bin",
    "all_reduce_perf": "opt/nccl-tests/current/build",
    "gpusim-devices": "usr/local/sbin",
    "gpusim-sysfs": "usr/local/sbin",
    "mokutil": "usr/local/bin",
    "gpusim-archive-slice": "usr/local/sbin",
    "gpusim-reboot": "usr/local/sbin",
}

DEVICES_UNIT = """\
[Unit]
Description=gpusim: create the profile's /dev/nvidia* device nodes
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpusim-devices

[Install]
WantedBy=sysinit.target
"""

# The profile's /sys/class/infiniband under /var/lib/gpusim/sys (gpusim-sysfs), kept current every
# 10 s (a fault's rising counters rise), and the node exporter reading its sysfs there.
SYSFS_UNIT = """\
[Unit]
Description=gpusim: write the profile's /sys/class/infiniband under /var/lib/gpusim/sys

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gpusim-sysfs
"""
SYSFS_TIMER = """\
[Unit]
Description=gpusim: keep /var/lib/gpusim/sys current

[Timer]
OnActiveSec=0
OnUnitActiveSec=10s
AccuracySec=1s

[Install]
WantedBy=timers.target
"""
# Debian's and Ubuntu's unit start it as /usr/bin/prometheus-node-exporter $ARGS.
NODE_EXPORTER_DROPIN = """\
[Service]
ExecStart=
ExecStart=/usr/bin/prometheus-node-exporter $ARGS --path.sysfs=/var/lib/gpusim/sys
"""

# 2024-01-01: any fixed time; the node's files take it, so tar --diff compares contents only.
MTIME = 1704067200


def members(profile: str) -> dict[str, tuple[bytes, int]]:
    """Path in the node's root -> (content, mode), for one profile."""
    folder = HERE / "profiles" / profile
    if not (HERE / "profiles" / f"{profile}.yml").is_file() or not folder.is_dir():
        known = sorted(p.stem for p in (HERE / "profiles").glob("*.yml"))
        raise SystemExit(f"pack.py: no gpusim profile {profile!r}; the profiles are {', '.join(known)}")
    # The tools' sources say #!/usr/bin/env python (ansible-test's sanity); the nodes have python3 only.
    files = {
        f"{where}/{name}": (
            (HERE / "bin" / name).read_bytes().replace(b"#!/usr/bin/env python\n", b"#!/usr/bin/python3\n", 1),
            0o755,
        )
        for name, where in TOOLS.items()
    }
    files.update(
        {f"usr/share/gpusim/profile/{p.name}": (p.read_bytes(), 0o644) for p in folder.iterdir() if p.is_file()}
    )
    files["etc/gpusim-profile"] = (f"{profile}\n".encode(), 0o644)
    files["etc/systemd/system/gpusim-devices.service"] = (DEVICES_UNIT.encode(), 0o644)
    files["etc/systemd/system/gpusim-sysfs.service"] = (SYSFS_UNIT.encode(), 0o644)
    files["etc/systemd/system/gpusim-sysfs.timer"] = (SYSFS_TIMER.encode(), 0o644)
    files["etc/systemd/system/prometheus-node-exporter.service.d/gpusim-sysfs.conf"] = (
        NODE_EXPORTER_DROPIN.encode(),
        0o644,
    )
    return files


def archive(files: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(files):
            content, mode = files[path]
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="a profile name (tests/gpusim/profiles/<name>.yml)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gpusim-hardware",
        help="folder of the archives (default: gpusim-hardware in the system's temporary folder)",
    )
    args = parser.parse_args(argv)
    data = archive(members(args.profile))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.profile}-{hashlib.sha256(data).hexdigest()[:16]}.tar"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=args.out, prefix=".pack-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
