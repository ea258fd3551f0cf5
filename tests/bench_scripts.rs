//! The verdict logic of the benchmark scripts (`scripts/paired_verdict.py`,
//! `scripts/bench-latency`), on data whose answer is known. The scripts are
//! Python; these tests run them with `python3` (on every machine the project
//! supports: Debian's python3, which the test command's packages pull in).

use std::process::Command;

/// Defined before every snippet: `load_script("bench-latency")` loads a script
/// of `scripts/` that has no `.py` (so no `import` finds it) as a module;
/// `stand_in(path, text)` writes an executable that a script runs in place of
/// a real tool.
const LOAD_SCRIPT: &str = r#"
import importlib.machinery, importlib.util, os, stat
def stand_in(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRWXU)
    return path
def load_script(name):
    path = os.path.join(os.environ["PYTHONPATH"], name)
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module
"#;

/// Runs `code` in python3 with `scripts/` on the module path; panics with its
/// output unless it exits 0.
fn python(code: &str) -> String {
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!("{LOAD_SCRIPT}{code}"))
        .env("PYTHONPATH", scripts)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs (the benchmark scripts need it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "python3 failed:\n{text}");
    text
}

/// Fisher's exact test, one-sided: the hypergeometric upper tail, against values
/// computed by hand (4 of 5 against 0 of 5: C(5,4)C(5,0)/C(10,4) = 5/210).
#[test]
fn fisher_one_sided_is_the_hypergeometric_upper_tail() {
    python(
        r#"
from paired_verdict import fisher_one_sided as f
assert abs(f(4, 5, 0, 5) - 5 / 210) < 1e-12, f(4, 5, 0, 5)
assert abs(f(1, 5, 0, 5) - 0.5) < 1e-12, f(1, 5, 0, 5)
assert f(0, 5, 3, 5) == 1.0
assert abs(f(2, 3, 0, 3) - 0.2) < 1e-12, f(2, 3, 0, 3)
# symmetric counts: at least half the mass
assert 0.5 <= f(3, 40, 3, 40) <= 1.0
"#,
    );
}

/// The spread verdict (issue 19): within perftest's spread x 1.10 holds; one slow
/// whole run of five against none cannot tell the tools apart (undecided, and at
/// 3 rounds no count could); a tool whose runs are slow half the time fails.
#[test]
fn spread_verdict_holds_is_undecided_or_fails_as_the_slow_runs_say() {
    python(
        r#"
from paired_verdict import spread_verdict as v
word, text = v([10.7, 10.5, 10.0, 10.1, 10.7], [9.9, 10.3, 9.3, 9.8, 10.6])
assert word == "holds", text
word, text = v([10.7, 10.7, 10.5, 10.2, 16.9], [10.1, 10.0, 10.4, 10.0, 9.9])
assert word == "undecided" and "1 of 5 against 0 of 5" in text, text
word, text = v([17.3, 10.5, 10.2], [9.8, 9.9, 9.7])
assert word == "undecided" and "no count reaches" in text, text
word, text = v([17.0] * 9 + [10.0] * 10, [10.0] * 19)
assert word == "fails" and "9 of 19 against 0 of 19" in text, text
"#,
    );
}

/// From 20 rounds on, the spread verdict reads p90/p10 of the runs that are not
/// slow and judges the slow runs on their own. Known answers: the interpolated quantile on hand-computed cases;
/// the 1 B `send` figures of the 80-round boot of 2026-11-28 (ngauge's max/min
/// 1.92 is over perftest's 1.64 x 1.10 because of one slow run, yet its p90/p10
/// is the smaller: holds); a tool spread evenly over 10-12.9 us against a tight one
/// (fails on p90/p10 alone, no slow run); 3 slow runs of 20 against none (holds:
/// the count cannot tell, and the p90/p10 of the other runs is tight); perftest's
/// `inf` run (counted slow); a tool with 6 slow runs of 80 against none (fails on
/// the count alone, its p90/p10 within the limit).
#[test]
fn spread_verdict_over_many_rounds_reads_p90_over_p10_and_counts_slow_runs() {
    python(
        r#"
from paired_verdict import quantile, spread_verdict as v
assert quantile([1, 2, 3, 4, 5], 0.5) == 3
assert abs(quantile([1, 2, 3, 4], 0.9) - 3.7) < 1e-12
assert abs(quantile(list(range(11)), 0.1) - 1.0) < 1e-12
ng = [10.34, 10.13, 10.41, 10.55, 10.86, 10.29, 10.22, 11.16, 10.75, 11.04, 11.21, 10.76, 11.45,
      10.71, 10.63, 11.28, 10.37, 11.77, 9.99, 10.58, 10.3, 10.44, 10.5, 10.07, 9.97, 11.17, 10.11,
      10.21, 10.29, 11.57, 10.39, 10.5, 11.17, 12.91, 13.41, 19.16, 11.41, 10.28, 10.94, 11.85,
      10.63, 11.69, 11.46, 11.59, 11.2, 10.38, 10.58, 10.65, 10.47, 11.25, 10.52, 11.0, 10.27,
      11.57, 10.78, 10.64, 10.5, 11.33, 10.44, 11.7, 11.01, 10.54, 10.96, 10.16, 10.2, 10.35, 10.1,
      10.98, 10.97, 10.82, 10.16, 10.16, 10.37, 10.26, 10.57, 10.95, 10.28, 10.66, 10.87, 10.84]
pf = [10.98, 10.62, 10.71, 10.81, 11.12, 11.64, 10.96, 11.59, 11.33, 11.12, 11.69, 11.0, 11.7,
      11.33, 11.72, 10.83, 11.73, 10.72, 10.89, 11.08, 10.61, 14.84, 11.16, 10.63, 11.47, 10.7,
      10.77, 10.55, 11.38, 11.11, 11.68, 11.48, 11.74, 10.96, 13.35, 11.05, 11.33, 16.83, 11.44,
      11.41, 12.31, 11.3, 11.73, 12.08, 11.49, 11.14, 11.81, 10.53, 13.58, 10.27, 10.79, 15.08,
      11.91, 10.76, 12.18, 10.79, 11.25, 11.16, 11.25, 11.42, 11.06, 11.18, 10.9, 10.87, 10.42,
      10.77, 11.83, 10.76, 10.84, 13.63, 10.74, 10.78, 10.42, 10.5, 10.94, 11.52, 10.81, 11.38,
      11.71, 12.22]
assert max(ng) / min(ng) > 1.10 * max(pf) / min(pf)
word, text = v(ng, pf)
assert word == "holds" and "2 of 80 against 5 of 80" in text, text
word, text = v([10 + 2.9 * i / 39 for i in range(40)], [10.0 + 0.01 * (i % 5) for i in range(40)])
assert word == "fails" and ": 0 of 40 against 0 of 40" in text, text
# 3 slow runs of 20 against none: the count cannot tell (p = 0.12), and they do
# not move the p90/p10 of the other runs: holds
word, text = v([10.0, 10.2] * 8 + [10.1] + [14.0] * 3, [10.0, 10.2] * 10)
assert word == "holds" and ": 3 of 20 against 0 of 20" in text, text
# a run without a finite figure counts as slow and leaves the quantiles alone
word, text = v(ng, pf[:-1] + [float("inf")])
assert word == "holds" and "2 of 80 against 6 of 80" in text, text
word, text = v([10.0] * 74 + [16.0] * 6, [10.0] * 80)
assert word == "fails" and "6 of 80 against 0 of 80" in text and "not slow 1.000" in text, text
"#,
    );
}

/// bench-verbs refuses, before it boots the VM, an ngauge built without verbs (a
/// default build, such as bench-latency's, replaces `target/release/ngauge`): it
/// reads the transports `ngauge --version` lists. Known answers from stand-in
/// binaries that print a version text. And its parser keeps perftest's run
/// without a figure (`inf`) as such.
#[test]
fn bench_verbs_knows_a_binary_without_verbs_and_a_perftest_run_without_a_figure() {
    python(
        r##"
import tempfile
bv = load_script("bench-verbs")
d = tempfile.mkdtemp()
def fake(name, transports):
    return stand_in(os.path.join(d, name),
                    "#!/bin/sh\necho 'ngauge 0.1.0'\necho 'build:      release'\n"
                    f"echo 'transports: {transports}'\n")
assert bv.has_verbs(fake("a", "tcp,udp,verbs"))
assert bv.has_verbs(fake("b", "verbs,tcp"))
assert not bv.has_verbs(fake("c", "tcp,udp"))
assert not bv.has_verbs(fake("d", "tcp,udp,mpi"))
# perftest's run without a figure: kept as inf (the spread verdict counts it slow)
log = """=== ib_write_lat 0 1
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]
 1       1000          inf            inf          inf                inf
=== ib_write_lat 1 1
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]
 1       1000          8.46           103.31       9.13               9.99
"""
assert bv.parse(log) == {("ib_write_lat", 1): {0: float("inf"), 1: 9.13}}, bv.parse(log)
"##,
    );
}

/// bench-latency's shuffle: every configuration once per round, and the runs of
/// each paired ratio next to each other (ngauge between its references), for many
/// seeds, with and without --compare.
#[test]
fn bench_latency_rounds_keep_each_pair_adjacent() {
    python(
        r#"
bl = load_script("bench-latency")
import random
pairs = [("ngauge poll", "C spin"), ("ngauge block", "C block"), ("ngauge block", "sockperf")]
firsts = set()
for compare in (False, True):
    tools = ["ngauge poll", "C spin", "ngauge block", "C block", "sockperf", "qperf"]
    if compare:
        tools += ["other poll", "other block"]
        pairs_here = pairs + [("ngauge poll", "other poll")]
    else:
        pairs_here = pairs
    for seed in range(200):
        order = bl.round_order(["tcp", "udp"], [1, 65000], compare, random.Random(seed))
        want = {(p, s, t) for p in ("tcp", "udp") for s in (1, 65000) for t in tools}
        assert sorted(order) == sorted(want), (seed, order)
        at = {k: i for i, k in enumerate(order)}
        for p in ("tcp", "udp"):
            for s in (1, 65000):
                for a, b in pairs_here:
                    assert abs(at[(p, s, a)] - at[(p, s, b)]) == 1, (seed, compare, a, b, order)
                if compare:
                    assert abs(at[(p, s, "ngauge block")] - at[(p, s, "other block")]) <= 2
        firsts.add(order[0][2])
# the shuffle does shuffle: more than one tool opens a round
assert len(firsts) > 2, firsts
"#,
    );
}

/// bench-launch: one barrier's time is what K more barriers add to the start, per
/// barrier; a run that is quicker than info counts as 0 (noise, not a negative
/// barrier); and the lock is taken without waiting (a second taker is told no).
#[test]
fn bench_launch_summarizes_per_rank_and_per_barrier_and_never_queues_for_the_lock() {
    python(
        r#"
bl = load_script("bench-launch")
import tempfile
runs = {("info", 16): [1.0, 3.0, 2.0], ("barriers", 16): [3.0, 2.5, 4.0],
        ("info", 4): [0.5], ("barriers", 4): [0.4]}
rows = bl.summarize(runs, 100)
assert [r["np"] for r in rows] == [4, 16], rows
assert rows[0]["barrier_ms"] == 0.0, rows
r = rows[1]
assert r["rounds"] == 3 and r["info_s"] == 2.0 and r["barriers_s"] == 3.0, r
assert abs(r["info_per_rank_ms"] - 125.0) < 1e-9, r
assert abs(r["barrier_ms"] - 10.0) < 1e-9, r
lock = os.path.join(tempfile.mkdtemp(), "lock")
first = bl.take_lock(lock)
assert first is not None
assert bl.take_lock(lock) is None
first.close()
assert bl.take_lock(lock) is not None
"#,
    );
}

/// bench-params-chain (issue 36, item 4): a round whose level witnesses (the
/// ping-pong before, loggp's own PRTT(1,0,s)/2, the ping-pong after) disagree by
/// more than the tolerance is a level flip, left out of the verdict, not a model
/// error; the message's ratio is the simulated receiver against the ping-pongs,
/// the collective's the simulated broadcast against coll.
#[test]
fn bench_params_chain_sets_level_flips_apart_and_compares_like_with_like() {
    python(
        r#"
bc = load_script("bench-params-chain")
assert not bc.level_flip((5.7, 6.0, 6.2), 0.10)
assert bc.level_flip((5.7, 10.2, 5.8), 0.10)
assert bc.level_flip((5.7, None, 10.2), 0.10)
assert not bc.level_flip((5.7, None, None), 0.10)
def m(before, loggp, after, receiver, root, coll):
    return {"before": before, "loggp": loggp, "after": after, "receiver": receiver,
            "root": root, "bcast": max(receiver, root), "coll": coll}
# The root's send call (10.6) outlasts the message (6.1): the issue's ratio is the
# root's, the message's is the receiver's, coll holds the broadcast.
j = bc.judge(1, m(6.0, 6.1, 6.2, 6.1, 10.6, 10.0), 0.10)
assert not j["flip"]
assert abs(j["message"] - 6.1 / 6.1) < 1e-12, j
assert abs(j["issue"] - 10.6 / 6.1) < 1e-12, j
assert abs(j["coll"] - 1.06) < 1e-12, j
# Round 2 flipped between its loggp and its ping-pongs: reported, not counted.
rounds = [[j], [bc.judge(1, m(5.7, 10.15, 5.67, 10.2, 10.6, None), 0.10)],
          [bc.judge(1, m(6.3, 6.2, 6.1, 5.9, 10.0, 9.6), 0.10)]]
assert rounds[1][0]["flip"]
v = bc.verdicts(rounds)[1]
assert v["flips"] == 1, v
med, lo, hi, n = v["message"]
assert n == 2 and abs(med - (1.0 + 5.9 / 6.2) / 2) < 1e-12, v
assert bc.within(v["message"]) and not bc.within(v["issue"]), v
assert v["coll"][3] == 2 and bc.within(v["coll"]), v
# A ping-pong whose level moved while it was measured is a flip, whatever its median.
moved = m(6.0, 6.1, 6.2, 6.1, 6.1, None)
moved["moved"] = True
assert bc.judge(1, moved, 0.10)["flip"]
# Without a coll figure the collective has no ratio; a size flipped in every round none.
v = bc.verdicts([[bc.judge(8, m(5.0, None, 9.0, 5.0, 1.0, None), 0.10)]])[8]
assert v["flips"] == 1 and v["message"] is None and v["coll"] is None, v
# bench-latency-level's level per chunk of consecutive round trips, in order.
bl = load_script("bench-latency-level")
assert bl.chunk_medians([5.7, 5.6, 5.8, 10.1, 10.3, 10.2, 9.9], 3) == [5.7, 10.2]
"#,
    );
}

/// bench-params-chain `--keep`: a round's loggp report and parameter file stay
/// beside the verdict (a round whose simulation misses its ping-pong can be read
/// afterwards); a stand-in ngauge answers the round's commands.
#[test]
fn bench_params_chain_keeps_each_rounds_loggp_report_and_parameters() {
    python(
        r##"
import json, tempfile
bc = load_script("bench-params-chain")
d = tempfile.mkdtemp()
fake = stand_in(os.path.join(d, "ngauge"), """#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
if "pingpong" in a:
    print(json.dumps({"results": [{"size": 1, "half_rtt_us": {"median": 5.0}}]}))
elif "loggp" in a:
    with open(a[a.index("--params-out") + 1], "w") as p:
        p.write('{"ranges": "stand-in"}')
    print(json.dumps({"points": [{"size": 1, "prtt_1_0_us": 10.0}], "ranges": [],
                      "changes_verdict": "decided"}))
else:
    print(json.dumps({"results": [{"size": 1, "finish_us": [4.0, 5.0], "predicted_us": 5.0}]}))
""")
work = tempfile.mkdtemp()
keep = os.path.join(d, "kept", "round-2-")
os.makedirs(os.path.dirname(keep))
measured, ranges = bc.one_round(fake, "1", [], work, False, keep)
assert measured[1]["receiver"] == 5.0 and measured[1]["loggp"] == 5.0, measured
with open(keep + "loggp.json") as f:
    assert json.load(f)["changes_verdict"] == "decided"
with open(keep + "params.json") as f:
    assert json.load(f) == {"ranges": "stand-in"}
measured, _ = bc.one_round(fake, "1", [], work, False)
assert sorted(os.listdir(os.path.dirname(keep))) == ["round-2-loggp.json", "round-2-params.json"]
"##,
    );
}

/// bench-ucx (issue 33): every launch of a round runs in every position equally
/// often over 2n rounds; a round whose launches sat at different levels of the
/// host (one at ~3x its tool's best) is a level flip, set apart, while a tool
/// that is slower than the other in every round (a real difference, not a
/// level) flips nothing; the verdict's ratios come from the rounds whose level
/// held, and are read at the fastest level apart.
#[test]
fn bench_ucx_rotates_its_launches_and_sets_level_flips_apart() {
    python(
        r#"
bu = load_script("bench-ucx")
for n in (2, 3):
    seen = {}
    for r in range(2 * n):
        order = bu.round_order(r, n)
        assert sorted(order) == list(range(n)), order
        for pos, job in enumerate(order):
            seen[(job, pos)] = seen.get((job, pos), 0) + 1
    assert set(seen.values()) == {2}, seen
    assert len(seen) == n * n, seen
# Latency (lower is better): ngauge 1.6x slower than tag_lat in every round, at
# either level: no flip. Round 2's tag_lat at the slow level, ngauge's not: flip.
lat = {"ngauge": [0.32, 0.96, 0.33, 0.95, 0.31],
       "ucx_perftest": [0.20, 0.60, 0.60, 0.59, 0.19]}
assert bu.level_flips(lat, True, 0.3) == [False, False, True, False, False]
w = bu.witnesses(lat, True)
# tag_lat is 0.625x ngauge (the median of the rounds' ratios), so its figures
# count at 1/0.625 of themselves; the fastest level is round 4's slowest, 0.31.
assert abs(w[0][0] - 0.32 / 0.31) < 1e-12 and abs(w[1][1] - 0.60 / 0.625 / 0.31) < 1e-12, w
kept = [x / y for x, y in zip(bu.same_level(lat["ngauge"], bu.level_flips(lat, True, 0.3)),
                              bu.same_level(lat["ucx_perftest"], bu.level_flips(lat, True, 0.3)))]
assert len(kept) == 4 and all(1.55 < k < 1.65 for k in kept), kept
# Bandwidth (higher is better): the best is the largest; one launch at a third of
# it while the other tool held: flip.
bw = {"ngauge": [9000.0, 3000.0, 9100.0], "ucx_perftest": [9400.0, 3200.0, 3100.0]}
assert bu.level_flips(bw, False, 0.3) == [False, False, True]
# Differences within the tolerance are not flips: the fast level's launches
# jitter between 0.16 and 0.21 us, within the default 50 %.
assert bu.level_flips({"a": [1.0, 1.2], "b": [1.0, 1.0]}, True, 0.3) == [False, False]
assert bu.level_flips({"a": [0.16, 0.21], "b": [0.21, 0.16]}, True, 0.5) == [False, False]
assert True in bu.level_flips({"a": [0.16, 0.21], "b": [0.21, 0.16]}, True, 0.3)
# One launch alone at a rarer, faster level (a tag_lat launch read 0.095 us
# among 0.16-0.65 in a quiet run, the only one of its 15 rounds) is not the
# level the others are judged by: its own round flips (ngauge there at the slow
# level), the rounds at one level do not (by its tool's best, every one would).
one_fast = {"rdtsc": [0.185, 0.185, 0.195, 0.180, 0.621, 0.190],
            "house": [0.216, 0.651, 0.165, 0.195, 0.636, 0.230],
            "ucx_perftest": [0.195, 0.195, 0.181, 0.160, 0.095, 0.186]}
assert bu.level_flips(one_fast, True, 0.5) == [False, True, False, False, True, False]
assert bu.at_fastest(one_fast, True, 0.5) == [True, False, True, True, False, True]
# A run's stderr read back (--from-log): every launch of a round, in order; a
# round the log holds only part of (a run stopped in it) is left out.
runs, rounds = bu.read_log([
    "round 0 lat ngauge 1 B: 0.651", "round 0 lat ngauge rdtsc 1 B: 0.185",
    "round 0 lat ucx_perftest 1 B: 0.195", "round 0 bw ngauge 65536 B: 9279.396",
    "round 1 lat ngauge rdtsc 1 B: 0.185", "round 1 lat ngauge 1 B: 0.216",
    "round 1 bw ngauge 65536 B: 13181.115", "round 1 lat ucx_perftest 1 B: 0.195",
    "round 2 lat ngauge 1 B: 0.2", "bench-ucx: load stayed >= 1.5",
])
assert rounds == 2, rounds
assert runs[("lat", "ngauge rdtsc", 1)] == [0.185, 0.185], runs
assert runs[("bw", "ngauge", 65536)] == [9279.396, 13181.115], runs
assert len(runs) == 4, runs
assert bu.same_level([1, 2, 3], [False, True, False]) == [1, 3]
# Rounds 0 and 4 ran at the fast level, 1 and 3 at the slow one (round 2 flipped).
assert bu.at_fastest(lat, True, 0.3) == [True, False, False, False, True]
"#,
    );
}
