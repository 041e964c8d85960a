#!/usr/bin/env python
# gpusim stand-in for nvidia-ctk, shipped by the stand-in nvidia-container-toolkit-base. It covers
# what the container_toolkit and k8s_node roles run: --version, `cdi generate --output=FILE` (a CDI
# spec of the GPUs the driver reports, one device per index and per UUID plus "all"), `cdi list`,
# `system create-device-nodes --control-devices [--load-kernel-modules]` (the control devices
# nvidiactl, nvidia-modeset, nvidia-uvm and nvidia-uvm-tools, as character devices) and `system
# create-dev-char-symlinks --create-all` (/dev/char/MAJOR:MINOR links to every /dev/nvidia*
# character device, what systemd's device cgroups look up). Like the real one, `cdi generate` and
# `create-device-nodes` fail when the driver does not answer; the kernel modules are not loaded
# here (a container has the host's), the driver's answer stands for them.
import os
import stat
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


# nvidia-uvm's major is dynamic on a real host (/proc/devices); any free number serves here.
CONTROL_DEVICES = (
    ("nvidiactl", 195, 255),
    ("nvidia-modeset", 195, 254),
    ("nvidia-uvm", 510, 0),
    ("nvidia-uvm-tools", 510, 1),
)


def create_device_nodes(argv):
    gpus()  # fails as the real one does when the driver does not answer
    if "--control-devices" in argv:
        for name, major, minor in CONTROL_DEVICES:
            path = "/dev/" + name
            if not os.path.exists(path):
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
                sys.stderr.write(f'INFO[0000] Created control device node "{path}"\n')
    return 0


def create_dev_char_symlinks(argv):
    if "--create-all" not in argv:
        sys.stderr.write("nvidia-ctk (gpusim stand-in): create-dev-char-symlinks is simulated with --create-all only\n")
        return 2
    os.makedirs("/dev/char", exist_ok=True)
    for entry in sorted(os.listdir("/dev")):
        path = "/dev/" + entry
        if not entry.startswith("nvidia"):
            continue
        info = os.lstat(path)
        if not stat.S_ISCHR(info.st_mode):
            continue
        link = f"/dev/char/{os.major(info.st_rdev)}:{os.minor(info.st_rdev)}"
        if os.path.islink(link) and os.readlink(link) == "../" + entry:
            continue
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink("../" + entry, link)
        sys.stderr.write(f"INFO[0000] Creating link {link} => {path}\n")
    return 0


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
    system = {"create-device-nodes": create_device_nodes, "create-dev-char-symlinks": create_dev_char_symlinks}
    if argv[:1] == ["system"] and argv[1:2] and argv[1] in system:
        return system[argv[1]](argv[2:])
    sys.stderr.write(f"nvidia-ctk (gpusim stand-in): {' '.join(argv)} is not simulated\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
