#!/usr/bin/env bash
# Capture a real GPU machine's outputs for the parsers' fixtures, and run the facts and health
# modules there, from a checkout of this repository on that machine:
#   tests/device/capture.sh OUTDIR [WHEELDIR]
# Writes OUTDIR/capture.tar.gz: each command's output as the command wrote it (stdout; stderr and
# the exit code beside it), and gpu_facts' and node_health's results as JSON. WHEELDIR holds an
# ansible-core wheel when the machine has no ansible-core (the modules need its module_utils only).
# Nothing on the machine is changed: every command only reads.
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

# The modules, as Ansible runs them: the collection on the import path, the arguments in a file.
mkdir -p "$work/ac/ansible_collections/gpuops"
ln -s "$repo" "$work/ac/ansible_collections/gpuops/cluster"
pypath=$work/ac
if ! python3 -c 'import ansible.module_utils.basic' 2>/dev/null && [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$wheels"/ansible_core-*.whl
  pypath=$pypath:$work/site
fi
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
for f in gpu_facts node_health; do echo "== $f rc $(cat "$cap/$f.rc")"; head -c 1500 "$cap/$f.json"; echo; head -c 600 "$cap/$f.err"; done
for f in "$cap"/*.rc; do printf '%s=%s ' "$(basename "$f" .rc)" "$(cat "$f")"; done
echo
rm -rf "$work"
