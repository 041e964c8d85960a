#!/usr/bin/env python
# gpusim stand-in for an NVIDIA service daemon (nv-fabricmanager, nvidia-persistenced,
# nv-hostengine). It stays in the foreground so systemd sees a running service, listens where
# the real one does when it has a port (nv-hostengine's -b/--bind-interface and -p/--port move it),
# and refuses to start where the real one refuses. nv-hostengine's stand-in greets each caller with a
# line of JSON (its host name, version, GPU count and the "mndiag" fault of /etc/gpusim/faults.json),
# which the stand-in dcgmi's multi-node diagnostic reads of each node it runs on.
import json
import os
import signal
import socket
import sys
import time

NAME = "@NAME@"
VERSION = "@VERSION@"
LISTEN = "@LISTEN@"  # host:port, or empty
NEEDS_DRIVER = "@NEEDS_DRIVER@"  # "exact": the driver must be this very version
DRIVER_STAMP = "/usr/share/gpusim/driver-version"


def log(msg):
    sys.stdout.write(f"{NAME}[{os.getpid()}]: {msg}\n")
    sys.stdout.flush()


def greeting():
    try:
        with open("/usr/share/gpusim/profile/profile.json") as handle:
            gpus = int(json.load(handle).get("gpu_count") or 0)
    except (OSError, ValueError):
        gpus = 0
    try:
        with open(os.environ.get("GPUSIM_FAULTS", "/etc/gpusim/faults.json")) as handle:
            fault = json.load(handle).get("mndiag") or {}
    except (OSError, ValueError, AttributeError):
        fault = {}
    return {"hostname": socket.gethostname(), "version": VERSION, "gpus": gpus, "mndiag": fault}


def listen_address(argv):
    host, _sep, port = LISTEN.rpartition(":")
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-b", "--bind-interface"):
            host = argv[i + 1]
        elif arg in ("-p", "--port"):
            port = argv[i + 1]
    return host, int(port)


def main():
    if NEEDS_DRIVER == "exact":
        try:
            driver = open(DRIVER_STAMP).read().strip()
        except OSError:
            log("NVIDIA driver is not installed")
            return 1
        if driver != VERSION:
            log(f"fabric manager version {VERSION} does not match the driver version {driver}")
            return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if LISTEN:
        host, port = listen_address(sys.argv[1:])
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, port))
        server.listen(8)
        log(f"version {VERSION} listening on {host}:{port}")
        while True:
            conn, _addr = server.accept()
            try:
                if NAME == "nv-hostengine":
                    conn.sendall((json.dumps(greeting()) + "\n").encode())
            except OSError:
                pass
            conn.close()
    log(f"version {VERSION} started")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
