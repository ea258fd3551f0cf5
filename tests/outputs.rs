//! Issue 38: no output lost. Every output file of a command line is checked before
//! anything is measured and is distinct from the others; a record that does not
//! fit is taken back; records stream as they finish; limits (threads, simulator
//! memory, parameter range) are one line, not a crash.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_ngauge");
const SIM: [&str; 14] = [
    "simulate", "--op", "bcast", "--algo", "binomial", "--np", "8", "--sizes", "1", "--L", "5",
    "--o", "1", "--g",
];

fn ngauge(args: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(args)
        .env_remove("NGAUGE_TEST_CLOCK_SKEW")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `args`, which must end within two minutes.
fn run(args: &[&str]) -> Output {
    let child = ngauge(args).spawn().unwrap();
    support::output_within(child, Duration::from_secs(120)).expect("ends")
}

/// The simulation flags with `--G 0.001` after `extra`.
fn sim(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = SIM.iter().map(|s| s.to_string()).collect();
    v.extend(["2", "--G", "0.001"].map(String::from));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// Asserts a usage error: exit status 2 and one line that contains `says`.
fn refused(out: &Output, says: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(says), "{says} in {err}");
    err
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("whole JSON lines"))
        .collect()
}

#[test]
fn issue38_two_outputs_naming_one_file_are_refused_before_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::os::unix::fs::symlink(d, d.join("link")).unwrap();
    let (same, x, dotdot, linked) = (p("same.out"), p("x.svg"), p("sub/../x.svg"), p("link/y"));
    let y = p("y");
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec![
                "-o",
                &same,
                "loggp",
                "--sizes",
                "1-4K:1K",
                "--params-out",
                &same,
            ],
            "also -o/--output",
        ),
        (
            vec!["loggp", "--plot", &x, "--params-out", &x],
            "also --params-out",
        ),
        (
            vec!["loggp", "--plot", &x, "--netgauge-out", &dotdot],
            "also --plot",
        ),
        (
            vec!["-o", &y, "late", "--plot", &linked],
            "also -o/--output",
        ),
    ];
    let began = Instant::now();
    for (args, says) in cases {
        refused(&run(&args), says);
    }
    // Refused before any rank started: nothing was measured, no file was left.
    assert!(began.elapsed() < Duration::from_secs(60));
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn issue38_compare_and_simulate_check_and_honour_their_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("sim.jsonl");
    let o = out.to_str().unwrap();
    let ok = run(&[
        "-o",
        o,
        "simulate",
        "--op",
        "bcast",
        "--algo",
        "binomial,linear",
        "--np",
        "8",
        "--sizes",
        "1,1K",
        "--L",
        "5",
        "--o",
        "1",
        "--g",
        "2",
        "--G",
        "0.001",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let predictions = lines(&out);
    assert_eq!(predictions.len(), 4, "{predictions:?}");
    assert!(predictions
        .iter()
        .all(|r| r["predicted_us"].as_f64().unwrap() > 0.0));

    let args = sim(&["--timeline", "/proc/t.svg"]);
    refused(
        &run(&args.iter().map(String::as_str).collect::<Vec<_>>()),
        "--timeline /proc/t.svg",
    );
    let args = sim(&["--timeline", o]);
    let mut argv = vec!["-o", o];
    argv.extend(args.iter().map(String::as_str));
    refused(&run(&argv), "also -o/--output");

    let doc = |median: f64| {
        serde_json::json!({"meta": {}, "results": [{"transport": "tcp", "size": 1,
            "half_rtt_us": {"median": median}}]})
    };
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    std::fs::write(&a, doc(1.0).to_string()).unwrap();
    std::fs::write(&b, doc(2.0).to_string()).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let rows = d.join("rows.jsonl");
    let r = rows.to_str().unwrap();
    let ok = run(&["compare", a, b, "-o", r]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let got = lines(&rows);
    assert_eq!(
        (got.len(), got[0]["ratio"].as_f64()),
        (1, Some(2.0)),
        "{got:?}"
    );
    refused(
        &run(&["compare", a, b, "--plot", "/proc/c.svg"]),
        "--plot /proc/c.svg",
    );
    refused(
        &run(&["compare", a, b, "--plot", r, "-o", r]),
        "also -o/--output",
    );
}

#[test]
fn issue38_a_run_directory_that_cannot_be_made_and_a_rank_the_job_lacks_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "[[experiment]]\nname = \"a\"\npingpong = { sizes = \"1\" }\n",
    )
    .unwrap();
    let s = suite.to_str().unwrap();
    refused(
        &run(&["run", s, "-o", "/proc/no/run"]),
        "cannot create the run directory",
    );
    refused(
        &run(&["--np", "2", "late", "--inject-rank", "9"]),
        "--inject-rank: 9 is not a rank",
    );
}

#[test]
fn issue38_limits_are_one_line_not_a_crash() {
    // Parameters whose sums leave the engine's range: not a "deadlock".
    let out = run(&[
        "simulate", "--op", "bcast", "--algo", "binomial", "--np", "8", "--sizes", "1", "--L",
        "1e308", "--o", "1e308", "--g", "1e308", "--G", "1e308",
    ]);
    refused(&out, "the simulator's range");
    // A simulation larger than the address space allowed: refused, not aborted.
    let sh = |script: &str| {
        let child = Command::new("sh")
            .args(["-c", script, "sh", EXE])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        support::output_within(child, Duration::from_secs(120)).expect("ends")
    };
    let out = sh(
        "ulimit -v 300000; exec \"$1\" simulate --op bcast --algo binomial \
                  --np 67108864 --sizes 1 --L 5 --o 1 --g 2 --G 0.001",
    );
    refused(&out, "simulate fewer ranks");
    // Too little address space for the launcher's threads: an error, not a panic.
    let out = sh("ulimit -v 20000; exec \"$1\" pingpong --sizes 1 --reps 10");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `sync -o` writes each synchronization as it finishes: an interrupt after one
/// keeps it.
#[test]
fn issue38_sync_streams_its_repetitions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let mut child = ngauge(&[
        "--np",
        "2",
        "-o",
        file.to_str().unwrap(),
        "sync",
        "--sync",
        "linear",
        "--reps",
        "50",
        "--check-after",
        "0s,1s",
    ])
    .spawn()
    .unwrap();
    let began = Instant::now();
    while std::fs::read_to_string(&file).map_or(true, |t| t.lines().count() < 1) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before its first record reached the file"
        );
        assert!(
            began.elapsed() < Duration::from_secs(180),
            "no record in 180 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = support::output_within(child, Duration::from_secs(30)).expect("ends");
    assert_eq!(out.status.code(), Some(130));
    let kept = lines(&file);
    assert!(!kept.is_empty());
    for (i, r) in kept.iter().enumerate() {
        assert_eq!(r["rep"].as_u64(), Some(i as u64), "{r}");
        assert_eq!(r["ranks"].as_array().map(Vec::len), Some(2), "{r}");
    }
}

/// A full disk: the record that did not fit is taken back, the file stays valid
/// JSON Lines, the error is one line that says the OS error once. Needs a small
/// tmpfs in a mount namespace of its own (root).
#[test]
fn issue38_a_full_disk_keeps_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // The file lives and dies with the namespace's tmpfs: printed from inside.
    let script = "mount -t tmpfs -o size=64k tmpfs \"$2\" || exit 99; \"$1\" pingpong \
                  --sizes 1-64K --reps 500 --samples -o \"$2/pp.jsonl\" >/dev/null; \
                  rc=$?; cat \"$2/pp.jsonl\"; exit $rc";
    let child = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh", EXE, d])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(child) = child else {
        return support::skip(
            "issue38_a_full_disk_keeps_whole_records",
            support::Lack::Host,
            "no unshare",
        );
    };
    let out = support::output_within(child, Duration::from_secs(300)).expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(99) || err.contains("unshare") {
        let why = format!("no tmpfs in a mount namespace here: {err}");
        return support::skip(
            "issue38_a_full_disk_keeps_whole_records",
            support::Lack::Host,
            why,
        );
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("(os error 28)").count(), 1, "{err}");
    let kept = String::from_utf8(out.stdout).unwrap();
    assert!(
        kept.ends_with('\n') && kept.len() > 1000,
        "{} bytes",
        kept.len()
    );
    for line in kept.lines() {
        serde_json::from_str::<Value>(line).expect("whole records only");
    }
}

/// Issue 37: `--csv FILE` holds the records of `-o` as CSV (one row per point,
/// the JSON's field names, numbers to 6 significant digits), and `--histogram`
/// adds each size's half round trips in log-spaced bins.
#[test]
fn issue_37_csv_rows_and_a_histogram_per_point() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("pp.csv");
    let out = run(&[
        "pingpong",
        "--sizes",
        "1,64",
        "--reps",
        "40",
        "--warmup",
        "2",
        "--histogram",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in doc["results"].as_array().unwrap() {
        let bins = r["histogram"]["bins"].as_array().expect("histogram");
        let total: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(total, 40, "{r}");
        assert!(r.get("samples").is_none(), "drawn, not kept: {r}");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for column in [
        "transport",
        "size",
        "half_rtt_us.median",
        "half_rtt_us.p99_9",
        "bandwidth_MBps",
    ] {
        assert!(header.contains(&column), "{column} in {header:?}");
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{text}");
    let median = header
        .iter()
        .position(|c| *c == "half_rtt_us.median")
        .unwrap();
    for row in rows {
        let cell = row.split(',').nth(median).unwrap();
        let significant = cell.trim_start_matches(['0', '.']);
        let digits = significant.chars().filter(char::is_ascii_digit).count();
        assert!(digits <= 7, "rounded: {cell}");
    }
}
