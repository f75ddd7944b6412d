#!/usr/bin/env python3
"""Checks a Chrome-trace JSON file written by uniccl's trace profiler plugin.

  check_trace.py FILE [--expect CAT:NAME ...] [--gpu-clock]

Fails (exit 1, with the reason) unless: the file parses as JSON; "X" and "b"
events appear in non-decreasing ts order and every duration is >= 0; event
ids are unique and every parent/group id names an event of the file; parents
have the expected type (events may lack parents only when the plugin
dropped events) (CollApi/P2pApi/KernelLaunch under GroupApi, Coll/P2p
under CollApi/P2pApi and a Group, KernelCh and ProxyOp under Coll/P2p,
ProxyStep under ProxyOp); API events lie inside their GroupApi's interval,
Coll/P2p inside their Group's; "X" events of each thread track nest properly; and each --expect
CAT:NAME (NAME may be *) occurs. --gpu-clock: KernelCh events were placed by
GPU timers.
"""
import json
import sys

# us. Timestamps are microseconds since Unix time 1700000000 as doubles (the
# writer's and json's): in 2026 that is about 1e14 us, where a double's step
# is 0.016 us, so two events a few ns apart on one thread (a stop, then the
# next start) can print overlapping by that much. Real overlaps are larger.
EPS = 0.05

PARENT_TYPES = {
    "CollApi": {"GroupApi"}, "P2pApi": {"GroupApi"}, "KernelLaunch": {"GroupApi"},
    "Coll": {"CollApi"}, "P2p": {"P2pApi"},
    "KernelCh": {"Coll", "P2p"}, "ProxyOp": {"Coll", "P2p"}, "ProxyStep": {"ProxyOp"},
}
CONTAINED = {"CollApi", "P2pApi", "KernelLaunch"}  # Coll/P2p run at launch: inside their Group
# uniccl's network proxy ops are persistent (one per link direction, for the
# link's life: docs/network.md), so they have no Coll/P2p parent.
MAY_BE_TOP_LEVEL = {"ProxyOp"}


def fail(msg):
    print("check_trace: FAIL: " + msg)
    sys.exit(1)


def main(argv):
    if len(argv) < 2:
        fail("usage: check_trace.py FILE [--expect CAT:NAME ...] [--gpu-clock]")
    path = argv[1]
    expects, gpu_clock, i = [], False, 2
    while i < len(argv):
        if argv[i] == "--expect":
            expects.append(argv[i + 1]); i += 2
        elif argv[i] == "--gpu-clock":
            gpu_clock = True; i += 1
        else:
            fail("unknown argument " + argv[i])
    try:
        with open(path) as f:
            doc = json.load(f)
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        fail("%s does not parse as JSON: %s" % (path, e))
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")

    dropped = int(doc.get("otherData", {}).get("dropped", 0))  # a dropped parent leaves its children orphans
    last_ts, by_id, begins = None, {}, {}
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            continue
        if ph not in ("X", "b", "e"):
            fail("unexpected phase %r" % ph)
        ts = float(e["ts"])
        if ph == "e":
            b = begins.get(e["id"])
            if b is None or ts + EPS < b["_start"]:
                fail("async end before its begin: %r" % e)
            b["_end"] = ts
            continue
        if last_ts is not None and ts + EPS < last_ts:
            fail("timestamps go backwards at %r (previous %.3f)" % (e, last_ts))
        last_ts = ts
        eid = e["args"]["id"]
        if eid in by_id:
            fail("duplicate id %d" % eid)
        e["_start"] = ts
        if ph == "X":
            if float(e["dur"]) < 0:
                fail("negative duration: %r" % e)
            e["_end"] = ts + float(e["dur"])
        else:
            begins[e["id"]] = e
        by_id[eid] = e
    for e in by_id.values():
        if "_end" not in e:
            fail("async event without end: %r" % e)

    for e in by_id.values():
        cat, args = e["cat"], e["args"]
        want = PARENT_TYPES.get(cat)
        parent = args.get("parent")
        if parent is not None:
            if parent not in by_id:
                fail("parent %d of %s %s is not in the file" % (parent, cat, e["name"]))
            p = by_id[parent]
            if want and p["cat"] not in want:
                fail("%s %s has a %s parent (want %s)" % (cat, e["name"], p["cat"], sorted(want)))
            if cat in CONTAINED and not (p["_start"] - EPS <= e["_start"] and e["_end"] <= p["_end"] + EPS):
                fail("%s %s [%.3f, %.3f] is not inside its %s [%.3f, %.3f]" %
                     (cat, e["name"], e["_start"], e["_end"], p["cat"], p["_start"], p["_end"]))
        elif want and not dropped and cat not in MAY_BE_TOP_LEVEL:
            fail("%s %s has no parent" % (cat, e["name"]))
        group = args.get("group")
        if cat in ("Coll", "P2p") and not dropped:
            if group not in by_id or by_id[group]["cat"] != "Group":
                fail("%s %s names no Group event (group=%r)" % (cat, e["name"], group))
            g = by_id[group]
            if not (g["_start"] - EPS <= e["_start"] and e["_end"] <= g["_end"] + EPS):
                fail("%s %s is not inside its Group" % (cat, e["name"]))
        if gpu_clock and cat == "KernelCh" and args.get("clock") != "gpu":
            fail("KernelCh placed by host clock: %r" % e)

    # Complete events on one track must nest (Perfetto/chrome draw them as a stack).
    tracks = {}
    for e in by_id.values():
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in tracks.items():
        evs.sort(key=lambda x: (x["_start"], -x["_end"]))
        stack = []
        for e in evs:
            while stack and stack[-1]["_end"] <= e["_start"] + EPS:
                stack.pop()
            if stack and e["_end"] > stack[-1]["_end"] + EPS:
                fail("track %r: %s %s overlaps %s %s without nesting" %
                     (key, e["cat"], e["name"], stack[-1]["cat"], stack[-1]["name"]))
            stack.append(e)

    for x in expects:
        cat, name = x.split(":", 1)
        if not any(e["cat"] == cat and (name == "*" or e["name"] == name) for e in by_id.values()):
            fail("no %s event named %s" % (cat, name))
    print("check_trace: OK: %d events in %s" % (len(by_id), path))


if __name__ == "__main__":
    main(sys.argv)
