#!/usr/bin/python3
# gpusim stand-in for dcgmi, shipped by the stand-in datacenter-gpu-manager-4-core: `dcgmi discovery -l`
# [--host HOST[:PORT]] connects to nv-hostengine (127.0.0.1:5555 by default) and lists the GPUs the
# driver reports; like the real one it fails when the host engine does not answer.
import os
import socket
import subprocess
import sys

SMI = os.environ.get("GPUSIM_NVIDIA_SMI", "nvidia-smi")


def main(argv):
    if argv[:2] != ["discovery", "-l"]:
        sys.stderr.write(f"dcgmi (gpusim stand-in): {' '.join(argv)} is not simulated\n")
        return 2
    target = argv[argv.index("--host") + 1] if "--host" in argv else "127.0.0.1"
    host, _sep, port = target.partition(":")
    try:
        socket.create_connection((host, int(port or 5555)), timeout=5).close()
    except OSError:
        print(f"Error: unable to establish a connection to the specified host: {target}")
        print("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.")
        return 255
    out = subprocess.run(
        [SMI, "--query-gpu=index,name,pci.bus_id,uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    print(f"{len(rows)} GPU{'s' if len(rows) != 1 else ''} found.")
    for index, name, bus, uuid in rows:
        print(f"GPU {index}: Name: {name}  PCI Bus ID: {bus}  Device UUID: {uuid}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
