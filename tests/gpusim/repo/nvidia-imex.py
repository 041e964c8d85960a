#!/usr/bin/env python
# gpusim stand-in for NVIDIA's IMEX daemon (nvidia-imex) and its control tool (nvidia-imex-ctl),
# one program installed under both names. As the real daemon: it reads config.cfg (-c), takes the
# node list from IMEX_NODE_CONFIG_FILE (one address per line), finds itself by an address of its
# own, needs the GPU driver, forks when DAEMONIZE=1 (its unit is Type=forking), listens for its
# peers on SERVER_PORT and answers the control tool on IMEX_CMD_PORT. Every second it calls each
# peer; a peer whose node list differs is NODES_MISMATCH, one that does not answer DISCONNECTED
# (NEVER_CONNECTED before it ever answered). The control tool's `-N -j` prints the domain as the
# 580 release's does (fields, enums); without a daemon, every node UNAVAILABLE and every connection
# INVALID, the domain DOWN, as the real tool prints it.
import json
import os
import socket
import sys
import threading
import time

VERSION = "@VERSION@"
DRIVER_STAMP = os.environ.get("GPUSIM_DRIVER_STAMP", "/usr/share/gpusim/driver-version")
DEFAULT_CONFIG = "/etc/nvidia-imex/config.cfg"


def read_config(path):
    values = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#"):
                values[key.strip()] = value.strip()
    return values


def node_list(config):
    path = config.get("IMEX_NODE_CONFIG_FILE") or "/etc/nvidia-imex/nodes_config.cfg"
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip() and not line.lstrip().startswith("#")]


def own_index(nodes):
    for index, address in enumerate(nodes):
        probe = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.bind((address, 0))
            return index
        except OSError:
            continue
        finally:
            probe.close()
    return None


def stamp():
    now = time.gmtime()
    return f"{now.tm_mon}/{now.tm_mday}/{now.tm_year} {time.strftime('%H:%M:%S', now)}.000"


def read_line(conn):
    """One JSON message: the bytes up to a newline (or to the peer's close)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data)


def ask(address, port, request, timeout=1.0):
    with socket.create_connection((address, port), timeout=timeout) as conn:
        conn.sendall((json.dumps(request) + "\n").encode())
        return read_line(conn)


class Daemon:
    def __init__(self, config, nodes, me):
        self.config, self.nodes, self.me = config, nodes, me
        self.port = int(config.get("SERVER_PORT") or 50000)
        self.peers = {}  # index -> what the peer said of itself, or None
        self.links = {i: ("CONNECTED" if i == me else "NEVER_CONNECTED") for i in range(len(nodes))}
        self.lock = threading.Lock()
        self.log_path = config.get("LOG_FILE_NAME") or ""

    def log(self, message):
        line = f"[{stamp()}] [INFO] [tid {threading.get_ident()}] {message}\n"
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(line)

    def own(self):
        with self.lock:
            row = {
                str(i): {"host": self.nodes[i], "status": state, "changed": False} for i, state in self.links.items()
            }
        return {
            "status": "READY",
            "host": self.nodes[self.me],
            "hostName": socket.gethostname(),
            "version": VERSION,
            "connections": row,
            "changed": False,
        }

    def domain(self):
        nodes = {}
        for index, address in enumerate(self.nodes):
            if index == self.me:
                nodes[str(index)] = self.own()
                continue
            with self.lock:
                peer, link = self.peers.get(index), self.links[index]
            if peer is None or link != "CONNECTED":
                nodes[str(index)] = {
                    "status": "UNAVAILABLE",
                    "host": address,
                    "connections": {
                        str(i): {"host": self.nodes[i], "status": "INVALID", "changed": False}
                        for i in range(len(self.nodes))
                    },
                    "changed": False,
                    "version": "",
                    "hostName": "",
                }
            else:
                nodes[str(index)] = peer
        every = [node["status"] == "READY" for node in nodes.values()]
        links = [c["status"] == "CONNECTED" for node in nodes.values() for c in node["connections"].values()]
        status = "UP" if all(every) and all(links) else ("DEGRADED" if any(every) else "DOWN")
        return {"nodes": nodes, "timestamp": stamp(), "status": status}

    def serve(self, server, handler):
        while True:
            conn, _addr = server.accept()
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    def answer(self, conn):
        with conn:
            try:
                request = read_line(conn)
                if request.get("op") == "hello":
                    if request.get("nodes") != self.nodes:
                        reply = {"error": "NODES_MISMATCH"}
                    else:
                        reply = self.own()
                elif request.get("op") == "domain":
                    reply = self.domain()
                elif request.get("op") == "status":
                    reply = {"status": "READY"}
                else:
                    reply = {"error": "unknown request"}
                conn.sendall((json.dumps(reply) + "\n").encode())
            except (OSError, ValueError):
                return

    def poll(self):
        while True:
            for index, address in enumerate(self.nodes):
                if index == self.me:
                    continue
                try:
                    reply = ask(address, self.port, {"op": "hello", "nodes": self.nodes})
                    state = "NODES_MISMATCH" if reply.get("error") == "NODES_MISMATCH" else "CONNECTED"
                except (OSError, ValueError):
                    reply, state = None, None
                with self.lock:
                    before = self.links[index]
                    if state is None:
                        state = "NEVER_CONNECTED" if before == "NEVER_CONNECTED" else "DISCONNECTED"
                    self.links[index] = state
                    self.peers[index] = reply if state == "CONNECTED" else None
                if before != state:
                    self.log(f"Connection to node {index} ({address}): {state}")
            time.sleep(1)


def listener(address, port):
    server = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, port))
    server.listen(16)
    return server


def daemon(argv):
    path = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else DEFAULT_CONFIG
    config = read_config(path)
    try:
        driver = open(DRIVER_STAMP, encoding="utf-8").read().strip()
    except OSError:
        driver = ""
    if not driver:
        sys.stderr.write("Failed to allocate handle (client) to NVIDIA GPU driver\n")
        return 1
    try:
        nodes = node_list(config)
    except OSError as err:
        sys.stderr.write(f"Failed to read the node config file: {err}\n")
        return 1
    bind_ip = config.get("BIND_INTERFACE_IP") or ""
    me = nodes.index(bind_ip) if bind_ip in nodes else own_index(nodes)
    if me is None:
        sys.stderr.write("None of the node config file's addresses is an address of this node\n")
        return 1
    state = Daemon(config, nodes, me)
    bind = config.get("BIND_INTERFACE_IP") or ("::" if ":" in nodes[me] else "0.0.0.0")
    peers = listener(bind, state.port)
    command = None
    if config.get("IMEX_CMD_ENABLED", "1") == "1":
        command = listener(
            config.get("IMEX_CMD_BIND_INTERFACE_IP") or "127.0.0.1", int(config.get("IMEX_CMD_PORT") or 50005)
        )
    if config.get("DAEMONIZE", "1") == "1" and os.fork():
        return 0
    state.log(f"IMEX version {VERSION} is running; identified this node as ID {me}, using bind address of {nodes[me]}")
    threading.Thread(target=state.poll, daemon=True).start()
    if command is not None:
        threading.Thread(target=state.serve, args=(command, state.answer), daemon=True).start()
    state.serve(peers, state.answer)
    return 0


def control(argv):
    path = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else DEFAULT_CONFIG
    config = read_config(path)
    port = int(config.get("IMEX_CMD_PORT") or 50005)
    host = config.get("IMEX_CMD_BIND_INTERFACE_IP") or "127.0.0.1"
    if "-q" in argv:
        try:
            print(ask(host, port, {"op": "status"}, timeout=2.0)["status"])
        except (OSError, ValueError, KeyError):
            print("Query Status failed.")
        return 0
    if "-N" not in argv:
        sys.stderr.write("gpusim stand-in: nvidia-imex-ctl answers -q and -N [-j] only\n")
        return 2
    try:
        domain = ask(host, port, {"op": "domain"}, timeout=2.0)
    except (OSError, ValueError):
        nodes = node_list(config)
        invalid = {str(i): {"host": a, "status": "INVALID", "changed": False} for i, a in enumerate(nodes)}
        domain = {
            "nodes": {
                str(i): {
                    "status": "UNAVAILABLE",
                    "host": a,
                    "connections": invalid,
                    "changed": False,
                    "version": "",
                    "hostName": "",
                }
                for i, a in enumerate(nodes)
            },
            "timestamp": stamp(),
            "status": "DOWN",
        }
    if "-j" in argv:
        print(json.dumps(domain, separators=(",", ":")))
        return 0
    print(domain["timestamp"])
    print("Nodes:")
    for key, node in domain["nodes"].items():
        print(f"Node #{key}   - {node['host']:<18} - {node['status']:<20} - Version: {node['version']}")
    print("Domain State: " + domain["status"])
    return 0


if __name__ == "__main__":
    PROGRAM = os.path.basename(sys.argv[0])
    sys.exit(control(sys.argv[1:]) if PROGRAM == "nvidia-imex-ctl" else daemon(sys.argv[1:]))
