# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation report: one self-contained HTML page (inline CSS and SVG, nothing fetched) and
the data behind it.

Plots are drawn by matplotlib (SVG, text kept as text) and the topology pictures laid out with
networkx and drawn by matplotlib; both are imported only here, on the controller, and a report
without them still has every table (the page says what is missing). The page is a Jinja2
template, autoescaped: nothing a node printed can inject markup.
"""

from __future__ import annotations

import io
import re

SIZE_LABELS = ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))
EDGE_STYLE = {
    "NVLink": {"color": "#2e7d32", "width": 2.5},
    "PCIe switch": {"color": "#1565c0", "width": 1.8},
    "host bridge": {"color": "#6a1b9a", "width": 1.2},
    "NUMA": {"color": "#9e9e9e", "width": 1.0},
}
NODE_COLOR = {"GPU": "#76b900", "NVSwitch": "#ffb300", "NIC": "#42a5f5", "NUMA": "#e0e0e0"}


def missing_libraries():
    """The plotting libraries the controller lacks (empty when the pictures can be drawn)."""
    missing = []
    for name in ("matplotlib", "networkx"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    return missing


def _size(value):
    for unit, label in SIZE_LABELS:
        if value >= unit and value % unit == 0:
            return f"{value // unit}{label}"
    return str(value)


def _svg(figure):
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional, controller only

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:]


def _pyplot():
    import matplotlib  # noqa: PLC0415 - optional, controller only

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, small
    matplotlib.rcParams["svg.hashsalt"] = "gpuops-validate"  # the same data draws the same file
    # Host names and subjects are text, never mathtext: "gpu$a^$" used to end in a ValueError.
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional, controller only

    return plt


def bandwidth_svg(runs, title):
    """Bus bandwidth against message size, one line per run, each run's floor dashed; None without a
    point to draw (no figure is made: at a hundred nodes that saves seconds)."""
    lines = []
    for run in runs:
        points = [(p["size"], p["busbw"]) for p in run.get("series") or [] if p.get("busbw") is not None]
        if points:
            lines.append((run, points))
    if not lines:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7.5, 3.6))
    for run, points in lines:
        sizes, values = zip(*points)
        line = axes.plot(sizes, values, marker="o", markersize=3, label=run["subject"])[0]
        floor = run.get("floor")
        if floor is not None:
            axes.axhline(floor, linestyle="--", linewidth=1, color=line.get_color(), alpha=0.7)
    axes.set_xscale("log", base=2)
    ticks = sorted({p["size"] for run in runs for p in run.get("series") or []})
    if len(ticks) > 12:
        ticks = ticks[:: max(1, len(ticks) // 10)]
    axes.set_xticks(ticks)
    axes.set_xticklabels([_size(t) for t in ticks], rotation=45, fontsize=7)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


def topology_graph(nvidia_gpu, compute_ports=None):
    """Nodes (GPUs, NVSwitches, NICs, NUMA nodes) and typed edges of one node, from its facts."""
    nvidia_gpu = nvidia_gpu or {}
    topology = nvidia_gpu.get("topology") or {}
    rows = topology.get("links") or {}
    # gpu_facts: one entry per GPU with its NUMA node; parse_topo's shape has gpus and numa_affinity.
    gpus = [f"GPU{gpu['index']}" for gpu in nvidia_gpu.get("gpus") or [] if gpu.get("index") is not None]
    numa = {f"GPU{gpu['index']}": gpu.get("numa_node") for gpu in nvidia_gpu.get("gpus") or []}
    if not gpus:
        gpus = list(topology.get("gpus") or [])
        numa = topology.get("numa_affinity") or {}
    fabric_nics = {p["hca"] for p in compute_ports or []}
    nics = [n for n in topology.get("nics") or [] if not fabric_nics or n in fabric_nics]
    nodes, edges = [], []
    for gpu in gpus:
        nodes.append({"id": gpu, "kind": "GPU"})
    switches = int(nvidia_gpu.get("nvswitch_count") or 0)
    for index in range(switches):
        nodes.append({"id": f"NVSwitch{index}", "kind": "NVSwitch"})
    for nic in nics:
        nodes.append({"id": nic, "kind": "NIC"})
    numa_nodes = sorted({value for value in numa.values() if value is not None})
    for value in numa_nodes:
        nodes.append({"id": f"NUMA{value}", "kind": "NUMA"})
    for gpu in gpus:
        if numa.get(gpu) is not None:
            edges.append((gpu, f"NUMA{numa[gpu]}", "NUMA"))
        if switches:
            for index in range(switches):
                edges.append((gpu, f"NVSwitch{index}", "NVLink"))
        else:
            for other, cell in (rows.get(gpu) or {}).items():
                if other in gpus and cell.startswith("NV") and gpu < other:
                    edges.append((gpu, other, "NVLink", cell))
        for nic in nics:
            cell = (rows.get(gpu) or {}).get(nic)
            if cell in ("PIX", "PXB"):
                edges.append((gpu, nic, "PCIe switch"))
            elif cell == "PHB":
                edges.append((gpu, nic, "host bridge"))
    order = ("PIX", "PXB", "PHB", "NODE", "SYS")
    for nic in nics:
        if any(edge[1] == nic for edge in edges) or not gpus:
            continue
        # A NIC behind no GPU's switch hangs off the NUMA node of the GPU nearest to it.
        distance = {g: order.index(c) if (c := (rows.get(g) or {}).get(nic)) in order else len(order) for g in gpus}
        closest = min(gpus, key=lambda g: distance[g])
        if numa.get(closest) is not None:
            edges.append((nic, f"NUMA{numa[closest]}", "NUMA"))
    return nodes, edges


def topology_svg(host, nvidia_gpu, compute_ports=None):
    """The node's topology picture: NVSwitches on top, GPUs, then NICs, NUMA nodes at the bottom."""
    import networkx as nx  # noqa: PLC0415 - optional, controller only
    from matplotlib.lines import Line2D  # noqa: PLC0415 - optional, controller only

    plt = _pyplot()
    nodes, edges = topology_graph(nvidia_gpu, compute_ports)
    if not nodes:
        return None
    graph = nx.Graph()
    for node in nodes:
        graph.add_node(
            node["id"], kind=node["kind"], layer={"NVSwitch": 0, "GPU": 1, "NIC": 2, "NUMA": 3}[node["kind"]]
        )
    for a, b, kind, *cell in edges:
        graph.add_edge(a, b, kind=kind, cell=cell[0] if cell else "")
    layout = nx.multipartite_layout(graph, subset_key="layer", align="horizontal", scale=1.0)
    for node, (x, y) in list(layout.items()):
        layout[node] = (x, -y)
    # Order each row by name so GPU0..7 and mlx5_0..11 read left to right.
    for layer in range(4):
        names = sorted(
            (n for n in graph if graph.nodes[n]["layer"] == layer),
            key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)],
        )
        xs = sorted(layout[n][0] for n in names)
        for name, x in zip(names, xs):
            layout[name] = (x, layout[name][1])
    widest = max(sum(1 for n in graph if graph.nodes[n]["layer"] == layer) for layer in range(4))
    figure, axes = plt.subplots(figsize=(max(6.0, 0.75 * widest), 3.8))
    for kind, style in EDGE_STYLE.items():
        chosen = [(a, b) for a, b, data in graph.edges(data=True) if data["kind"] == kind]
        # GPU-to-GPU NVLinks (no switch) join nodes of one row: arcs, labelled with their NV# cell.
        peers = [(a, b) for a, b in chosen if graph.nodes[a]["kind"] == graph.nodes[b]["kind"] == "GPU"]
        straight = [edge for edge in chosen if edge not in peers]
        common = {"edge_color": style["color"], "width": style["width"], "ax": axes, "alpha": 0.8}
        if straight:
            nx.draw_networkx_edges(graph, layout, edgelist=straight, label=kind, **common)
        if peers:
            nx.draw_networkx_edges(
                graph,
                layout,
                edgelist=peers,
                arrows=True,
                arrowstyle="-",
                node_size=1100,
                connectionstyle="arc3,rad=0.35",
                label=None if straight else kind,
                **common,
            )
            nx.draw_networkx_edge_labels(
                graph,
                layout,
                edge_labels={e: graph.edges[e]["cell"] for e in peers},
                font_size=5,
                ax=axes,
                connectionstyle="arc3,rad=0.35",
            )
    for kind, color in NODE_COLOR.items():
        chosen = [n for n in graph if graph.nodes[n]["kind"] == kind]
        if chosen:
            nx.draw_networkx_nodes(
                graph,
                layout,
                nodelist=chosen,
                node_color=color,
                node_size=1100,
                node_shape="s",
                ax=axes,
                edgecolors="#333333",
                linewidths=0.6,
            )
    labels = {n: n.replace("NVSwitch", "NVSw\n").replace("mlx5_", "mlx5\n_") for n in graph}
    nx.draw_networkx_labels(graph, layout, labels=labels, font_size=6, ax=axes)
    axes.set_title(f"{host}: GPUs, NVSwitches, compute NICs and NUMA nodes", fontsize=9)
    present = {data["kind"] for _a, _b, data in graph.edges(data=True)}
    handles = [
        Line2D([0], [0], color=s["color"], lw=s["width"], label=k) for k, s in EDGE_STYLE.items() if k in present
    ]
    axes.legend(handles=handles, fontsize=7, loc="lower right", frameon=False)
    axes.axis("off")
    return _svg(figure)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>gpuops validation: {{ report.verdict | upper }} ({{ report.generated }})</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.4em} h2{font-size:1.15em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;width:100%;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .45em;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.v{font-weight:600;text-transform:uppercase;white-space:nowrap}
.pass{color:#1b5e20} .fail{color:#b71c1c;background:#ffebee} .warn{color:#e65100} .skip{color:#757575}
.badge{display:inline-block;padding:.1em .5em;border-radius:.3em;color:#fff}
.badge.pass{background:#2e7d32;color:#fff} .badge.fail{background:#c62828;color:#fff}
.badge.warn{background:#ef6c00;color:#fff} .badge.skip{background:#9e9e9e;color:#fff}
.figs{display:flex;flex-wrap:wrap;gap:1em} .figs div{flex:1 1 480px} svg{max-width:100%;height:auto}
.note{color:#555;font-size:.85em}
</style></head><body>
<h1>GPU cluster validation <span class="badge {{ report.verdict }}">{{ report.verdict }}</span></h1>
<p class="note">Generated {{ report.generated }}; mode <b>{{ report.mode }}</b>; {{ report.nodes | length }} node(s)
{%- if report.earlier %}, {{ report.earlier }} of them from earlier runs (not in this one; each with its date)
{%- endif %}.
Every expected value comes from the node's detected hardware or a threshold named in the reason.</p>
{% if report.missing_libraries %}<p class="note">No plots or topology pictures: the controller lacks
{{ report.missing_libraries | join(', ') }} (pip install {{ report.missing_libraries | join(' ') }}).</p>{% endif %}
<table><tr><th>node</th><th>verdict</th><th>failed checks</th><th>action</th></tr>
{% for host, node in report.nodes | dictsort %}<tr><td><a href="#node-{{ host }}">{{ host }}</a></td>
<td class="v {{ node.verdict }}">{{ node.verdict }}</td>
<td>{{ node.checks | selectattr('verdict', 'eq', 'fail') | map(attribute='check') | unique | join(', ') }}</td>
<td>{{ report.actions.get(host, '') }}</td></tr>{% endfor %}</table>
{% if report.repair and (report.repair.nodes or report.repair.budget) %}<h2 id="repair">Repair (gpuops-health)</h2>
<p class="note">{% if report.repair.budget %}Out by automation now: {{ report.repair.budget.out | length }} of
{{ report.repair.budget.fleet }} nodes (the blast-radius budget: {{ report.repair.budget.limit }}).
{% endif %}Median repair, fault to back in service:
{{ '%d s' % report.repair.median_repair_s if report.repair.median_repair_s is not none else 'none yet' }}{%
if report.repair.median_repair_s_by_class %} ({% for cls, seconds in report.repair.median_repair_s_by_class | dictsort
%}{{ cls }} {{ '%d s' % seconds }}{{ ', ' if not loop.last }}{% endfor %}){% endif %}.
In quarantine: {{ report.repair.quarantined | join(', ') or 'none' }}.</p>
<table><tr><th>node</th><th>owes</th><th>drained since</th><th>last repair</th><th>evidence of its last drain</th></tr>
{% for host, row in report.repair.nodes | dictsort %}<tr><td>{{ host }}</td>
<td>{{ row.outstanding | join(', ') or row.note | default('nothing') }}</td><td>{{ row.drained_since or '' }}</td>
<td>{{ ('%d s (%s)' % (row.last_repair_s, row.last_repair_class)) if row.last_repair_s is not none else '' }}</td>
<td>{{ row.evidence | default('', true) }}</td></tr>{% endfor %}</table>{% endif %}
{% if report.cluster.checks or report.cluster.nccl %}<h2 id="cluster">Across nodes</h2>
{% if report.cluster.nccl_svg %}<div class="figs"><div>{{ report.cluster.nccl_svg | safe }}</div></div>{% endif %}
{{ checks_table(report.cluster.checks) }}{% endif %}
{% for host, node in report.nodes | dictsort %}
<h2 id="node-{{ host }}">{{ host }} <span class="badge {{ node.verdict }}">{{ node.verdict }}</span></h2>
<p class="note">{{ node.summary }}</p>
<div class="figs">{% if node.nccl_svg %}<div>{{ node.nccl_svg | safe }}</div>{% endif %}
{% if node.topology_svg %}<div>{{ node.topology_svg | safe }}</div>{% endif %}</div>
{{ checks_table(node.checks) }}
{% endfor %}
</body></html>
"""

_CHECKS = """<table><tr><th>check</th><th>subject</th><th>expected</th><th>measured</th><th>verdict</th>
<th>reason</th></tr>{% for r in records %}<tr class="{{ r.verdict }}"><td>{{ r.check }}</td><td>{{ r.subject }}</td>
<td>{{ r.expected if r.expected is not none else '' }}</td><td>{{ r.measured if r.measured is not none else '' }}</td>
<td class="v {{ r.verdict }}">{{ r.verdict }}</td><td>{{ r.reason }}</td></tr>{% endfor %}</table>"""


def render_html(report):
    """The page for ``report`` (the JSON document the validation_report module writes)."""
    from jinja2 import Environment  # noqa: PLC0415 - optional, controller only
    from markupsafe import Markup  # noqa: PLC0415 - optional, controller only

    environment = Environment(autoescape=True)
    checks = environment.from_string(_CHECKS)

    def checks_table(records):
        return Markup(checks.render(records=records))

    return environment.from_string(_TEMPLATE).render(report=report, checks_table=checks_table)
