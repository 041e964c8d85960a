#!/usr/bin/env bash
# Capture a real GPU machine's outputs for the parsers' fixtures, and run the facts and health
# modules there, from a checkout of this repository on that machine:
#   tests/device/capture.sh OUTDIR [WHEELDIR]
# Writes OUTDIR/capture.tar.gz: each command's output as the command wrote it (stdout; stderr and
# the exit code beside it), and gpu_facts' and node_health's results as JSON. WHEELDIR holds an
# ansible-core wheel when the machine has no ansible-core (the modules need its module_utils only).
# Nothing on the machine is changed: every command only reads, and two processes hold the GPU for
# 40 s (a CUDA context and 1 GiB each) so that the process queries have something to list.
set -uo pipefail
out=${1:?usage: capture.sh OUTDIR [WHEELDIR]}
wheels=${2:-}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
cap=$work/capture
mkdir -p "$cap"

run() { # run NAME COMMAND...: stdout to NAME, stderr to NAME.err, the exit code to NAME.rc
  local name=$1
  shift
  "$@" >"$cap/$name" 2>"$cap/$name.err"
  echo $? >"$cap/$name.rc"
}

run smi_q_x.xml nvidia-smi -q -x
run smi_q.txt nvidia-smi -q
run smi_L.txt nvidia-smi -L
run topo_m.txt nvidia-smi topo -m
run nvlink_s.txt nvidia-smi nvlink -s
run mig_lgip.txt nvidia-smi mig -lgip
run mig_lgipp.txt nvidia-smi mig -lgipp
run mig_lgi.txt nvidia-smi mig -lgi
run csv_health.txt nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,persistence_mode,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure,memory.total,mig.mode.current --format=csv
run csv_remapped.txt nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv
run csv_apps.txt nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv
run driver_version.txt cat /proc/driver/nvidia/version
run lspci_nn.txt lspci -nn
run ibstat.txt ibstat
run ibv_devinfo_v.txt ibv_devinfo -v
run dcgmi_diag_r1_j.txt dcgmi diag -r 1 -j
run lscpu_p.txt lscpu -p=CPU,CORE,SOCKET,NODE
run uname.txt uname -a
run os_release.txt cat /etc/os-release

# Secure Boot, the kernel module's signature and the driver's packages, as the machine has them.
run sb_state.txt mokutil --sb-state
run sb_efivar.txt od -An -tx1 /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
run lockdown.txt cat /sys/kernel/security/lockdown
run tainted.txt cat /proc/sys/kernel/tainted
run modinfo_nvidia.txt modinfo nvidia
run modinfo_signer.txt modinfo -F signer nvidia
run dkms_status.txt dkms status
# shellcheck disable=SC2016  # dpkg-query's own ${field} format, not the shell's
run dpkg_nvidia.txt dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' '*nvidia*' 'linux-modules-*' 'linux-image-*'

# The modules, as Ansible runs them: the collection on the import path, the arguments in a file.
mkdir -p "$work/ac/ansible_collections/gpuops"
ln -s "$repo" "$work/ac/ansible_collections/gpuops/cluster"
pypath=$work/ac
if ! python3 -c 'import ansible.module_utils.basic' 2>/dev/null && [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$wheels"/ansible_core-*.whl
  pypath=$pypath:$work/site
fi
module() { # module NAME ARGS_JSON [OUT]: the module NAME, its JSON to OUT.json (OUT: NAME)
  local name=${3:-$1}
  echo "{\"ANSIBLE_MODULE_ARGS\": $2}" >"$work/$name.args.json"
  PYTHONPATH=$pypath python3 "$repo/plugins/modules/$1.py" "$work/$name.args.json" >"$cap/$name.json" 2>"$cap/$name.err"
  echo $? >"$cap/$name.rc"
}
module host_check '{"_ansible_check_mode": true, "kernel_headers": "warning"}'

# Two processes that hold the GPU (a CUDA context and 1 GiB each, through the driver's libcuda), one
# of them a copy of python3 under a path with a comma, for the compute-apps captures and
# driver_state's view of a busy node. Both end by themselves.
cat >"$work/hold.py" <<'PY'
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
def check(result, call):
    if result:
        sys.exit(f"{call}: CUresult {result}")
device, context, pointer = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
check(cuda.cuInit(0), "cuInit")
check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(1 << 30)), "cuMemAlloc_v2")
open(sys.argv[1], "w").close()
time.sleep(float(sys.argv[2]))
PY
mkdir -p "$work/gpu,holder"
cp "$(command -v python3)" "$work/gpu,holder/python3"
python3 "$work/hold.py" "$work/ready1" 40 2>"$cap/hold1.err" &
"$work/gpu,holder/python3" "$work/hold.py" "$work/ready2" 40 2>"$cap/hold2.err" &
for _ in $(seq 60); do [ -e "$work/ready1" ] && [ -e "$work/ready2" ] && break; sleep 0.5; done
sleep 2
run held_apps_noheader.txt nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,noheader
run held_apps_csv.txt nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv
run held_smi.txt nvidia-smi
run held_smi_q_x.xml nvidia-smi -q -x
module driver_state '{"_ansible_check_mode": true, "branch": "580", "busy": true}' driver_state_held
wait
echo '{"ANSIBLE_MODULE_ARGS": {}}' >"$work/facts_args.json"
PYTHONPATH=$pypath python3 "$repo/plugins/modules/gpu_facts.py" "$work/facts_args.json" >"$cap/gpu_facts.json" 2>"$cap/gpu_facts.err"
echo $? >"$cap/gpu_facts.rc"
PYTHONPATH=$pypath python3 - "$cap/gpu_facts.json" "$work/health_args.json" <<'EOF'
import json, sys
facts = json.load(open(sys.argv[1]))["ansible_facts"]
args = {"nvidia_gpu": facts["nvidia_gpu"], "dcgm_level": 0, "nccl_conf": "/nonexistent/nccl.conf",
        "slurm_conf": "/nonexistent/slurm.conf"}
json.dump({"ANSIBLE_MODULE_ARGS": args}, open(sys.argv[2], "w"))
EOF
PYTHONPATH=$pypath python3 "$repo/plugins/modules/node_health.py" "$work/health_args.json" >"$cap/node_health.json" 2>"$cap/node_health.err"
echo $? >"$cap/node_health.rc"

mkdir -p "$out"
tar -C "$work" -czf "$out/capture.tar.gz" capture
for f in gpu_facts node_health host_check driver_state_held; do echo "== $f rc $(cat "$cap/$f.rc")"; head -c 1500 "$cap/$f.json"; echo; head -c 600 "$cap/$f.err"; done
head -c 300 "$cap"/hold*.err
for f in "$cap"/*.rc; do printf '%s=%s ' "$(basename "$f" .rc)" "$(cat "$f")"; done
echo
rm -rf "$work"
