# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may write the fleet state and the files rendered from it, on the fleet host.

Two guards, both kept in the fleet state's folder:

- the folder's lock (``.lock``, an exclusive flock), held for one call of fleet_state: one writer
  of the records at a time, the records read again under it. It goes with the process that holds it.
- the run lease (``.lease``, a JSON file written under that lock), held by one run from its plan of
  the cluster-wide files to their record (fleet_lease): runs at the same time (AWX slices, two
  operators) plan, write and record those files one after the other, so that the last writer's
  files describe every record. A lease names its run and ends by itself at its expiry (a run that
  died, a lost controller), so a waiting run's wait is bounded.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import tempfile
import time

LOCK = ".lock"
LEASE = ".lease"
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")


class LockError(RuntimeError):
    """The lock or the lease could not be taken: the message names the holder and the fix."""


def hold(folder, timeout, *, sleep=0.2):
    """Take the folder's lock (waiting up to ``timeout`` seconds); returns its open file descriptor.

    Closing the descriptor (or the process ending, whatever ends it) releases the lock.
    """
    path = os.path.join(folder, LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise LockError(f"cannot open the fleet state's lock {path} ({err}). Check the folder's permissions.") from None
    deadline = time.monotonic() + max(timeout, 0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                try:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
                except OSError:
                    holder = "unknown"
                os.close(fd)
                raise LockError(
                    f"another run records into the fleet state {folder} and still holds {path} after {timeout} s "
                    f"({holder}). Let it finish, or raise fleet_lock_timeout; a holder that is gone releases the "
                    "lock by itself."
                ) from None
            time.sleep(sleep)
    os.ftruncate(fd, 0)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since}\n".encode(), 0)
    return fd


def check_id(lease_id):
    if not isinstance(lease_id, str) or not _ID.match(lease_id):
        raise LockError(
            f"the lease id {lease_id!r} is not 1 to 64 letters, digits, dots, dashes or underscores. "
            "Leave fleet_lease_id unset (each run makes its own) or give it such a name."
        )
    return lease_id


def read_lease(folder):
    """The lease in ``folder``: None when there is none; LockError when its file cannot be used."""
    path = os.path.join(folder, LEASE)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(65536)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise LockError(f"cannot read the fleet lease {path} ({err}). Fix its permissions, or delete it.") from None
    try:
        lease = json.loads(text)
    except ValueError:
        lease = None
    usable = isinstance(lease, dict) and all(isinstance(lease.get(key), str) for key in ("id", "holder", "since"))
    expires = lease.get("expires") if usable else None
    # A time this side of the year 5000 (NaN, infinities and larger ones end no wait and print no date).
    if not usable or isinstance(expires, bool) or not isinstance(expires, (int, float)) or not 0 <= expires < 10**11:
        raise LockError(
            f"the fleet lease {path} is not a lease this collection wrote (JSON with id, holder, since and expires). "
            "No run of this collection holds it: delete it, then run again."
        )
    return lease


def describe(lease):
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease["expires"]))
    holder = f" ({lease['holder']})" if lease["holder"] else ""
    return f"run {lease['id']}{holder}, since {lease['since']}, until {expires}"


def _write_lease(folder, lease):
    fd, tmp = tempfile.mkstemp(prefix=".lease.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(lease, handle, sort_keys=True)
            handle.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(folder, LEASE))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def acquire(folder, lease_id, *, holder, ttl, timeout, lock_timeout, poll=2.0, clock=time.time, sleep=time.sleep):
    """Hold the run lease for ``ttl`` seconds from now (renewed where this run holds it already).

    Waits up to ``timeout`` seconds while another run's lease is in force; a lease past its expiry
    is taken over (its run is gone or ran past its time). Returns ``(waited, taken_over)``: seconds
    waited and the description of the expired lease taken over, or None. LockError past the wait,
    naming the holder and when its lease ends.
    """
    check_id(lease_id)
    if ttl < 1:
        raise LockError(f"fleet_lease_ttl is {ttl}: a lease lasts 1 second or more (the default is 1800).")
    started = clock()
    while True:
        fd = hold(folder, lock_timeout)
        try:
            lease = read_lease(folder)
            now = clock()
            if lease is None or lease["id"] == lease_id or lease["expires"] <= now:
                taken = describe(lease) if lease is not None and lease["id"] != lease_id else None
                since = lease["since"] if lease is not None and lease["id"] == lease_id else None
                _write_lease(
                    folder,
                    {
                        "id": lease_id,
                        "holder": holder,
                        "since": since or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                        "expires": int(now + ttl),
                    },
                )
                return round(now - started, 1), taken
        finally:
            os.close(fd)
        if now - started >= timeout:
            raise LockError(
                f"another run plans and writes the cluster-wide files from the fleet state {folder}: "
                f"{describe(lease)}; waited {int(now - started)} s (fleet_lease_timeout {timeout}). Let it finish "
                "(its lease ends by itself at its expiry if that run is gone), raise fleet_lease_timeout, or, if "
                f"no run of it is left, delete {os.path.join(folder, LEASE)} on the fleet host."
            )
        sleep(min(poll, max(lease["expires"] - now, 0.05), max(timeout - (now - started), 0.05)))


def release(folder, lease_id, *, lock_timeout):
    """End this run's lease; returns True when it held one (another run's lease is left alone)."""
    check_id(lease_id)
    if not os.path.isdir(folder):
        return False
    fd = hold(folder, lock_timeout)
    try:
        lease = read_lease(folder)
        if lease is None or lease["id"] != lease_id:
            return False
        os.unlink(os.path.join(folder, LEASE))
        return True
    finally:
        os.close(fd)
