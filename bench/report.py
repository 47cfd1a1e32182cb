#!/usr/bin/python3
"""Table and bench/results/latest.txt from one run of bench/run.sh.

usage: report.py --peers results/peers.txt --extras results/extras.txt [--batch run=STAMP]
                 [--out results/latest.txt]

peers.txt:  lines of bench/peers/bench.py (key=value); the last '# batch' block is used.
extras.txt: lines "run=STAMP workload=... key=value ..."; the lines of --batch (default:
            the last run in the file) are used.
Prints a table to stdout and writes key=value lines to --out.
"""
import sys
from collections import defaultdict
import os

# The peer harness's own helpers, so both tables read numbers the same way.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from summarize import med, num, spread  # noqa: E402

TARGETS = {  # issue 4
    "drain_jobs_per_s": 50000,
    "enqueue_jobs_per_s": 100000,
    "lat_p99_ms": 0.5,
    "lat_p50_ms": 0.2,
    "late_p99_ms": 2.0,
    "bytes_per_waiting_job": 120,
    "idle_per_process_per_block": 1.0,
}


def parse_kv(line):
    return dict(x.split("=", 1) for x in line.split() if "=" in x)


def peer_rows(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("# batch"):
                    rows = []
                    continue
                if line and not line.startswith("#"):
                    rows.append(parse_kv(line))
    except FileNotFoundError:
        pass
    return rows


def extra_rows(path, batch):
    rows = []
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    except FileNotFoundError:
        return []
    if not batch and lines:
        batch = lines[-1].split()[0]
    for l in lines:
        if l.split()[0] == batch:
            rows.append(parse_kv(l))
    return rows


def f0(v):
    return "-" if v != v else f"{v:,.0f}"


def f2(v):
    return "-" if v != v else f"{v:.2f}"


def main():
    a = sys.argv[1:]

    def opt(name, default=None):
        return a[a.index(name) + 1] if name in a else default

    peers = peer_rows(opt("--peers", "results/peers.txt"))
    extras = extra_rows(opt("--extras", "results/extras.txt"), opt("--batch"))
    out_path = opt("--out", "results/latest.txt")
    kv = {}  # -> latest.txt

    # ---------------------------------------------------------------- machine
    env = next((r for r in extras if r.get("workload") == "env"), {})
    penv = next((r for r in peers if r.get("workload") == "env"), {})
    for k in ("nproc", "cpu", "kernel", "redis", "jobrunner", "build", "quick", "loadavg_start", "loadavg_extras"):
        if k in env:
            kv[f"machine.{k}"] = env[k]
    for k, v in penv.items():
        if k not in ("peer", "workload"):
            kv[f"peers.version.{k}"] = v

    # ---------------------------------------------------------------- ceilings
    ceil = {}
    for r in extras:
        if r.get("workload") == "ceiling":
            key = f"xadd_c{r['clients']}_p{r['pipeline']}"
            ceil[key] = r
            kv[f"ceiling.{key}.ops_per_s"] = r["ops_per_s"]
            kv[f"ceiling.{key}.p50_ms"] = r["p50_ms"]
            kv[f"ceiling.{key}.p99_ms"] = r["p99_ms"]
    harness_ceil = defaultdict(list)
    for r in peers:
        if r.get("workload") == "ceiling" and "ops_per_s" in r:
            harness_ceil[f"{r['cmd'].lower()}_c{r['clients']}_p{r['pipeline']}"].append(num(r["ops_per_s"]))
    for k, vs in harness_ceil.items():
        kv[f"ceiling.harness.{k}.ops_per_s"] = "%.0f" % med(vs)
    c_p1 = num(ceil.get("xadd_c50_p1", {}).get("ops_per_s"))
    c_p64 = num(ceil.get("xadd_c50_p64", {}).get("ops_per_s"))
    c_rtt = num(ceil.get("xadd_c1_p1", {}).get("p50_ms"))
    if c_p1 != c_p1:
        c_p1 = med(harness_ceil.get("xadd_c50_p1", []))
    if c_p64 != c_p64:
        c_p64 = med(harness_ceil.get("xadd_c50_p64", []))

    # ---------------------------------------------------------------- peer harness
    by = defaultdict(lambda: defaultdict(list))
    for r in peers:
        if "error" in r or r.get("run") == "warmup" or r.get("peer") in ("meta", "redis-benchmark"):
            continue
        wl = r.get("workload")
        if wl in ("latency", "delayed"):
            # the extra rq_simple@100/s latency run is a different offered load: keep it apart
            tag = r["peer"] if not (wl == "latency" and r.get("rate") not in (None, "500")) else f"{r['peer']}@{r['rate']}/s"
            by[wl][tag].append(r)
        else:
            by[wl][r["peer"]].append(r)
    peer_order = []
    for wl in ("throughput", "latency", "delayed", "memory"):
        for p in by[wl]:
            if p not in peer_order:
                peer_order.append(p)
    errors = [r for r in peers if "error" in r]

    table = []
    for p in peer_order:
        t = by["throughput"].get(p, [])
        la = by["latency"].get(p, [])
        de = by["delayed"].get(p, [])
        me = by["memory"].get(p, [])
        row = dict(
            peer=p,
            n=t[0]["jobs"] if t else "",
            workers=t[0].get("workers", "") if t else "",
            drain=med([num(r["jobs_per_s"]) for r in t]),
            wall=med([num(r["wall_jobs_per_s"]) for r in t]),
            enq=med([num(r["enqueue_jobs_per_s"]) for r in t]),
            enq_mode=t[0]["enqueue_mode"] if t else "",
            lat_p50="|".join(f2(num(r["p50_ms"])) for r in la) or "-",
            lat_p99="|".join(f2(num(r["p99_ms"])) for r in la) or "-",
            lat_max="|".join(f2(num(r["max_ms"])) for r in la) or "-",
            del_p50="|".join(f2(num(r["p50_ms"])) for r in de) or "-",
            del_p99="|".join(f2(num(r["p99_ms"])) for r in de) or "-",
            del_max="|".join(f2(num(r["max_ms"])) for r in de) or "-",
            del_min="|".join(f2(num(r["min_ms"])) for r in de) or "-",
            early="|".join(r.get("early", "") for r in de) or "-",
            mem=med([num(r["bytes_per_job"]) for r in me]),
            incomplete=sum(1 for r in t + la + de if r.get("complete") != "1"),
        )
        table.append(row)
        key = f"peer.{p}"
        for k in ("drain", "wall", "enq"):
            if row[k] == row[k]:
                kv[f"{key}.{dict(drain='drain_jobs_per_s', wall='wall_jobs_per_s', enq='enqueue_jobs_per_s')[k]}"] = "%.0f" % row[k]
        for k in ("lat_p50", "lat_p99", "lat_max", "del_p50", "del_p99", "del_max", "del_min", "early"):
            if row[k] != "-":
                kv[f"{key}.{k}_ms" if k != "early" else f"{key}.delayed_early"] = row[k]
        if row["mem"] == row["mem"]:
            kv[f"{key}.bytes_per_job"] = "%.0f" % row["mem"]
        if row["incomplete"]:
            kv[f"{key}.incomplete_runs"] = str(row["incomplete"])

    # ---------------------------------------------------------------- extras
    ex = defaultdict(list)
    for r in extras:
        ex[r.get("workload")].append(r)
    enq_bulk = med([num(r["enqueue_jobs_per_s"]) for r in ex["enqueue_bulk"]])
    enq_cli = med([num(r["enqueue_jobs_per_s"]) for r in ex["enqueue_cli"]])
    variants = []
    for r in ex["drain_noop"] + ex["drain_bench"]:
        if r.get("config", "defaults") not in variants:
            variants.append(r.get("config", "defaults"))

    def drain_of(kind, v):
        return med([num(r.get("jobs_per_s")) for r in ex[kind] if r.get("config", "defaults") == v and "error" not in r])

    drain_noop = drain_of("drain_noop", "defaults")
    drain_bench = drain_of("drain_bench", "defaults")
    extra_errors = [r for r in extras if "error" in r]
    mem = {r["kind"]: num(r["bytes_per_job"]) for r in ex["memory"]}
    idle = ex["idle"][-1] if ex["idle"] else {}
    n_bulk = ex["enqueue_bulk"][0]["jobs"] if ex["enqueue_bulk"] else "?"
    n_drain = ex["drain_noop"][0]["jobs"] if ex["drain_noop"] else "?"

    jr = next((row for row in table if row["peer"] == "jobrunner"), None)

    def ratio(v, c):
        return "-" if v != v or c != c or c == 0 else f"{v / c:.2f}"

    def met(ok):
        return "met" if ok else "NOT met"

    # rows: figure, value, unit, ceiling text, ratio, target text, met, key
    figs = []
    put_later = []
    if jr:
        figs.append(("drain, bench body, peer harness N=%s, %s" % (jr["n"], jr["workers"]), jr["drain"], "jobs/s",
                     f"XADD c50 P1 {f0(c_p1)}", ratio(jr["drain"], c_p1), ">= 50,000",
                     met(jr["drain"] >= TARGETS["drain_jobs_per_s"]), "drain_bench_harness"))
    for v in variants:
        dn, db = drain_of("drain_noop", v), drain_of("drain_bench", v)
        tag = "" if v == "defaults" else "_" + v
        label = "jobrunner defaults" if v == "defaults" else f"worker config {v}"
        figs.append((f"drain, bench body, N={n_drain}, {label}", db, "jobs/s", f"XADD c50 P1 {f0(c_p1)}",
                     ratio(db, c_p1), ">= 50,000", met(db >= TARGETS["drain_jobs_per_s"]), f"drain_bench{tag}"))
        figs.append((f"drain, noop handler, N={n_drain}, {label}", dn, "jobs/s",
                     f"XADD c50 P1 {f0(c_p1)}", ratio(dn, c_p1), ">= 50,000",
                     met(dn >= TARGETS["drain_jobs_per_s"]), f"drain_noop{tag}"))
        put_later.append((f"jobrunner.drain_noop{tag}_jobs_per_s", dn))
        put_later.append((f"jobrunner.drain_bench{tag}_jobs_per_s", db))
    figs.append((f"bulk enqueue, C API pipelined, N={n_bulk}", enq_bulk, "jobs/s", f"XADD c50 P64 {f0(c_p64)}",
                 ratio(enq_bulk, c_p64), ">= 100,000", met(enq_bulk >= TARGETS["enqueue_jobs_per_s"]), "enqueue_bulk"))
    figs.append(("enqueue, CLI (one process per job)", enq_cli, "jobs/s", f"XADD c50 P1 {f0(c_p1)}",
                 ratio(enq_cli, c_p1), "-", "-", "enqueue_cli"))
    for pname in ("jobrunner", "jobrunner_inline"):
        sfx = "" if pname == "jobrunner" else ", isolation inline"
        ksfx = "" if pname == "jobrunner" else "_inline"
        for i, r in enumerate(by["latency"].get(pname, [])):
            p50, p99 = num(r["p50_ms"]), num(r["p99_ms"])
            figs.append((f"latency @500/s run {i + 1}{sfx}: p50 / p99", f"{f2(p50)} / {f2(p99)}", "ms",
                         f"XADD c1 p50 {c_rtt:.3f} ms" if c_rtt == c_rtt else "-", ratio(p50, c_rtt),
                         "p50 <= 0.2, p99 <= 0.5",
                         met(p50 <= TARGETS["lat_p50_ms"] and p99 <= TARGETS["lat_p99_ms"]), f"latency{ksfx}_run{i + 1}"))
        for i, r in enumerate(by["delayed"].get(pname, [])):
            p99, early = num(r["p99_ms"]), int(r.get("early", "0") or 0)
            figs.append((f"delayed lateness run {i + 1}{sfx}: p50 / p99 / max, early",
                         f"{f2(num(r['p50_ms']))} / {f2(p99)} / {f2(num(r['max_ms']))}, {early}",
                         "ms", "-", "-", "0 early, p99 <= 2", met(early == 0 and p99 <= TARGETS["late_p99_ms"]),
                         f"delayed{ksfx}_run{i + 1}"))
    raw = mem.get("raw_xadd", float("nan"))
    for kind, label in (("waiting", "memory per waiting job (50-byte payload)"),
                        ("delayed", "memory per delayed job (50-byte payload)")):
        v = mem.get(kind, float("nan"))
        figs.append((label, v, "bytes", f"raw XADD {f0(raw)} B", ratio(v, raw),
                     "<= 120" if kind == "waiting" else "-",
                     met(v <= TARGETS["bytes_per_waiting_job"]) if kind == "waiting" else "-", f"memory_{kind}"))
    if jr and jr["mem"] == jr["mem"]:
        figs.append(("memory per waiting job, harness (46-byte payload)", jr["mem"], "bytes", f"raw XADD {f0(raw)} B",
                     ratio(jr["mem"], raw), "<= 120", met(jr["mem"] <= TARGETS["bytes_per_waiting_job"]), "memory_harness"))
    if idle:
        wk, sc = num(idle.get("worker_max_per_block")), num(idle.get("scheduler_max_per_block"))
        figs.append((f"idle, {idle['seconds']} s: commands sent per process per {idle['block_s']} s block",
                     f"worker {f2(wk)}, scheduler {f2(sc)}", "cmds", "-", "-", "<= 1 per process per block",
                     met(max(wk, sc) <= TARGETS["idle_per_process_per_block"]), "idle"))

    # latest.txt keys for the figures
    def put(name, v):
        kv[name] = v if isinstance(v, str) else ("%.2f" % v if v == v and abs(v) < 1000 else ("%.0f" % v if v == v else "nan"))

    put("jobrunner.enqueue_bulk_jobs_per_s", enq_bulk)
    put("jobrunner.enqueue_bulk_ratio_to_xadd_c50_p64", ratio(enq_bulk, c_p64))
    put("jobrunner.enqueue_cli_jobs_per_s", enq_cli)
    for k, v in put_later:
        put(k, v)
    put("jobrunner.drain_noop_ratio_to_xadd_c50_p1", ratio(drain_noop, c_p1))
    put("jobrunner.drain_bench_ratio_to_xadd_c50_p1", ratio(drain_bench, c_p1))
    if jr:
        put("jobrunner.harness_drain_ratio_to_xadd_c50_p1", ratio(jr["drain"], c_p1))
    for k, v in mem.items():
        put(f"jobrunner.memory_{k}_bytes_per_job", v)
    if idle:
        for k in ("seconds", "client_cmds", "script_cmds", "worker_max_per_block", "scheduler_max_per_block",
                  "commandstats_total", "commandstats", "by_process"):
            kv[f"jobrunner.idle_{k}"] = idle.get(k, "")
    for f in figs:
        kv[f"target.{f[7]}"] = f[6].replace(" ", "_")

    # ---------------------------------------------------------------- print
    print()
    print("== machine: nproc=%s cpu=%s kernel=%s redis=%s jobrunner=%s build=%s%s" % (
        env.get("nproc", "?"), env.get("cpu", "?").replace("_", " "), env.get("kernel", "?"), env.get("redis", "?"),
        env.get("jobrunner", "?"), env.get("build", "?"), " QUICK" if env.get("quick") == "1" else ""))
    if ceil:
        print("== ceiling, this run (redis-benchmark XADD bench:stream * f v):  " + "   ".join(
            f"c{r['clients']} P{r['pipeline']}: {f0(num(r['ops_per_s']))} ops/s (p50 {r['p50_ms']} ms)" for r in ceil.values()))
    if table:
        print("\n== peers side by side (bench/peers; medians of the throughput runs; latency/delayed one value per run)")
        hdr = f"  {'peer':16s} {'drain/s':>8s} {'wall/s':>8s} {'enqueue/s':>10s} {'lat p50':>11s} {'lat p99':>11s} {'del p50':>9s} {'del p99':>9s} {'del max':>9s} {'early':>5s} {'B/job':>6s}"
        print(hdr)
        for r in table:
            print(f"  {r['peer']:16s} {f0(r['drain']):>8s} {f0(r['wall']):>8s} {f0(r['enq']):>10s} {r['lat_p50']:>11s} {r['lat_p99']:>11s} "
                  f"{r['del_p50']:>9s} {r['del_p99']:>9s} {r['del_max']:>9s} {r['early']:>5s} {f0(r['mem']):>6s}"
                  + (f"  INCOMPLETE x{r['incomplete']}" if r["incomplete"] else ""))
    cpu_rows = [(r["peer"], by["throughput"].get(r["peer"], [])) for r in table]
    cpu_rows = [(p, [x for x in t if "redis_drain_us_per_job" in x]) for p, t in cpu_rows]
    own = [r for r in ex["drain_noop"] if r.get("config", "defaults") == "defaults" and "redis_drain_us_per_job" in r]
    if any(t for _, t in cpu_rows) or own:
        print("\n== A'. Redis CPU per job (user+sys of redis-server, all threads): median [min-max] us")
        print("  peers: the harness's job body (its INCR and two SETs included, the same for every peer);"
              " jobrunner own: the no-op handler, N=%s, 2 workers" % n_drain)
        print(f"  {'peer':22s} {'enqueue':>22s} {'drain':>22s} {'total':>8s}")

        def cpu_line(name, rs):
            e = [num(x["redis_enqueue_us_per_job"]) for x in rs]
            d = [num(x["redis_drain_us_per_job"]) for x in rs]
            print(f"  {name:22s} {spread(e, '%.2f'):>22s} {spread(d, '%.2f'):>22s} {med(e) + med(d):8.2f}")
            return med(e) + med(d)
        for p, t in cpu_rows:
            if t:
                kv[f"peer.{p}.redis_us_per_job"] = "%.2f" % cpu_line(p, t)
        if own:
            kv["jobrunner.own_noop.redis_us_per_job"] = "%.2f" % cpu_line("jobrunner own (no-op)", own)
    print("\n== jobrunner against the issue-4 targets (ratio = figure / ceiling of this run)")
    print(f"  {'figure':58s} {'value':>26s} {'unit':6s} {'ceiling':>22s} {'ratio':>6s}  {'target':26s} result")
    for name, v, unit, c, rt, tgt, ok, _ in figs:
        vs = v if isinstance(v, str) else f0(v)
        print(f"  {name:58s} {vs:>26s} {unit:6s} {c:>22s} {rt:>6s}  {tgt:26s} {ok}")
    if idle:
        print(f"  idle: {idle.get('client_cmds')} commands sent by clients in {idle['seconds']} s "
              f"({idle.get('by_process', '').replace(';', ' ')}); Redis ran {idle.get('commandstats_total')} "
              f"counting those inside FCALL ({idle.get('commandstats', '').rstrip(',')})")
    if extra_errors:
        print("\n== errors in the jobrunner extras")
        for r in extra_errors:
            print("  " + " ".join(f"{k}={v}" for k, v in r.items()))
        kv["jobrunner.extras_errors"] = str(len(extra_errors))
    if errors:
        print("\n== errors in the peer harness")
        for r in errors:
            print("  " + " ".join(f"{k}={v}" for k, v in r.items()))

    with open(out_path, "w") as f:
        for k, v in kv.items():
            f.write(f"{k}={v}\n")
    print(f"\n(wrote {out_path})")


if __name__ == "__main__":
    main()
