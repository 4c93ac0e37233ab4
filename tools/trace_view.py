#!/usr/bin/env python3
"""Reads a magpie trace (Chrome trace-event JSON from magpie::trace::write_chrome_json) and
draws it as a PNG timeline, or prints a summary — no browser needed.

    tools/trace_view.py frame.json -o frame.png        # thread lanes over time
    tools/trace_view.py frame.json --summary           # totals, busy %, waits, critical path
    tools/trace_view.py --self-test                    # checks this script (no trace needed)

The timeline has one lane per thread (named as in the trace), tasks coloured by name (a
name keeps its colour from one render to the next: it is chosen by a hash of the name, and
names in the legend never share one), slices at least two pixels wide however short,
nested slices drawn inside their parents, waits hatched and parking in light grey. The
summary gives per-name totals, how busy each thread was (time inside its outermost
slices, parking and waiting excluded), the longest waits, and the critical path: the chain
of tasks along recorded prerequisite and nested edges whose run times add up to the most.
The JSON is read with the json module; matplotlib is needed only for the PNG.
"""
import argparse
import collections
import json
import os
import sys
import tempfile
import zlib

IDLE = {"parked", "standby", "wait"}

# PALETTE holds clearly different colours (none grey: grey is parking and waiting), so that
# two names in the legend are never told apart by a shade alone.
PALETTE = ["#0067a5", "#be0032", "#008856", "#f38400", "#875692", "#f3c300", "#a1caf1",
           "#e68fac", "#882d17", "#8db600", "#2b3d26", "#c2b280", "#b3446c", "#f99379"]
LEGEND_NAMES = 12  # at most len(PALETTE): each gets an entry of its own
MIN_SLICE_PIXELS = 2.0
MATPLOTLIB_MISSING = ("trace_view.py: drawing needs matplotlib, which this Python lacks.\n"
                      "  Debian/Ubuntu: apt-get install python3-matplotlib   elsewhere: pip install matplotlib\n"
                      "  (--summary needs nothing more than Python)")


def plural(count, noun):
    """'1 task', '2 tasks'."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def preferred_colour(name):
    """The palette entry a name gets when nothing else shown claims it: a hash of the name,
    the same in every run (Python's own str hash is salted per process)."""
    return zlib.crc32(name.encode("utf-8")) % len(PALETTE)


def assign_colours(names, legend):
    """{name: colour}. Every name gets its preferred entry, except that the names in
    `legend` get distinct entries: one whose entry another legend name took first (in
    sorted order) moves to the next free one."""
    colours = {name: PALETTE[preferred_colour(name)] for name in names}
    taken = set()
    for name in sorted(legend):
        index = preferred_colour(name)
        while index in taken and len(taken) < len(PALETTE):
            index = (index + 1) % len(PALETTE)
        taken.add(index)
        colours[name] = PALETTE[index]
    return colours


def widened(spans, minimum):
    """Spans (start, width) with every width at least `minimum`."""
    return [(start, max(width, minimum)) for start, width in spans]


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
    print(f"trace: {span / 1000:.3f} ms, {plural(len(slices), 'slice')} on {plural(len(names), 'thread')}")

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
    print(f"\ncritical path: {plural(len(path), 'task')}, {length:.1f} us of running")
    for node in path[:30]:
        print(f"  {label.get(node, 'task ' + str(node))[:40]:<40} {duration[node]:>10.1f} us")
    if len(path) > 30:
        print(f"  ... {len(path) - 30} more")


def draw(names, slices, output, window=None):
    """Writes the timeline as a PNG; returns 0, or 2 when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # headless
        import matplotlib.pyplot as plt
    except ImportError:
        print(MATPLOTLIB_MISSING, file=sys.stderr)
        return 2

    if window is not None:  # [from, to] in ms since the first slice
        first = min((piece["start"] for piece in slices), default=0.0)
        low, high = first + window[0] * 1000.0, first + window[1] * 1000.0
        slices = [dict(piece, start=max(piece["start"], low), end=min(piece["end"], high))
                  for piece in slices if piece["end"] >= low and piece["start"] <= high]
    lanes = sorted(names) or sorted({piece["tid"] for piece in slices})
    row = {tid: index for index, tid in enumerate(lanes)}
    begin = min((piece["start"] for piece in slices), default=0.0)
    finish = max((piece["end"] for piece in slices), default=begin)
    time_of = collections.Counter()
    for piece in slices:
        if piece["name"] not in IDLE:
            time_of[piece["name"]] += piece["end"] - piece["start"]
    shown = sorted(time_of, key=lambda name: (-time_of[name], name))[:LEGEND_NAMES]
    colours = assign_colours(time_of, shown)
    figure, axis = plt.subplots(figsize=(12, 0.9 + 0.55 * len(lanes)), dpi=100)
    span_ms = max((finish - begin) / 1000.0, 1e-6)
    axis.set_xlim(0, span_ms)
    axis.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
    axis.set_yticks(range(len(lanes)))
    axis.set_yticklabels([names.get(tid, f"thread {tid}") for tid in lanes], fontsize=8)
    axis.set_xlabel("ms")
    axis.grid(axis="x", alpha=0.3)
    layout = (0, 0.1 if len(lanes) < 6 else 0.05, 1, 1)
    figure.tight_layout(rect=layout)  # before measuring the plot's width in pixels
    plot_pixels = axis.get_position().width * figure.get_figwidth() * figure.dpi
    min_width_ms = MIN_SLICE_PIXELS * span_ms / max(plot_pixels, 1.0)
    # One broken_barh per lane, depth and style: a trace has tens of thousands of slices.
    groups = collections.defaultdict(list)
    for piece in slices:
        if piece["tid"] not in row:
            continue
        style = piece["name"] if piece["name"] in IDLE else "task:" + piece["name"]
        span = ((piece["start"] - begin) / 1000.0, (piece["end"] - piece["start"]) / 1000.0)
        groups[(piece["tid"], min(piece["depth"], 3), style)].append(span)
    for (tid, depth, style), spans in sorted(groups.items(), key=lambda item: item[0][1]):  # outer slices first
        spans = widened(spans, min_width_ms)  # a 1 us slice in a 20 ms view would be under a pixel
        height = 0.8 - 0.18 * depth
        y = row[tid] - height / 2
        if style in ("parked", "standby"):
            axis.broken_barh(spans, (y, height), facecolors="#dddddd", edgecolor="none")
        elif style == "wait":
            axis.broken_barh(spans, (y, height), facecolors="none", edgecolor="#888888", hatch="///", linewidth=0.3)
        else:
            axis.broken_barh(spans, (y, height), facecolors=colours[style[5:]], edgecolor="none")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in shown]
    handles += [plt.Rectangle((0, 0), 1, 1, facecolor="#dddddd"), plt.Rectangle((0, 0), 1, 1, facecolor="none",
                                                                                   hatch="///", edgecolor="#888888")]
    figure.legend(handles, shown + ["parked / standby", "wait"], fontsize=7, ncol=7, loc="lower center", frameon=False)
    figure.savefig(output, dpi=100)
    plt.close(figure)
    print(f"timeline: {output}")
    return 0


def synthetic_trace(folder, name, pieces, flows=()):
    """Writes a small trace: pieces are (tid, name, start us, end us, task id or None),
    flows (name, from tid, at us, to tid, at us). Returns its path."""
    events = [{"ph": "M", "name": "thread_name", "tid": tid, "pid": 1, "args": {"name": f"lane {tid}"}}
              for tid in sorted({piece[0] for piece in pieces})]
    for tid, slice_name, start, end, task_id in pieces:
        args = {"id": task_id} if task_id is not None else {}
        events.append({"ph": "B", "name": slice_name, "cat": "task" if task_id is not None else "user",
                       "tid": tid, "pid": 1, "ts": start, "args": args})
        events.append({"ph": "E", "tid": tid, "pid": 1, "ts": end})
    for number, (flow_name, from_tid, from_ts, to_tid, to_ts) in enumerate(flows):
        events.append({"ph": "s", "name": flow_name, "id": number, "tid": from_tid, "pid": 1, "ts": from_ts})
        events.append({"ph": "f", "name": flow_name, "id": number, "tid": to_tid, "pid": 1, "ts": to_ts})
    path = os.path.join(folder, name)
    with open(path, "w") as file:
        json.dump({"traceEvents": events}, file)
    return path


def self_test():
    """Checks the counts' wording, the colours, the minimum width and the message for a
    missing matplotlib; draws a PNG too where matplotlib is installed. Returns 0 or 1."""
    import contextlib
    import io

    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)

    check(plural(1, "task") == "1 task" and plural(2, "task") == "2 tasks" and plural(0, "task") == "0 tasks",
          "plural")
    # One colour per name whatever else is in the trace: the hash, not the order of appearance.
    alone = assign_colours(["simulate"], [])["simulate"]
    crowded = assign_colours([f"task {i}" for i in range(30)] + ["simulate"], [])["simulate"]
    check(alone == crowded == PALETTE[zlib.crc32(b"simulate") % len(PALETTE)], "a name's colour depends on the others")
    # Legend names that hash alike still get distinct entries.
    same_entry = [name for name in (f"task {i}" for i in range(2000)) if preferred_colour(name) == 0][:LEGEND_NAMES]
    legend_colours = assign_colours(same_entry, same_entry)
    check(len(same_entry) == LEGEND_NAMES and len({legend_colours[name] for name in same_entry}) == LEGEND_NAMES,
          "legend names share a colour")
    check(widened([(0.0, 0.0), (1.0, 5.0)], 0.5) == [(0.0, 0.5), (1.0, 5.0)], "minimum width")

    with tempfile.TemporaryDirectory() as folder:
        one = synthetic_trace(folder, "one.json", [(1, "alone", 0.0, 10.0, 1)])
        two = synthetic_trace(folder, "two.json", [(1, "first", 0.0, 10.0, 1), (2, "second", 20.0, 30.0, 2)],
                              [("prerequisite", 1, 0.0, 2, 20.0)])
        for path, expected in ((one, "critical path: 1 task,"), (two, "critical path: 2 tasks,")):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                summary(*load(path))
            check(expected in printed.getvalue(), f"summary of {os.path.basename(path)} lacks '{expected}':\n"
                  + printed.getvalue())

        # Without matplotlib: the install line and a non-zero status, no traceback.
        hidden = {key: module for key, module in sys.modules.items() if key.split(".")[0] == "matplotlib"}
        for key in hidden:
            del sys.modules[key]
        sys.modules["matplotlib"] = None  # makes `import matplotlib` raise ImportError
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                status = draw(*load(one)[:2], os.path.join(folder, "none.png"))
        finally:
            del sys.modules["matplotlib"]
            sys.modules.update(hidden)
        check(status != 0 and "apt-get install python3-matplotlib" in errors.getvalue(),
              "no install advice when matplotlib is missing")

        try:
            import matplotlib  # noqa: F401
            have_matplotlib = True
        except ImportError:
            have_matplotlib = False
            print("trace_view.py self-test: matplotlib missing, the PNG is not drawn")
        if have_matplotlib:
            # A 1 us slice in a 20 ms trace must still show, in its own colour.
            blip = synthetic_trace(folder, "blip.json", [(1, "long", 0.0, 20000.0, 1), (2, "blip", 10000.0, 10001.0, 2)])
            png = os.path.join(folder, "blip.png")
            with contextlib.redirect_stdout(io.StringIO()):
                draw(*load(blip)[:2], png)
            import matplotlib.pyplot as plt

            pixels = plt.imread(png)[:, :, :3]
            colour = assign_colours(["long", "blip"], ["long", "blip"])["blip"]
            wanted = [int(colour[i:i + 2], 16) / 255.0 for i in (1, 3, 5)]
            found = ((abs(pixels[:, :, 0] - wanted[0]) < 0.02) & (abs(pixels[:, :, 1] - wanted[1]) < 0.02)
                     & (abs(pixels[:, :, 2] - wanted[2]) < 0.02))
            # The legend's swatch shows the colour too: the slice makes a second patch.
            columns = sorted(set(found.nonzero()[1].tolist()))
            check(len(columns) > 0 and columns[-1] - columns[0] > 20, "a short slice is not drawn")

    for failure in failures:
        print("trace_view.py self-test FAILED:", failure)
    if not failures:
        print("trace_view.py self-test: ok")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
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
    return draw(names, slices, args.output or args.trace.rsplit(".", 1)[0] + ".png", args.window)


if __name__ == "__main__":
    sys.exit(main())
