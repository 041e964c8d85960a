#!/usr/bin/env python
# gpusim stand-in for Kubernetes @VERSION@: kubeadm, kubelet, kubectl and crictl in one program,
# installed under each name by the stand-in packages of the pkgs.k8s.io layout. No container runs:
#
# - kubeadm init (on the control plane's stand-in) makes a real CA with openssl, writes admin.conf
#   and starts gpusim-kube-apiserver.service: a small HTTP service that keeps nodes and bootstrap
#   tokens, in place of the API server (plain HTTP on :6443, state in /var/lib/gpusim-kube).
# - kubeadm token create mints a bootstrap token with its TTL there and prints the join command
#   with the CA's hash (sha256 of its SubjectPublicKeyInfo, as real kubeadm computes it).
# - kubeadm join --config reads a JoinConfiguration strictly as kubeadm.k8s.io/v1beta4 (unknown
#   fields, a token of another form, a missing CA hash are refused with kubeadm's words), checks
#   the CA it fetches against the pinned hash, registers the node, writes kubelet.conf, the
#   kubelet's config.yaml (the cluster's KubeletConfiguration with the patches applied) and
#   kubeadm-flags.env, and restarts kubelet. It records each join in /var/log/gpusim/kubeadm.log.
# - kubelet reads what kubeadm wrote, refuses node labels NodeRestriction refuses, checks that
#   containerd (Debian's real one) answers on the CRI socket, and reports its config (configz) and
#   Ready to the API service.
# - kubectl speaks to the API service: get (-o json), get --raw, label, annotate, cordon,
#   uncordon, drain, version.
import base64
import datetime
import hashlib
import http.server
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

VERSION = "@VERSION@"
STATE = "/var/lib/gpusim-kube/state.json"
PKI = "/etc/kubernetes/pki"
ADMIN_CONF = "/etc/kubernetes/admin.conf"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
FLAGS_ENV = "/var/lib/kubelet/kubeadm-flags.env"
LOG = "/var/log/gpusim/kubeadm.log"
PORT = 6443
TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")

# kubeadm.k8s.io/v1beta4 JoinConfiguration, its fields (kubeadm-config.v1beta4 reference). None:
# a leaf; a dict: an object's fields; a list of one dict: a list of such objects.
TAINT = {"key": None, "value": None, "effect": None, "timeAdded": None}
ARG = {"name": None, "value": None}
JOIN_FIELDS = {
    "apiVersion": None,
    "kind": None,
    "dryRun": None,
    "nodeRegistration": {
        "name": None,
        "criSocket": None,
        "taints": [TAINT],
        "kubeletExtraArgs": [ARG],
        "ignorePreflightErrors": None,
        "imagePullPolicy": None,
        "imagePullSerial": None,
    },
    "caCertPath": None,
    "discovery": {
        "bootstrapToken": {
            "token": None,
            "apiServerEndpoint": None,
            "caCertHashes": None,
            "unsafeSkipCAVerification": None,
        },
        "file": {"kubeConfigPath": None},
        "tlsBootstrapToken": None,
    },
    "controlPlane": {"localAPIEndpoint": {"advertiseAddress": None, "bindPort": None}, "certificateKey": None},
    "skipPhases": None,
    "patches": {"directory": None},
    "timeouts": {
        "controlPlaneComponentHealthCheck": None,
        "kubeletHealthCheck": None,
        "kubernetesAPICall": None,
        "etcdAPICall": None,
        "tlsBootstrap": None,
        "discovery": None,
        "upgradeManifests": None,
    },
}
# The cluster's KubeletConfiguration (kubeadm's kubelet-config ConfigMap): kubeadm's defaults.
CLUSTER_KUBELET = {
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "cgroupDriver": "systemd",
    "clusterDNS": ["10.96.0.10"],
    "clusterDomain": "cluster.local",
    "rotateCertificates": True,
    "staticPodPath": "/etc/kubernetes/manifests",
}
# kubelet --node-labels: what a kubelet may set in the kubernetes.io and k8s.io namespaces.
LABEL_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")
LABEL_SET = {
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}


def die(message, code=1):
    print(message, file=sys.stderr)
    sys.exit(code)


def now():
    return datetime.datetime.now(datetime.UTC)


def stamp(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def read_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path + ".tmp", mode)
    os.replace(path + ".tmp", path)


def ca_hash(pem):
    """sha256 of the CA's SubjectPublicKeyInfo, as kubeadm pins it."""
    spki = subprocess.run(
        "openssl x509 -pubkey -noout | openssl pkey -pubin -outform der",
        shell=True,
        input=pem.encode(),
        capture_output=True,
        check=True,
    ).stdout
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def kubeconfig(server, ca_pem, user, token):
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kubernetes",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(),
                    },
                }
            ],
            "contexts": [{"name": f"{user}@kubernetes", "context": {"cluster": "kubernetes", "user": user}}],
            "current-context": f"{user}@kubernetes",
            "users": [{"name": user, "user": {"token": token}}],
        },
        sort_keys=False,
    )


def client(path):
    try:
        conf = read_yaml(path)
        return conf["clusters"][0]["cluster"]["server"], conf["users"][0]["user"]["token"]
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError) as exc:
        die(f"error: cannot read the kubeconfig {path}: {exc}")


def call(server, token, method, path, body=None):
    request = urllib.request.Request(
        server + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", "")
        except ValueError:
            message = ""
        die(f"error: {message or exc}")
    except (urllib.error.URLError, OSError) as exc:
        die(f"error: the connection to the server {server} was refused ({exc})")


# -- the API service ----------------------------------------------------------------------------
def load_state():
    with open(STATE, encoding="utf-8") as handle:
        return json.load(handle)


def save_state(state):
    write(STATE, json.dumps(state, indent=1, sort_keys=True), 0o600)


class Api(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stdout.write("apiserver: " + (fmt % args) + "\n")
        sys.stdout.flush()

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self, code, message):
        self.reply(code, {"kind": "Status", "status": "Failure", "message": message, "code": code})

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def who(self, state):
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token and token == state["admin_token"]:
            return "admin"
        return next((f"node:{n}" for n, t in state["node_tokens"].items() if t == token), None)

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PATCH(self):
        self.route("PATCH")

    def do_DELETE(self):
        self.route("DELETE")

    def route(self, method):  # noqa: PLR0911 (one answer per route)
        state = load_state()
        path = self.path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "/version":
            major, minor = VERSION.split(".")[:2]
            return self.reply(200, {"major": major, "minor": minor, "gitVersion": f"v{VERSION}"})
        if method == "GET" and path == "/gpusim/cluster-info":
            return self.reply(200, {"ca": state["ca"], "server": state["server"]})
        if method == "POST" and path == "/gpusim/join":
            return self.join(state, self.body())
        who = self.who(state)
        if who is None:
            return self.fail(401, "Unauthorized")
        parts = path.split("/")
        if who.startswith("node:") and method == "POST" and parts[:4] == ["", "gpusim", "nodes", who[5:]]:
            node = state["nodes"][who[5:]]
            body = self.body()
            node["status"]["conditions"] = [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": stamp(now())}
            ]
            node["status"]["nodeInfo"] = body.get("nodeInfo", {})
            node["configz"] = body.get("configz", {})
            save_state(state)
            return self.reply(200, {})
        if who != "admin":
            return self.fail(403, f"{who} may not {method} {path}")
        if method == "POST" and path == "/gpusim/tokens":
            token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
            ttl = int(self.body().get("ttl_seconds", 86400))
            state["tokens"][token_id] = {"secret": secret, "expires": time.time() + ttl if ttl else None}
            save_state(state)
            return self.reply(201, {"token": f"{token_id}.{secret}"})
        if method == "DELETE" and path.startswith("/gpusim/tokens/"):
            token_id = path.rsplit("/", 1)[1]
            if state["tokens"].pop(token_id, None) is None:
                return self.fail(404, f'secrets "bootstrap-token-{token_id}" not found')
            save_state(state)
            return self.reply(200, {})
        if method == "GET" and path == "/gpusim/events":
            return self.reply(200, {"events": state.get("events", [])})
        if method == "GET" and path == "/gpusim/tokens":
            return self.reply(200, {"tokens": {k: v["expires"] for k, v in state["tokens"].items()}})
        if method == "GET" and path == "/api/v1/nodes":
            return self.reply(
                200,
                {"apiVersion": "v1", "kind": "NodeList", "items": [node_object(n) for n in state["nodes"].values()]},
            )
        if path.startswith("/api/v1/nodes/"):
            name = parts[4]
            if name not in state["nodes"]:
                return self.fail(404, f'nodes "{name}" not found')
            node = state["nodes"][name]
            if method == "GET" and parts[5:] == ["proxy", "configz"]:
                return self.reply(200, {"kubeletconfig": node.get("configz", {})})
            if method == "GET" and len(parts) == 5:
                return self.reply(200, node_object(node))
            if method == "PATCH" and len(parts) == 5:
                patch = self.body()
                meta = patch.get("metadata", {})
                for field in ("labels", "annotations"):
                    for key, value in (meta.get(field) or {}).items():
                        if value is None:
                            node["metadata"][field].pop(key, None)
                        else:
                            node["metadata"][field][key] = value
                if "unschedulable" in patch.get("spec", {}):
                    node["spec"]["unschedulable"] = bool(patch["spec"]["unschedulable"])
                # What was done to the node, in order, for the tests (the API server's audit log).
                state.setdefault("events", []).append({"node": name, "patch": patch, "at": stamp(now())})
                save_state(state)
                return self.reply(200, node_object(node))
        if method == "GET" and path == "/api/v1/pods":
            # kubectl drain lists the node's pods to evict them: no pod runs here, the listing is noted.
            query = self.path.partition("?")[2]
            node = query.partition("spec.nodeName=")[2].split("&")[0]
            if node:
                state.setdefault("events", []).append({"node": node, "evicted": [], "at": stamp(now())})
                save_state(state)
            return self.reply(200, {"apiVersion": "v1", "kind": "PodList", "items": []})
        return self.fail(404, f"the server could not find the requested resource ({method} {path})")

    def join(self, state, body):
        match = TOKEN.match(body.get("token", ""))
        entry = state["tokens"].get(match.group(1)) if match else None
        if not entry or entry["secret"] != match.group(2) or (entry["expires"] and entry["expires"] < time.time()):
            token_id = match.group(1) if match else "?"
            return self.fail(
                401,
                f'could not find a JWS signature in the cluster-info ConfigMap for token ID "{token_id}"',
            )
        name = body["name"]
        old = state["nodes"].get(name)
        if old and any(c["type"] == "Ready" and c["status"] == "True" for c in old["status"]["conditions"]):
            return self.fail(
                409,
                f'a Node with name "{name}" and status "Ready" already exists in the cluster. You must delete the '
                "existing Node or change the name of this new joining Node",
            )
        labels = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            **body.get("labels", {}),
        }
        state["nodes"][name] = {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": body.get("criSocket", "")},
                "creationTimestamp": stamp(now()),
            },
            "spec": {"taints": body.get("taints", []), "unschedulable": False},
            "status": {
                "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
                "nodeInfo": {},
            },
        }
        state["node_tokens"][name] = secrets.token_hex(16)
        save_state(state)
        return self.reply(201, {"token": state["node_tokens"][name], "kubelet": CLUSTER_KUBELET})


def node_object(node):
    return {"apiVersion": "v1", "kind": "Node", **{k: v for k, v in node.items() if k != "configz"}}


def apiserver():
    server = http.server.HTTPServer(("", PORT), Api)
    print(f"gpusim kube-apiserver {VERSION}: listening on :{PORT}", flush=True)
    server.serve_forever()


# -- kubeadm ------------------------------------------------------------------------------------
def kubeadm(args):
    if args[:1] == ["version"]:
        print(f"v{VERSION}" if "short" in args else f'kubeadm version: &version.Info{{GitVersion:"v{VERSION}"}}')
        return 0
    if args[:1] == ["init"]:
        return kubeadm_init()
    if args[:2] == ["token", "create"]:
        return kubeadm_token(args[2:])
    if args[:2] == ["token", "delete"]:
        return kubeadm_token_delete(args[2:])
    if args[:1] == ["join"]:
        return kubeadm_join(args[1:])
    if args[:1] == ["reset"]:
        die("kubeadm reset (gpusim stand-in): refused here; the tests prove no role ever runs it")
    die(f"kubeadm (gpusim stand-in): unknown command {' '.join(args)}")


def kubeadm_init():
    if os.path.exists(ADMIN_CONF):
        die(
            "[preflight] Some fatal errors occurred:\n\t[ERROR FileAvailable--etc-kubernetes-admin.conf]: "
            f"{ADMIN_CONF} already exists"
        )
    os.makedirs(PKI, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{PKI}/ca.key",
            "-out",
            f"{PKI}/ca.crt",
            "-subj",
            "/CN=kubernetes",
            "-days",
            "3650",
        ],
        check=True,
        capture_output=True,
    )
    os.chmod(f"{PKI}/ca.key", 0o600)
    with open(f"{PKI}/ca.crt", encoding="utf-8") as handle:
        ca = handle.read()
    server = f"http://{socket.gethostname()}:{PORT}"
    admin = secrets.token_hex(16)
    save_state({"ca": ca, "server": server, "admin_token": admin, "tokens": {}, "nodes": {}, "node_tokens": {}})
    write(ADMIN_CONF, kubeconfig(server, ca, "kubernetes-admin", admin), 0o600)
    subprocess.run(["systemctl", "enable", "--now", "gpusim-kube-apiserver.service"], check=True)
    for _attempt in range(50):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/version", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    print(f"Your Kubernetes control-plane has initialized successfully! (gpusim stand-in, {server})")
    return 0


def duration(text):
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text or "")
    if not text or not match:
        die(f'invalid argument "{text}" for "--ttl" flag: time: invalid duration "{text}"')
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def option(args, name, default=None):
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def kubeadm_token(args):
    server, token = client(option(args, "--kubeconfig", ADMIN_CONF))
    ttl = duration(option(args, "--ttl", "24h0m0s"))
    minted = call(server, token, "POST", "/gpusim/tokens", {"ttl_seconds": ttl})["token"]
    with open(f"{PKI}/ca.crt", encoding="utf-8") as handle:
        pin = ca_hash(handle.read())
    if "--print-join-command" in args:
        endpoint = server.split("://", 1)[1]
        print(f"kubeadm join {endpoint} --token {minted} --discovery-token-ca-cert-hash {pin} ")
    else:
        print(minted)
    return 0


def kubeadm_token_delete(args):
    """kubeadm token delete TOKEN-ID|TOKEN [--kubeconfig FILE], as kubeadm prints it."""
    names = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "--kubeconfig")]
    if not names:
        die('missing subcommand; "token delete" is missing token of form "[a-z0-9]{6}" or "[a-z0-9]{6}.[a-z0-9]{16}"')
    server, token = client(option(args, "--kubeconfig", ADMIN_CONF))
    for name in names:
        token_id = name.split(".", 1)[0]
        call(server, token, "DELETE", f"/gpusim/tokens/{token_id}")
        print(f'bootstrap token "{token_id}" deleted')
    return 0


def strict(value, fields, where, errors):
    if isinstance(fields, list):
        if not isinstance(value, list):
            errors.append(f"json: cannot unmarshal {type(value).__name__} into Go struct field {where} of type []")
            return
        for item in value:
            strict(item, fields[0], where, errors)
        return
    if not isinstance(value, dict):
        errors.append(f"json: cannot unmarshal {type(value).__name__} into Go struct field {where} of type object")
        return
    for key, inner in value.items():
        path = f"{where}.{key}" if where else key
        if key not in fields:
            errors.append(f'unknown field "{path}"')
        elif fields[key] is not None and inner is not None:
            strict(inner, fields[key], path, errors)


def preflight_error(name, text):
    die(
        f"error execution phase preflight: [preflight] Some fatal errors occurred:\n\t[ERROR {name}]: {text}\n"
        "[preflight] If you know what you are doing, you can make a check non-fatal with "
        "`--ignore-preflight-errors=...`"
    )


def kubeadm_join(args):
    path = option(args, "--config")
    if not path:
        die("kubeadm join (gpusim stand-in): pass --config with a JoinConfiguration")
    try:
        with open(path, encoding="utf-8") as handle:
            docs = [d for d in yaml.safe_load_all(handle) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        die(f"unable to read config from {path!r}: {exc}")
    joins = [d for d in docs if isinstance(d, dict) and d.get("kind") == "JoinConfiguration"]
    if len(joins) != 1:
        die(f"no JoinConfiguration kind was found in the YAML file {path}")
    config = joins[0]
    gvk = 'schema.GroupVersionKind{Group:"kubeadm.k8s.io", Version:"v1beta4", Kind:"JoinConfiguration"}'
    if config.get("apiVersion") != "kubeadm.k8s.io/v1beta4":
        die(
            f'no kind "JoinConfiguration" is registered for version "{config.get("apiVersion")}" (gpusim stand-in '
            "of kubeadm reads kubeadm.k8s.io/v1beta4)"
        )
    errors = []
    strict(config, JOIN_FIELDS, "", errors)
    if errors:
        die(f"error unmarshaling configuration {gvk}: strict decoding error: {', '.join(errors)}")
    discovery = config.get("discovery") or {}
    bootstrap = discovery.get("bootstrapToken") or {}
    if not bootstrap and not discovery.get("file"):
        die('discovery: Invalid value: "": bootstrapToken or file must be set')
    token = bootstrap.get("token") or discovery.get("tlsBootstrapToken") or ""
    if not TOKEN.match(token):
        die(
            f'discovery.bootstrapToken.token: Invalid value: "{token[:6]}...": the bootstrap token is not of the '
            'form "^([a-z0-9]{6})\\.([a-z0-9]{16})$"'
        )
    if not bootstrap.get("apiServerEndpoint"):
        die('discovery.bootstrapToken.apiServerEndpoint: Invalid value: "": the API server endpoint must be set')
    pins = bootstrap.get("caCertHashes") or []
    if not pins and not bootstrap.get("unsafeSkipCAVerification"):
        die(
            "discovery.bootstrapToken.caCertHashes: Invalid value: []: using token-based discovery without "
            "caCertHashes can be unsafe. Set unsafeSkipCAVerification as true in your kubeadm config file or pass "
            "--discovery-token-unsafe-skip-ca-verification flag to continue"
        )
    registration = config.get("nodeRegistration") or {}
    for taint in registration.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            die(f'nodeRegistration.taints.effect: Unsupported value: "{taint.get("effect")}"')
    name = registration.get("name") or socket.gethostname()
    cri = registration.get("criSocket") or "unix:///var/run/containerd/containerd.sock"
    if os.path.exists(KUBELET_CONF):
        preflight_error("FileAvailable--etc-kubernetes-kubelet.conf", f"{KUBELET_CONF} already exists")
    if not os.path.exists(cri.removeprefix("unix://")):
        preflight_error("CRI", f"container runtime is not running: no socket at {cri}")
    server = "http://" + bootstrap["apiServerEndpoint"]
    info = call(server, None, "GET", "/gpusim/cluster-info")
    found = ca_hash(info["ca"])
    if pins and found not in pins:
        die(
            f"error execution phase preflight: couldn't validate the identity of the API Server: cluster CA found "
            f'in cluster-info ConfigMap is invalid: none of the public keys "{found}" are pinned'
        )
    args_list = registration.get("kubeletExtraArgs") or []
    extra = {a["name"]: a.get("value", "") for a in args_list}
    labels = dict(kv.split("=", 1) for kv in extra.get("node-labels", "").split(",") if kv)
    answer = call(
        server,
        None,
        "POST",
        "/gpusim/join",
        {"token": token, "name": name, "labels": labels, "taints": registration.get("taints") or [], "criSocket": cri},
    )
    kubelet = dict(answer["kubelet"])
    patches = (config.get("patches") or {}).get("directory")
    applied = []
    if patches and os.path.isdir(patches):
        for entry in sorted(os.listdir(patches)):
            match = re.fullmatch(r"kubeletconfiguration[^+.]*(?:\+(strategic|merge|json))?\.(yaml|json)", entry)
            if not match:
                continue
            if match.group(1) == "json":
                die(f"[patches] {entry}: the gpusim stand-in applies merge and strategic patches only")
            kubelet = merge(kubelet, read_yaml(os.path.join(patches, entry)) or {})
            applied.append(entry)
    write(KUBELET_CONFIG, yaml.safe_dump(kubelet, sort_keys=True))
    flags = [f"--container-runtime-endpoint={cri}", f"--hostname-override={name}"]
    flags += [f"--{k}={v}" for k, v in extra.items()]
    if registration.get("taints"):
        flags.append(
            "--register-with-taints="
            + ",".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in registration["taints"])
        )
    write(FLAGS_ENV, f'KUBELET_KUBEADM_ARGS="{" ".join(flags)}"\n')
    write(KUBELET_CONF, kubeconfig(server, info["ca"], f"system:node:{name}", answer["token"]), 0o600)
    write(f"{PKI}/ca.crt", info["ca"])
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(
            json.dumps({"joined": name, "server": server, "labels": labels, "patches": applied, "at": stamp(now())})
            + "\n"
        )
    subprocess.run(["systemctl", "restart", "kubelet"], check=False)
    print(
        "This node has joined the cluster (gpusim stand-in):\n* Certificate signing request was sent to "
        "apiserver and a response was received.\n* The Kubelet was informed of the new secure connection details."
    )
    return 0


def merge(base, patch):
    out = dict(base)
    for key, value in patch.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# -- kubelet ------------------------------------------------------------------------------------
def kubelet(args):
    if "--version" in args:
        print(f"Kubernetes v{VERSION}")
        return 0
    path = option(args, "--config", KUBELET_CONFIG)
    if not os.path.exists(path):
        die(
            f'"command failed" err="failed to load kubelet config file, path: {path}, error: failed to load '
            f'Kubelet config file {path}, error failed to read kubelet config file "{path}", error: open {path}: '
            'no such file or directory"'
        )
    config = read_yaml(path) or {}
    labels = option(args, "--node-labels", "")
    bad = []
    for item in filter(None, labels.split(",")):
        key = item.split("=", 1)[0]
        prefix = key.rpartition("/")[0]
        restricted = prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io"))
        allowed = key in LABEL_SET or any(prefix == p or prefix.endswith("." + p) for p in LABEL_PREFIXES)
        if restricted and not allowed:
            bad.append(key)
    if bad:
        die(
            f"\"command failed\" err=\"failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels "
            f'specified with --node-labels: {bad}"'
        )
    endpoint = option(args, "--container-runtime-endpoint") or config.get("containerRuntimeEndpoint", "")
    sock = endpoint.removeprefix("unix://")
    runtime = subprocess.run(["ctr", "--address", sock, "version"], capture_output=True, text=True, check=False)
    if runtime.returncode != 0:
        die(
            f'"command failed" err="failed to run Kubelet: validate service connection: validate CRI v1 runtime API '
            f'for endpoint \\"{endpoint}\\": {runtime.stderr.strip()}"'
        )
    server_version = re.search(r"Server:\s*\n\s*Version:\s*(\S+)", runtime.stdout)
    server, token = client(option(args, "--kubeconfig", KUBELET_CONF))
    name = option(args, "--hostname-override") or socket.gethostname()
    info = {
        "kubeletVersion": f"v{VERSION}",
        "containerRuntimeVersion": f"containerd://{server_version.group(1) if server_version else 'unknown'}",
    }
    print(f"kubelet (gpusim stand-in) {VERSION}: node {name}, containerd at {endpoint}", flush=True)
    while True:
        call(server, token, "POST", f"/gpusim/nodes/{name}", {"nodeInfo": info, "configz": config})
        time.sleep(20)


# -- kubectl ------------------------------------------------------------------------------------
def kubectl(args):
    if args[:1] == ["version"]:
        print(
            json.dumps({"clientVersion": {"gitVersion": f"v{VERSION}"}})
            if "json" in " ".join(args)
            else f"Client Version: v{VERSION}"
        )
        return 0
    path = option(args, "--kubeconfig") or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    server, token = client(path)
    words, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--kubeconfig", "-o", "--output", "--raw", "--timeout", "--grace-period"):
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    if words[:1] == ["get"] and "--raw" in args:
        print(json.dumps(call(server, token, "GET", option(args, "--raw"))))
        return 0
    if words[:2] in (["get", "nodes"], ["get", "node"]):
        if len(words) > 2:
            answer = call(server, token, "GET", f"/api/v1/nodes/{words[2]}")
        else:
            answer = call(server, token, "GET", "/api/v1/nodes")
        if (option(args, "-o") or option(args, "--output")) == "json" or "-ojson" in args:
            print(json.dumps(answer, indent=2))
        else:
            for node in answer.get("items", [answer]):
                ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
                state = "Ready" if ready else "NotReady"
                if node["spec"]["unschedulable"]:
                    state += ",SchedulingDisabled"
                print(f"{node['metadata']['name']}  {state}")
        return 0
    if words[:1] in (["label"], ["annotate"]) and words[1:2] in (["node"], ["nodes"]):
        field = "labels" if words[0] == "label" else "annotations"
        changes = {}
        for item in words[3:]:
            if item.endswith("-"):
                changes[item[:-1]] = None
            else:
                key, _sep, value = item.partition("=")
                changes[key] = value
        current = call(server, token, "GET", f"/api/v1/nodes/{words[2]}")["metadata"][field]
        clash = [k for k, v in changes.items() if v is not None and k in current and current[k] != v]
        if clash and "--overwrite" not in args:
            die(f"error: '{clash[0]}' already has a value ({current[clash[0]]}), and --overwrite is false")
        call(server, token, "PATCH", f"/api/v1/nodes/{words[2]}", {"metadata": {field: changes}})
        print(f"node/{words[2]} {'labeled' if field == 'labels' else 'annotated'}")
        return 0
    if words[:1] in (["cordon"], ["uncordon"], ["drain"]):
        name = words[1]
        call(server, token, "PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": words[0] != "uncordon"}})
        print(f"node/{name} {'uncordoned' if words[0] == 'uncordon' else 'cordoned'}")
        if words[0] == "drain":
            pods = call(server, token, "GET", f"/api/v1/pods?fieldSelector=spec.nodeName={name}")["items"]
            print(f"node/{name} drained ({len(pods)} pods evicted)")
        return 0
    die(f"kubectl (gpusim stand-in): unsupported command {' '.join(args)}")


def crictl(args):
    if args[:1] in (["--version"], ["-v"]):
        print(f"crictl version v{VERSION.rsplit('.', 1)[0]}.0")
        return 0
    sock = (option(args, "--runtime-endpoint") or "unix:///run/containerd/containerd.sock").removeprefix("unix://")
    done = subprocess.run(["ctr", "--address", sock, "version"], check=False)
    return done.returncode


def main():
    name = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if args[:1] == ["__apiserver"]:
        return apiserver()
    command = {"kubeadm": kubeadm, "kubelet": kubelet, "kubectl": kubectl, "crictl": crictl}.get(name)
    if command is None:
        die(f"gpusim kube stand-in: called as {name}")
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
