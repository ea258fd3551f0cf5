//! The verdict logic of the benchmark scripts (`scripts/paired_verdict.py`,
//! `scripts/bench-latency`), on data whose answer is known. The scripts are
//! Python; these tests run them with `python3` (on every machine the project
//! supports: Debian's python3, which the test command's packages pull in).

use std::process::Command;

/// Runs `code` in python3 with `scripts/` on the module path; panics with its
/// output unless it exits 0.
fn python(code: &str) -> String {
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
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
word, text = v([17.0] * 10 + [10.0] * 10, [10.0] * 20)
assert word == "fails" and "10 of 20 against 0 of 20" in text, text
"#,
    );
}

/// bench-latency's shuffle: every configuration once per round, and the runs of
/// each paired ratio next to each other (ngauge between its references), for many
/// seeds, with and without --compare.
#[test]
fn bench_latency_rounds_keep_each_pair_adjacent() {
    python(
        r#"
import importlib.machinery, importlib.util, os, random
path = os.path.join(os.environ["PYTHONPATH"], "bench-latency")
loader = importlib.machinery.SourceFileLoader("bench_latency", path)
spec = importlib.util.spec_from_loader("bench_latency", loader)
bl = importlib.util.module_from_spec(spec)
loader.exec_module(bl)
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
