#!/usr/bin/env python3
"""Reads a magpie trace (Chrome trace-event JSON from magpie::trace::write_chrome_json) and
draws it as a PNG timeline, or prints a summary — no browser needed.

    tools/trace_view.py frame.json -o frame.png        # thread lanes over time
    tools/trace_view.py frame.json --summary           # totals, busy %, waits, critical path

The timeline has one lane per thread (named as in the trace), tasks coloured by name,
nested slices drawn inside their parents, waits hatched and parking in light grey. The
summary gives per-name totals, how busy each thread was (time inside its outermost
slices, parking and waiting excluded), the longest waits, and the critical path: the chain
of tasks along recorded prerequisite and nested edges whose run times add up to the most.
The JSON is read with the json module; matplotlib is needed only for the PNG.
"""
import argparse
import collections
import json
import sys

IDLE = {"parked", "standby", "wait"}


def load(path):
    """Returns (thread names, slices, flows). A slice is a dict with tid, name, cat,
    start, end, depth and args; flows map an id to its (start event, finish event)."""
    with open(path) as file:
        events = json.load(file)["traceEvents"]
    names = {}
    slices = []
    open_slices = collections.defaultdict(list)
    flows = collections.defaultdict(dict)
    instants = []
    for event in events:
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "thread_name":
            names[event["tid"]] = event["args"]["name"]
        elif phase == "B":
            stack = open_slices[event["tid"]]
            stack.append({"tid": event["tid"], "name": event.get("name", ""), "cat": event.get("cat", ""),
                          "start": event["ts"], "depth": len(stack), "args": dict(event.get("args", {}))})
        elif phase == "E":
            stack = open_slices[event["tid"]]
            if stack:
                done = stack.pop()
                done["end"] = event["ts"]
                done["args"].update(event.get("args", {}))
                slices.append(done)
        elif phase in ("s", "f"):
            flows[event["id"]][phase] = event
        elif phase == "i":
            instants.append(event)
    return names, slices, flows, instants


def task_nodes(slices, flows, instants):
    """The recorded dependency graph: {task id: duration} and [(before, after)]."""
    at = {}
    duration = collections.defaultdict(float)
    for piece in slices:
        if piece["cat"] == "task" and "id" in piece["args"]:
            at[(piece["tid"], piece["start"])] = piece["args"]["id"]
            duration[piece["args"]["id"]] += piece["end"] - piece["start"]
    for mark in instants:
        if mark.get("name", "").startswith("complete ") and "id" in mark.get("args", {}):
            at.setdefault((mark["tid"], mark["ts"]), mark["args"]["id"])
            duration.setdefault(mark["args"]["id"], 0.0)
    edges = []
    for ends in flows.values():
        if "s" in ends and "f" in ends and ends["s"].get("name") in ("prerequisite", "nested"):
            before = at.get((ends["s"]["tid"], ends["s"]["ts"]))
            after = at.get((ends["f"]["tid"], ends["f"]["ts"]))
            if before is not None and after is not None and before != after:
                edges.append((before, after))
    return duration, edges


def critical_path(duration, edges):
    """The path through the DAG whose tasks' run times add up to the most."""
    successors = collections.defaultdict(list)
    incoming = collections.Counter()
    for before, after in edges:
        successors[before].append(after)
        incoming[after] += 1
    best = {node: duration[node] for node in duration}
    previous = {}
    ready = [node for node in duration if incoming[node] == 0]
    while ready:
        node = ready.pop()
        for after in successors[node]:
            if best[node] + duration[after] > best[after]:
                best[after] = best[node] + duration[after]
                previous[after] = node
            incoming[after] -= 1
            if incoming[after] == 0:
                ready.append(after)
    if not best:
        return [], 0.0
    end = max(best, key=best.get)
    path = [end]
    while path[-1] in previous:
        path.append(previous[path[-1]])
    return list(reversed(path)), best[end]


def summary(names, slices, flows, instants):
    if not slices:
        print("no slices in the trace")
        return
    begin = min(piece["start"] for piece in slices)
    finish = max(piece["end"] for piece in slices)
    span = max(finish - begin, 1e-9)
    print(f"trace: {span / 1000:.3f} ms, {len(slices)} slices on {len(names)} threads")

    print("\nper name                          count     total us      mean us")
    totals = collections.defaultdict(lambda: [0, 0.0])
    for piece in slices:
        totals[piece["name"]][0] += 1
        totals[piece["name"]][1] += piece["end"] - piece["start"]
    for name, (count, total) in sorted(totals.items(), key=lambda item: -item[1][1])[:20]:
        print(f"  {name[:30]:<30} {count:>7} {total:>12.1f} {total / count:>12.2f}")

    print("\nbusy per thread (outermost slices that are not parking, standby or waiting)")
    busy = collections.defaultdict(float)
    for piece in slices:
        if piece["depth"] == 0 and piece["name"] not in IDLE:
            busy[piece["tid"]] += piece["end"] - piece["start"]
    for tid in sorted(names):
        print(f"  {names[tid][:30]:<30} {100 * busy[tid] / span:6.1f} %")

    waits = sorted((piece for piece in slices if piece["name"] == "wait"), key=lambda piece: piece["start"] - piece["end"])
    print("\nlongest waits")
    for piece in waits[:10]:
        print(f"  {piece['end'] - piece['start']:>10.1f} us  {names.get(piece['tid'], piece['tid'])!s:<24} "
              f"for '{piece['args'].get('task', '?')}'")
    if not waits:
        print("  none")

    duration, edges = task_nodes(slices, flows, instants)
    path, length = critical_path(duration, edges)
    label = {}
    for piece in slices:
        if "id" in piece["args"]:
            label.setdefault(piece["args"]["id"], piece["name"])
    print(f"\ncritical path: {len(path)} tasks, {length:.1f} us of running")
    for node in path[:30]:
        print(f"  {label.get(node, 'task ' + str(node))[:40]:<40} {duration[node]:>10.1f} us")
    if len(path) > 30:
        print(f"  ... {len(path) - 30} more")


def draw(names, slices, output, window=None):
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    if window is not None:  # [from, to] in ms since the first slice
        first = min((piece["start"] for piece in slices), default=0.0)
        low, high = first + window[0] * 1000.0, first + window[1] * 1000.0
        slices = [dict(piece, start=max(piece["start"], low), end=min(piece["end"], high))
                  for piece in slices if piece["end"] >= low and piece["start"] <= high]
    lanes = sorted(names) or sorted({piece["tid"] for piece in slices})
    row = {tid: index for index, tid in enumerate(lanes)}
    begin = min((piece["start"] for piece in slices), default=0.0)
    palette = plt.get_cmap("tab20")
    colours = {}
    figure, axis = plt.subplots(figsize=(12, 0.9 + 0.55 * len(lanes)))
    # One broken_barh per lane, depth and style: a trace has tens of thousands of slices.
    groups = collections.defaultdict(list)
    for piece in slices:
        if piece["tid"] not in row:
            continue
        style = piece["name"] if piece["name"] in ("parked", "standby", "wait") else "task:" + piece["name"]
        if style.startswith("task:"):
            colours.setdefault(piece["name"], palette(len(colours) % 20))
        span = ((piece["start"] - begin) / 1000.0, max((piece["end"] - piece["start"]) / 1000.0, 1e-6))
        groups[(piece["tid"], min(piece["depth"], 3), style)].append(span)
    for (tid, depth, style), spans in sorted(groups.items(), key=lambda item: item[0][1]):  # outer slices first
        height = 0.8 - 0.18 * depth
        y = row[tid] - height / 2
        if style in ("parked", "standby"):
            axis.broken_barh(spans, (y, height), facecolors="#dddddd", edgecolor="none")
        elif style == "wait":
            axis.broken_barh(spans, (y, height), facecolors="none", edgecolor="#888888", hatch="///", linewidth=0.3)
        else:
            axis.broken_barh(spans, (y, height), facecolors=colours[style[5:]], edgecolor="none")
    axis.set_yticks(range(len(lanes)))
    axis.set_yticklabels([names.get(tid, f"thread {tid}") for tid in lanes], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("ms")
    axis.grid(axis="x", alpha=0.3)
    time_of = collections.Counter()
    for piece in slices:
        time_of[piece["name"]] += piece["end"] - piece["start"]
    shown = sorted(colours, key=lambda name: -time_of[name])[:12]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in shown]
    handles += [plt.Rectangle((0, 0), 1, 1, facecolor="#dddddd"), plt.Rectangle((0, 0), 1, 1, facecolor="none",
                                                                                   hatch="///", edgecolor="#888888")]
    figure.legend(handles, shown + ["parked / standby", "wait"], fontsize=7, ncol=7, loc="lower center", frameon=False)
    figure.tight_layout(rect=(0, 0.1 if len(lanes) < 6 else 0.05, 1, 1))
    figure.savefig(output, dpi=100)
    print(f"timeline: {output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="Chrome trace-event JSON written by magpie::trace::write_chrome_json")
    parser.add_argument("-o", "--output", help="PNG to write (default: the trace's name with .png)")
    parser.add_argument("--summary", action="store_true", help="print the summary instead of drawing")
    parser.add_argument("--window", nargs=2, type=float, metavar=("FROM_MS", "TO_MS"),
                        help="draw only this stretch, in ms from the first slice")
    args = parser.parse_args()
    names, slices, flows, instants = load(args.trace)
    if args.summary:
        summary(names, slices, flows, instants)
        return 0
    draw(names, slices, args.output or args.trace.rsplit(".", 1)[0] + ".png", args.window)
    return 0


if __name__ == "__main__":
    sys.exit(main())
