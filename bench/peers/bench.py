#!/usr/bin/python3
"""Orchestrator: one peer x one workload x one repetition -> one result line on stdout.

usage: /usr/bin/python3 bench.py PEER WORKLOAD [--run K]
  PEER     jobrunner | bullmq | beequeue | sidekiq | rq | celery
           variants: jobrunner_inline (worker.isolation: inline: handlers run in the worker process)
           variants: rq_simple (RQ SimpleWorker, no fork), sidekiq_poll1 (poll_interval_average=1)
  WORKLOAD throughput | latency | delayed | memory
env: BENCH_PORT (6390), BENCH_PIDFILE (worker process-group ids, for run_all.sh's safety net),
     N_THROUGHPUT (20000), N_LATENCY (2000), LAT_RATE (500), N_DELAYED (1000), DELAY_MS (2000),
     SPREAD_MS (1000), N_MEMORY (100000), N_WARM (200, warm-up jobs before B and C),
     BENCH_CONC (10), BENCH_LOGDIR (worker logs),
     NAME_<PEER> overrides NAME for one peer (N_THROUGHPUT_RQ, LAT_RATE_RQ, SPREAD_MS_RQ, ...)
     jobrunner: JR_BUILD_DIR (the project's build tree, default ../../build) holds
     bin/jobrunner, bench/jr_peer (producer) and bench/bench_job.so (the job plugin);
     JR_ISOLATION (process|inline), JR_CONCURRENCY: worker settings (default: jobrunner's)

It only talks to redis on 127.0.0.1:BENCH_PORT, starts the peer's workers in their own process
group, and always stops them (SIGTERM, then SIGKILL) before exiting. Every wait has a deadline.
"""
import os
import signal
import subprocess
import sys
import time

from redis import Redis

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = int(os.environ.get("BENCH_PORT", "6390"))
URL = f"redis://127.0.0.1:{PORT}/0"
PY = "/usr/bin/python3"  # Debian's python3-rq / python3-celery live here, not in pyenv
CONC = int(os.environ.get("BENCH_CONC", "10"))
LOGDIR = os.environ.get("BENCH_LOGDIR", "/tmp")
PIDFILE = os.environ.get("BENCH_PIDFILE")

N_THROUGHPUT = int(os.environ.get("N_THROUGHPUT", "20000"))
N_LATENCY = int(os.environ.get("N_LATENCY", "2000"))
LAT_RATE = float(os.environ.get("LAT_RATE", "500"))
N_DELAYED = int(os.environ.get("N_DELAYED", "1000"))
DELAY_MS = float(os.environ.get("DELAY_MS", "2000"))
SPREAD_MS = float(os.environ.get("SPREAD_MS", "1000"))
N_MEMORY = int(os.environ.get("N_MEMORY", "100000"))
N_WARM = 200


def cfg(name, peer, default):
    """Per-peer override: e.g. LAT_RATE_RQ beats LAT_RATE for peer rq."""
    return type(default)(os.environ.get(f"{name}_{peer.upper()}", default))


def mono_ms():
    return time.monotonic() * 1000.0


def base_env(**extra):
    """Environment for producers/workers. This machine exports PYTHONDONTWRITEBYTECODE=1, which
    would make every RQ work horse re-compile the job module from source (~3 ms/job); keep
    bytecode caching on, with the cache outside the source tree."""
    env = dict(os.environ, BENCH_PORT=str(PORT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(LOGDIR, "pycache")
    env.update({k: str(v) for k, v in extra.items()})
    return env


# ---------------------------------------------------------------- peers
ROOT = os.path.dirname(os.path.dirname(HERE))  # the jobrunner project (bench/peers/ -> .)
JR_BUILD = os.path.abspath(os.environ.get("JR_BUILD_DIR", os.path.join(ROOT, "build")))


def jobrunner_conf(iso=""):
    """Worker/scheduler configuration for the jobrunner peer: log level warn, as every peer;
    jobrunner's defaults otherwise, unless JR_ISOLATION (process|inline) or JR_CONCURRENCY
    (runner processes per worker) are set. Returns (path, description)."""
    path = os.path.join(LOGDIR, "jobrunner-bench.yaml")
    iso, conc = iso or os.environ.get("JR_ISOLATION", ""), os.environ.get("JR_CONCURRENCY", "")
    with open(path, "w") as f:
        f.write("log:\n  level: warn\n")
        if iso or conc:
            f.write("worker:\n")
            if iso:
                f.write(f"  isolation: {iso}\n")
            if conc:
                f.write(f"  concurrency: {conc}\n")
    desc = "2proc" + (f"_{iso}" if iso else "") + (f"_c{conc}" if conc else "") + ("" if iso or conc else "_defaults")
    return path, desc


# producer: argv prefix; workers: list of argv (one OS process each); desc: what "workers" means.
def peer_spec(peer, workload):
    delayed = workload == "delayed"
    env = {}
    if peer in ("jobrunner", "jobrunner_inline"):
        # producer: bench/jr_peer.c (C API, jr_redis_enqueue); job: bench/bench_job.c (plugin)
        jr = os.path.join(JR_BUILD, "bin", "jobrunner")
        prod = [os.path.join(JR_BUILD, "bench", "jr_peer")]
        conf, desc = jobrunner_conf("inline" if peer == "jobrunner_inline" else "")
        common = ["-c", conf, "--redis", f"redis://127.0.0.1:{PORT}", "-q", "bench"]
        workers = [[jr, "worker"] + common + ["--plugin", os.path.join(JR_BUILD, "bench", "bench_job.so")]] * 2
        if delayed:
            workers = workers + [[jr, "scheduler"] + common]
            desc += "+scheduler"
        env["BENCH_SOCKET"] = ""  # the job signals over TCP, like every other peer
        env["BENCH_URL"] = ""
    elif peer in ("bullmq", "beequeue"):
        script = f"{peer}_peer.js"
        prod = ["node", script]
        workers = [["node", script, "worker"]] * 2
        desc = f"2proc_x_conc{CONC}"
        if peer == "beequeue" and delayed:
            env["BENCH_DELAYED"] = "1"
    elif peer in ("sidekiq", "sidekiq_poll1"):
        prod = ["ruby", "sidekiq_peer.rb"]
        workers = [["sidekiq", "-r", "./sidekiq_peer.rb", "-c", str(CONC), "-q", "bench", "-t", "3"]] * 2
        desc = f"2proc_x_threads{CONC}"
        if peer == "sidekiq_poll1":
            env["SIDEKIQ_POLL_AVG"] = "1"
    elif peer in ("rq", "rq_simple"):
        prod = [PY, "rq_peer.py"]
        w = [PY, "/usr/bin/rq", "worker", "-u", URL, "--logging_level", "WARNING", "--disable-job-desc-logging"]
        if peer == "rq_simple":  # RQ's non-forking worker class: jobs run in the worker process
            w += ["-w", "rq.worker.SimpleWorker"]
        if delayed:
            w.append("--with-scheduler")
        workers = [w + ["bench"]] * 2
        desc = "2proc_x_fork_per_job" if peer == "rq" else "2proc_x_simpleworker"
    elif peer == "celery":
        prod = [PY, "celery_peer.py"]
        workers = [[PY, "-m", "celery", "-A", "celery_peer", "worker", "-l", "WARNING",
                    "-P", "prefork", "-c", "2", "-Q", "bench"]]
        desc = "1node_prefork_c2"
    else:
        raise SystemExit(f"unknown peer {peer}")
    return prod, workers, desc, env


class Workers:
    def __init__(self, argvs, env, tag):
        self.procs = []
        for i, argv in enumerate(argvs):
            log = open(os.path.join(LOGDIR, f"{tag}.w{i}.log"), "ab")
            p = subprocess.Popen(argv, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
            self.procs.append(p)
            if PIDFILE:
                with open(PIDFILE, "a") as f:
                    f.write(f"{p.pid}\n")

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def stop(self):
        for sig, grace in ((signal.SIGTERM, 8.0), (signal.SIGKILL, 5.0)):
            for p in self.procs:
                try:
                    os.killpg(p.pid, sig)  # pgid == pid (start_new_session)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + grace
            while time.monotonic() < end and any(p.poll() is None for p in self.procs):
                time.sleep(0.05)
            if all(p.poll() is not None for p in self.procs):
                break
        # the group may still hold children (celery prefork, rq scheduler/horse)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_producer(prod, args, env, timeout):
    t = time.monotonic()
    cp = subprocess.run(prod + [str(a) for a in args], cwd=HERE, env=env, capture_output=True,
                        text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise RuntimeError(f"producer {args[0]} rc={cp.returncode}: {cp.stderr.strip()[-800:]}")
    line = cp.stdout.strip().splitlines()[-1]
    kv = dict(x.split("=", 1) for x in line.split())
    kv["proc_s"] = "%.3f" % (time.monotonic() - t)
    return kv


def wait_until(pred, deadline_s, step=0.02, progress=None, stall_s=20.0):
    """Poll pred() until true or deadline; with progress(), also give up after stall_s
    seconds without progress (e.g. every job failing)."""
    end = time.monotonic() + deadline_s
    last, last_t = None, time.monotonic()
    while time.monotonic() < end:
        if pred():
            return True
        if progress is not None:
            v = progress()
            if v != last:
                last, last_t = v, time.monotonic()
            elif time.monotonic() - last_t > stall_s:
                return pred()
        time.sleep(step)
    return pred()


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[i]


def fmt(d):
    return " ".join(f"{k}={v}" for k, v in d.items())


# ---------------------------------------------------------------- workloads
def throughput(r, peer, run):
    n = cfg("N_THROUGHPUT", peer, N_THROUGHPUT)  # e.g. N_THROUGHPUT_RQ for RQ's fork-per-job worker
    prod, wargv, desc, xenv = peer_spec(peer, "throughput")
    env = base_env(BENCH_N=n, **xenv)
    r.flushall()
    cpu0 = redis_cpu_s(r)
    enq = run_producer(prod, ["bulk", n], env, 180)
    cpu1 = redis_cpu_s(r)
    t_launch = mono_ms()
    w = Workers(wargv, env, f"{peer}.throughput.{run}")
    try:
        done_n = lambda: int(r.get("bench:done") or 0)
        done = wait_until(lambda: done_n() >= n or not w.alive(), 120, 0.05, progress=done_n)
        t_seen = mono_ms()
    finally:
        w.stop()
    cpu2 = redis_cpu_s(r)
    cnt = int(r.get("bench:done") or 0)
    complete = int(cnt >= n)
    t_first = float(r.get("bench:t_first") or "nan")
    t_last = float(r.get("bench:t_last") or "nan") if complete else t_seen
    drain_s = (t_last - t_first) / 1000.0
    wall_s = (t_last - t_launch) / 1000.0
    res = dict(peer=peer, workload="throughput", run=run, jobs=n, workers=desc,
               enqueue_mode=enq["enqueue_mode"], enqueue_s=enq["enqueue_s"],
               enqueue_jobs_per_s="%.0f" % (n / float(enq["enqueue_s"])),
               startup_s="%.3f" % ((t_first - t_launch) / 1000.0),
               drain_s="%.3f" % drain_s, jobs_per_s="%.0f" % ((cnt - 1) / max(drain_s, 1e-9)),
               wall_s="%.3f" % wall_s, wall_jobs_per_s="%.0f" % (cnt / wall_s),
               completed=cnt, complete=complete,
               # Redis's own CPU (all its threads) per job: the one resource every peer shares
               redis_enqueue_us_per_job="%.2f" % ((cpu1 - cpu0) * 1e6 / n),
               redis_drain_us_per_job="%.2f" % ((cpu2 - cpu1) * 1e6 / max(cnt, 1)))
    if not done:
        res["note"] = "deadline_or_worker_exit"
    return res


def timed_samples(r, peer, workload, run, n, producer_args, deadline_s):
    prod, wargv, desc, xenv = peer_spec(peer, workload)
    env = base_env(BENCH_N=0, **xenv)
    r.flushall()
    w = Workers(wargv, env, f"{peer}.{workload}.{run}")
    try:
        # warm-up: N_WARM immediate jobs, wait until all ran (also proves workers are up)
        n_warm = cfg("N_WARM", peer, N_WARM)
        run_producer(prod, ["warm", n_warm], env, 60)
        if not wait_until(lambda: int(r.get("bench:done") or 0) >= n_warm, 60):
            raise RuntimeError("warm-up jobs did not complete in 60 s")
        settle = 1.0
        if workload == "delayed" and peer == "sidekiq":
            settle = 16.0  # sidekiq's scheduled poller sleeps 10-15 s after boot (INITIAL_WAIT)
        elif workload == "delayed" and peer == "sidekiq_poll1":
            settle = 6.0   # 0-5 s random initial wait when poll_interval_average is set
        time.sleep(settle)
        r.delete("bench:lat")
        enq = run_producer(prod, producer_args, env, 120)
        ok = wait_until(lambda: r.llen("bench:lat") >= n, deadline_s, 0.05,
                        progress=lambda: r.llen("bench:lat"), stall_s=25.0)
    finally:
        w.stop()
    vals = sorted(float(x) for x in r.lrange("bench:lat", 0, -1))
    res = dict(peer=peer, workload=workload, run=run, jobs=n, workers=desc)
    res.update({k: enq[k] for k in ("enqueue_mode", "enqueue_s", "achieved_rate")})
    res.update(received=len(vals), complete=int(ok and len(vals) >= n),
               p50_ms="%.2f" % pct(vals, 0.50), p99_ms="%.2f" % pct(vals, 0.99),
               max_ms="%.2f" % (vals[-1] if vals else float("nan")),
               min_ms="%.2f" % (vals[0] if vals else float("nan")),
               mean_ms="%.2f" % (sum(vals) / len(vals) if vals else float("nan")))
    if workload == "delayed":
        res["early"] = sum(1 for v in vals if v < 0)
    return res


def latency(r, peer, run):
    n, rate = cfg("N_LATENCY", peer, N_LATENCY), cfg("LAT_RATE", peer, LAT_RATE)
    res = timed_samples(r, peer, "latency", run, n, ["paced", n, rate], 60)
    res["rate"] = "%g" % rate
    return res


def delayed(r, peer, run):
    n, spread, delay = (cfg("N_DELAYED", peer, N_DELAYED), cfg("SPREAD_MS", peer, SPREAD_MS),
                        cfg("DELAY_MS", peer, DELAY_MS))
    res = timed_samples(r, peer, "delayed", run, n, ["delayed", n, spread, delay], 60)
    res.update(delay_ms="%g" % delay, spread_ms="%g" % spread)
    return res


def used_memory(r):
    return int(r.info("memory")["used_memory"])


def memory(r, peer, run):
    n = N_MEMORY
    prod, _, _, xenv = peer_spec(peer, "memory")
    env = base_env(**xenv)
    # Enqueue 10 jobs first and flush them, so that one-time state that survives FLUSHALL
    # (Lua script cache of BullMQ/Bee-Queue) is in the baseline, not in the per-job delta.
    run_producer(prod, ["bulk", 10], env, 60)
    r.flushall()
    time.sleep(0.5)
    before = used_memory(r)
    enq = run_producer(prod, ["bulk", n], env, 240)
    time.sleep(0.5)
    after = used_memory(r)
    keys = r.dbsize()
    r.flushall()
    return dict(peer=peer, workload="memory", run=run, jobs=n, enqueue_mode=enq["enqueue_mode"],
                enqueue_s=enq["enqueue_s"], used_before=before, used_after=after, keys=keys,
                bytes_per_job="%.0f" % ((after - before) / n))


def main():
    peer, workload = sys.argv[1], sys.argv[2]
    run = sys.argv[sys.argv.index("--run") + 1] if "--run" in sys.argv else "1"
    r = Redis.from_url(URL, decode_responses=True)
    fn = dict(throughput=throughput, latency=latency, delayed=delayed, memory=memory)[workload]
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # so `finally:` stops workers
    try:
        res = fn(r, peer, run)
    except Exception as e:  # one failed line instead of silence
        res = dict(peer=peer, workload=workload, run=run, error=repr(e)[:300].replace(" ", "_"))
    print(fmt(res), flush=True)


def redis_cpu_s(r):
    """CPU seconds redis-server has used so far (user + system, all threads)."""
    c = r.info("cpu")
    return float(c["used_cpu_user"]) + float(c["used_cpu_sys"])


if __name__ == "__main__":
    main()
