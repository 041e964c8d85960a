#!/usr/bin/python3
# gpusim stand-in for nvidia-ctk, shipped by the stand-in nvidia-container-toolkit-base. It covers
# what the container_toolkit role runs: --version, `cdi generate --output=FILE` (a CDI spec of the
# GPUs the driver reports, one device per index and per UUID plus "all") and `cdi list`. Like the
# real one, `cdi generate` fails when the driver does not answer.
import os
import subprocess
import sys

VERSION = "@VERSION@"
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
SMI = os.environ.get("GPUSIM_NVIDIA_SMI", "nvidia-smi")


def gpus():
    try:
        out = subprocess.run(
            [SMI, "--query-gpu=index,uuid,minor_number,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        out = None
    if out is None or out.returncode != 0:
        sys.stderr.write(
            "ERRO[0000] failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: "
            "ERROR_LIBRARY_NOT_FOUND\n"
        )
        sys.exit(1)
    return [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def spec():
    rows = gpus()
    driver = rows[0][3]
    lines = ["---", 'cdiVersion: "0.5.0"', "kind: nvidia.com/gpu", "devices:"]
    for index, uuid, minor, _driver in rows:
        for name in (index, uuid):
            lines += [
                f'- name: "{name}"',
                "  containerEdits:",
                "    deviceNodes:",
                f"    - path: /dev/nvidia{minor}",
            ]
    lines += ['- name: "all"', "  containerEdits:", "    deviceNodes:"]
    lines += [f"    - path: /dev/nvidia{minor}" for _index, _uuid, minor, _driver in rows]
    lines += [
        "containerEdits:",
        "  env:",
        "  - NVIDIA_VISIBLE_DEVICES=void",
        "  deviceNodes:",
        "  - path: /dev/nvidiactl",
        "  - path: /dev/nvidia-uvm",
        "  mounts:",
        f"  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{driver}",
        f"    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{driver}",
        "    options: [ro, nosuid, nodev, bind]",
    ]
    return "\n".join(lines) + "\n"


def listed():
    names = []
    for folder in SPEC_DIRS:
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            if not entry.endswith((".yaml", ".json")):
                continue
            kind = ""
            with open(os.path.join(folder, entry)) as handle:
                for line in handle:
                    if line.startswith("kind:"):
                        kind = line.split(":", 1)[1].strip()
                    elif line.startswith("- name:"):
                        names.append(f"{kind}={line.split(':', 1)[1].strip().strip(chr(34))}")
    return names


def main(argv):
    if argv[:1] in (["--version"], ["-v"]):
        print(f"NVIDIA Container Toolkit CLI version {VERSION}")
        return 0
    if argv[:2] == ["cdi", "generate"]:
        output = next((a.split("=", 1)[1] for a in argv[2:] if a.startswith("--output=")), "")
        text = spec()
        if not output:
            sys.stdout.write(text)
            return 0
        os.makedirs(os.path.dirname(output), exist_ok=True)
        with open(output, "w") as handle:
            handle.write(text)
        sys.stderr.write(f'INFO[0000] Generated CDI spec with version 0.5.0\nINFO[0000] Wrote "{output}"\n')
        return 0
    if argv[:2] == ["cdi", "list"]:
        names = listed()
        sys.stderr.write(f"INFO[0000] Found {len(names)} CDI devices\n")
        sys.stdout.write("".join(f"{n}\n" for n in names))
        return 0
    sys.stderr.write(f"nvidia-ctk (gpusim stand-in): {' '.join(argv)} is not simulated\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
