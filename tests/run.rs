//! `ngauge run` end to end: the shipped suites parse, a shortened quick.toml runs
//! through the real binary into the directory docs/commands/run.md describes, an
//! interrupted run is finished by `--resume` without running again what was done,
//! and bad suites get one line naming file, line and key, with exit status 2.

use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;

fn ngauge() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ngauge"));
    c.env_remove("NGAUGE_TEST_DIE_AFTER_SIZE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn run(c: &mut Command, limit_s: u64) -> std::process::Output {
    let child = c.spawn().expect("start ngauge");
    support::output_within(child, Duration::from_secs(limit_s)).expect("ngauge finished in time")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `ngauge run ARGS --json` (a suite with `--output`, or `--resume DIR`), which must
/// succeed within `limit_s`: its one JSON document, and its stderr.
fn run_suite(args: &[&OsStr], limit_s: u64) -> (Value, String) {
    let out = run(ngauge().arg("run").args(args).arg("--json"), limit_s);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ngauge run {args:?}: {stderr}");
    let doc = serde_json::from_slice(&out.stdout).expect("one JSON document");
    (doc, stderr)
}

/// `ngauge run SUITE --output DIR --json`: see [`run_suite`].
fn run_into(suite: &Path, dir: &Path, limit_s: u64) -> (Value, String) {
    run_suite(
        &[suite.as_os_str(), "--output".as_ref(), dir.as_os_str()],
        limit_s,
    )
}

/// `ngauge run --resume DIR --json`: its document (see [`run_suite`]).
fn resume(dir: &Path, limit_s: u64) -> Value {
    run_suite(&["--resume".as_ref(), dir.as_os_str()], limit_s).0
}

/// The records of a JSON Lines file.
fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// A suite file `name` with `text` in a fresh temporary directory: the directory
/// (removed when dropped), the file, and the output directory beside it.
fn suite(name: &str, text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join(name);
    std::fs::write(&suite, text).unwrap();
    let dir = tmp.path().join("out");
    (tmp, suite, dir)
}

fn bench_configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-configs")
}

#[test]
fn every_shipped_suite_parses() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(bench_configs()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let result = ngauge::suite::file::load(&path);
        match name.as_str() {
            "mpi-vs-raw.toml" | "osu.toml" if !cfg!(feature = "mpi") => {
                let e = result.unwrap_err();
                assert!(e.to_string().contains("--features mpi"), "{e}");
            }
            _ => {
                let suite = result.unwrap_or_else(|e| panic!("{e}"));
                assert!(!suite.experiments.is_empty(), "{name}");
                assert!(
                    suite.seed.is_some(),
                    "{name}: shipped suites fix their seed"
                );
                if name == "collectives.toml" {
                    assert!(suite
                        .experiments
                        .iter()
                        .all(|e| matches!(e.kind, ngauge::spec::CommandSpec::Coll(_))));
                }
            }
        }
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "collectives.toml",
            "loggp-tcp-udp.toml",
            "mpi-vs-raw.toml",
            "osu.toml",
            "protocol-switches.toml",
            "quick.toml",
            "sync.toml"
        ]
    );
}

/// osu.toml plans OSU's default sweeps: latency and bandwidth from 1 B to 4 MiB
/// (powers of two), the collectives from 1 B (8 B for the reductions) to 1 MiB,
/// with OSU's iteration counts on either side of its 8 KiB threshold (issue 39).
/// Without the MPI transport compiled, the plan is checked on its TCP half.
#[test]
fn the_osu_suite_plans_osus_default_sweeps() {
    use ngauge::spec::CommandSpec;
    let mut text = std::fs::read_to_string(bench_configs().join("osu.toml")).unwrap();
    if !cfg!(feature = "mpi") {
        text = text
            .replace(r#"transports = ["mpi", "tcp"]"#, r#"transports = ["tcp"]"#)
            .replace(r#"algo = ["mpi", "#, "algo = [");
    }
    let (_tmp, path, _) = suite("osu.toml", &text);
    let suite = ngauge::suite::file::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = suite.experiments.iter().map(|e| e.name.as_str()).collect();
    for op in [
        "latency",
        "bw",
        "reduce",
        "allgather",
        "reduce-scatter",
        "scatter",
    ] {
        for part in ["small", "large"] {
            let name = format!("osu-{op}-{part}");
            assert!(names.contains(&name.as_str()), "{name} in {names:?}");
        }
    }
    // Every benchmark's sizes over its two experiments, and the iteration counts
    // on either side of OSU's 8 KiB threshold.
    let mut swept: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for e in &suite.experiments {
        let (label, sizes, reps, small_reps, large_reps) = match &e.kind {
            CommandSpec::Pingpong(p) if p.window > 1 => ("bw".into(), &p.sizes.0, p.reps, 100, 20),
            CommandSpec::Pingpong(p) => ("latency".into(), &p.sizes.0, p.reps, 10000, 1000),
            CommandSpec::Coll(c) => (c.op.to_string(), &c.sizes.0, c.reps, 1000, 100),
            _ => panic!("{}: not an OSU benchmark", e.name),
        };
        let want = if sizes[0] > 8192 {
            large_reps
        } else {
            small_reps
        };
        assert_eq!(reps, want, "{}", e.name);
        swept.entry(label).or_default().extend(sizes);
    }
    let powers = |from: u32, to: u32| (from..=to).map(|k| 1u64 << k).collect::<Vec<_>>();
    for (label, mut sizes) in swept {
        sizes.sort();
        let want = match label.as_str() {
            "latency" | "bw" => powers(0, 22),
            "reduce" | "reduce_scatter" => powers(3, 20),
            _ => powers(0, 20),
        };
        assert_eq!(sizes, want, "{label}");
    }
}

/// quick.toml with small sizes and 2 launches, so the test takes seconds.
fn short_quick() -> String {
    let text = std::fs::read_to_string(bench_configs().join("quick.toml")).unwrap();
    let mut out = String::new();
    let mut section = "";
    for line in text.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        if line.starts_with("[experiment.") {
            section = if line.contains("pingpong") {
                "pingpong"
            } else if line.contains("loggp") {
                "loggp"
            } else {
                "timer"
            };
        }
        let replaced = match (section, key) {
            (_, "launches") => Some("launches = 2".to_string()),
            (_, "output") => Some(String::new()),
            ("pingpong", "sizes") => Some("sizes = \"1-64\"".into()),
            ("pingpong", "reps") => Some("reps = 30".into()),
            ("loggp", "sizes") => Some("sizes = \"1-4K:1K\"".into()),
            ("loggp", "reps") => Some("reps = 3".into()),
            _ => None,
        };
        out += &replaced.unwrap_or_else(|| line.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn a_short_quick_suite_fills_its_directory_and_compares_with_itself() {
    let (_tmp, suite, dir) = suite("quick.toml", &short_quick());
    let (doc, stderr) = run_into(&suite, &dir, 300);
    assert_eq!(
        (doc["runs"].as_u64(), doc["done"].as_u64()),
        (Some(6), Some(6)),
        "{doc}"
    );
    assert_eq!(doc["left"], 0);
    assert_eq!(doc["failed"].as_array().map(Vec::len), Some(0));
    assert!(
        !stderr.contains('\r'),
        "no progress bar without a terminal: {stderr}"
    );

    // The directory of docs/commands/run.md.
    assert_eq!(
        std::fs::read_to_string(dir.join("suite.toml")).unwrap(),
        short_quick()
    );
    let plan = json(&dir.join("plan.json"));
    assert_eq!(plan["seed"], 1);
    assert_eq!(plan["launches"].as_array().unwrap().len(), 2);
    for k in 0..2 {
        let launch = json(&dir.join(format!("launches/launch-{k}.json")));
        let runs = launch["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        let order: Vec<&str> = launch["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ran: Vec<&str> = runs
            .iter()
            .map(|r| r["experiment"].as_str().unwrap())
            .collect();
        assert_eq!(order, ran, "runs in the launch's shuffled order");
        for r in runs {
            assert_eq!(r["status"], "done");
            let f = &r["factors"];
            for key in [
                "implementation",
                "transport",
                "compiler",
                "flags",
                "frequency",
                "launcher",
                "timer",
                "host",
                "kernel",
                "date",
            ] {
                assert!(f[key].is_string(), "factor {key} in {r}");
            }
        }
    }
    for exp in ["timer", "pingpong-tcp", "loggp-tcp"] {
        let run_dir = dir.join("runs").join(exp);
        let spec = json(&run_dir.join("experiment.json"));
        assert_eq!(spec["name"], exp);
        for k in 0..2 {
            assert!(json(&run_dir.join(format!("launch-{k}.json")))["meta"].is_object());
            assert!(run_dir.join(format!("launch-{k}.stderr")).is_file());
        }
        let launches: std::collections::BTreeSet<u64> = jsonl(&dir.join(format!("{exp}.jsonl")))
            .iter()
            .map(|r| r["launch"].as_u64().unwrap())
            .collect();
        assert_eq!(launches.into_iter().collect::<Vec<_>>(), [0, 1], "{exp}");
        let csv = std::fs::read_to_string(dir.join(format!("{exp}.csv"))).unwrap();
        assert!(csv.starts_with("launch,"), "{exp}: {csv}");
    }
    // Timer runs of a suite keep every read's cost.
    let timer = json(&dir.join("runs/timer/launch-1.json"));
    let reads = timer["reads"].as_u64().unwrap();
    assert_eq!(
        timer["samples"]["overhead_ns"].as_array().map(Vec::len),
        Some(reads as usize)
    );
    // Pingpong runs of a suite record their repetitions.
    let pp = json(&dir.join("runs/pingpong-tcp/launch-0.json"));
    assert_eq!(
        pp["results"][0]["samples"]["half_rtt_us"]
            .as_array()
            .map(Vec::len),
        Some(30)
    );
    assert_eq!(
        json(&dir.join("runs/pingpong-tcp/experiment.json"))["pingpong"]["samples"],
        true
    );

    let summary = json(&dir.join("summary.json"));
    let exps = summary["experiments"].as_array().unwrap();
    let names: Vec<&str> = exps
        .iter()
        .map(|e| e["experiment"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["loggp-tcp", "pingpong-tcp", "timer"]);
    let pp = &exps[1];
    assert_eq!(pp["metric"], "half_rtt_us");
    assert_eq!(pp["sizes"].as_array().unwrap().len(), 7);
    assert_eq!(
        pp["sizes"][0]["launch_medians"].as_array().unwrap().len(),
        2
    );
    assert_eq!(pp["sizes"][0]["repetitions_recorded"], true);
    let timer = &exps[2];
    assert_eq!(timer["metric"], "overhead_ns");
    assert_eq!(timer["sizes"][0]["repetitions_recorded"], true);
    assert_eq!(
        timer["sizes"][0]["launches"][0]["n"].as_u64(),
        Some(reads),
        "every read enters the launch's statistics: {timer}"
    );
    assert!(std::fs::read_to_string(dir.join("summary.csv"))
        .unwrap()
        .starts_with("experiment,metric,size_bytes"));

    // The directory compared with itself: every ratio 1.
    let out = run(
        ngauge().arg("compare").arg(&dir).arg(&dir).arg("--json"),
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = c["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        7 + 5 + 1,
        "7 pingpong sizes, 5 loggp sizes, the timer"
    );
    assert!(rows.iter().all(|r| r["ratio"] == 1.0), "{c}");
}

/// A coll and a sync experiment through a suite: each runs from its spec in
/// `ngauge exec`, and every repetition (each valid call, each synchronization)
/// lands in the JSON Lines, the CSV and the summary's statistics per launch.
#[test]
fn coll_and_sync_experiments_record_their_repetitions() {
    let (_tmp, suite, dir) = suite(
        "coll.toml",
        "seed = 4\nlaunches = 2\n\
         [[experiment]]\nname = \"bcast\"\nnp = 3\n\
         job = { transports = [\"tcp\"], wait = \"block\" }\n\
         [experiment.coll]\nop = \"bcast\"\nalgo = [\"binomial\", \"linear\"]\n\
         sizes = \"8,1K\"\nscheme = \"barrier\"\nreps = 20\nwarmup = 2\n\
         [[experiment]]\nname = \"clocks\"\njob = { transports = [\"tcp\"], wait = \"block\" }\n\
         sync = { sync = \"linear\", reps = 3, check_after_s = [0.0] }\n",
    );
    let (doc, _) = run_into(&suite, &dir, 300);
    assert_eq!(
        (doc["runs"].as_u64(), doc["done"].as_u64()),
        (Some(4), Some(4)),
        "{doc}"
    );
    assert_eq!(
        json(&dir.join("runs/bcast/experiment.json"))["coll"]["samples"],
        true,
        "ngauge run asks for the repetitions"
    );

    // bcast.jsonl: per launch, algorithm and size one record with every valid
    // call's run-time.
    let lines = jsonl(&dir.join("bcast.jsonl"));
    assert_eq!(lines.len(), 2 * 2 * 2, "launches x algorithms x sizes");
    let mut seen = std::collections::BTreeSet::new();
    for r in &lines {
        assert_eq!(
            (r["op"].as_str(), r["np"].as_u64()),
            (Some("bcast"), Some(3)),
            "{r}"
        );
        assert_eq!(r["scheme"], "barrier");
        let samples = r["samples"]["runtime_us"].as_array().expect("samples");
        assert_eq!(Some(samples.len() as u64), r["valid"].as_u64(), "{r}");
        assert_eq!(
            samples.len(),
            20,
            "the barrier scheme times every call: {r}"
        );
        seen.insert((
            r["launch"].as_u64().unwrap(),
            r["algo"].as_str().unwrap().to_string(),
            r["size"].as_u64().unwrap(),
        ));
    }
    assert_eq!(seen.len(), 8, "{seen:?}");
    let csv = std::fs::read_to_string(dir.join("bcast.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.starts_with("launch,"), "{header}");
    assert!(
        header.split(',').any(|c| c == "runtime_us.median"),
        "{header}"
    );
    assert_eq!(csv.lines().count(), 1 + 8);

    // clocks.jsonl: one record per launch, with its three synchronizations.
    let lines = jsonl(&dir.join("clocks.jsonl"));
    assert_eq!(lines.len(), 2);
    for r in &lines {
        assert_eq!(r["reps"], 3);
        for field in ["duration_us", "max_abs_residual_ns"] {
            let v = r["samples"][field].as_array().expect("samples");
            assert_eq!(v.len(), 3, "{field}: {r}");
            assert!(
                v.iter().all(|x| x.as_f64().is_some_and(|x| x >= 0.0)),
                "{r}"
            );
        }
        // The document's figures are the first repetition's.
        assert_eq!(r["duration_us"], r["samples"]["duration_us"][0]);
    }
    assert!(std::fs::read_to_string(dir.join("clocks.csv"))
        .unwrap()
        .starts_with("launch,"));

    // The summary: the repetitions of each launch, per experiment and size.
    let summary = json(&dir.join("summary.json"));
    let exps = summary["experiments"].as_array().unwrap();
    let names: Vec<&str> = exps
        .iter()
        .map(|e| e["experiment"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bcast/tcp/bcast/binomial",
            "bcast/tcp/bcast/linear",
            "clocks"
        ]
    );
    for e in &exps[..2] {
        assert_eq!(e["metric"], "runtime_us");
        let sizes = e["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 2);
        for s in sizes {
            assert_eq!(s["repetitions_recorded"], true);
            let launches = s["launches"].as_array().unwrap();
            assert_eq!(launches.len(), 2);
            assert!(launches.iter().all(|l| l["n"] == 20), "{s}");
        }
    }
    let clocks = &exps[2];
    assert_eq!(clocks["metric"], "max_abs_residual_ns");
    assert_eq!(clocks["sizes"][0]["repetitions_recorded"], true);
    assert!(clocks["sizes"][0]["launches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["n"] == 3));
    assert!(std::fs::read_to_string(dir.join("summary.csv"))
        .unwrap()
        .contains("bcast/tcp/bcast/linear,runtime_us,1024,2,"));
}

/// Issue 31: a suite runs `noise` from its table as the command line would; its
/// summary is the CPU fraction lost, every rank's core pooled per launch.
#[test]
fn a_noise_experiment_runs_in_a_suite() {
    let (_tmp, suite, dir) = suite(
        "noise.toml",
        "launches = 2\n[[experiment]]\nname = \"quiet\"\n\
         [experiment.noise]\nduration_ns = 1e7\n",
    );
    let (doc, _) = run_into(&suite, &dir, 300);
    assert_eq!(
        (doc["runs"].as_u64(), doc["done"].as_u64()),
        (Some(2), Some(2)),
        "{doc}"
    );
    let lines = jsonl(&dir.join("quiet.jsonl"));
    assert_eq!(lines.len(), 2 * 2, "launches x ranks: {lines:?}");
    assert!(lines.iter().all(|r| r["cpu_fraction_lost"].is_number()));
    let summary = json(&dir.join("summary.json"));
    let e = &summary["experiments"][0];
    assert_eq!(
        (e["experiment"].as_str(), e["metric"].as_str()),
        (Some("quiet"), Some("cpu_fraction_lost")),
        "{summary}"
    );
    assert_eq!(e["sizes"][0]["launch_numbers"], serde_json::json!([0, 1]));
}

/// Issue 31: a suite runs `late` and `nbc` from their tables (the collective in
/// their `coll` table) as the command line would; nbc's summary is the overlap,
/// late's the delay overlap benefit when the host let it decide one.
#[test]
fn late_and_nbc_experiments_run_in_a_suite() {
    let light = "reps = 10\nwarmup = 3\nmax_rounds = 8\nsync = \"logp\"\n";
    let (_tmp, suite, dir) = suite(
        "windowed.toml",
        &format!(
            "[[experiment]]\nname = \"late\"\n[experiment.late]\ndelay_ns = [0]\n\
             [experiment.late.coll]\nop = \"barrier\"\n{light}\
             [[experiment]]\nname = \"nbc\"\n[experiment.nbc]\nsizes = \"8\"\n\
             [experiment.nbc.coll]\n{light}"
        ),
    );
    let (doc, _) = run_into(&suite, &dir, 300);
    assert_eq!(
        (doc["runs"].as_u64(), doc["done"].as_u64()),
        (Some(2), Some(2)),
        "{doc}"
    );
    let late = jsonl(&dir.join("late.jsonl"));
    assert_eq!(late.len(), 1, "one size, mode and delay: {late:?}");
    assert_eq!(late[0]["delay_us"], 0.0, "{late:?}");
    let nbc = jsonl(&dir.join("nbc.jsonl"));
    assert_eq!(nbc.len(), 1, "one size, scheme and interval: {nbc:?}");
    let summary = json(&dir.join("summary.json"));
    let metric = |name: &str| {
        summary["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["experiment"]
                    .as_str()
                    .is_some_and(|x| x.starts_with(name))
            })
            .map(|e| e["metric"].clone())
    };
    assert_eq!(metric("nbc"), Some("overlap_pct".into()), "{summary}");
    if late[0]["benefit"].is_number() {
        assert_eq!(metric("late"), Some("benefit".into()), "{summary}");
    }
}

/// The processes whose command line names `needle` (the runs of one directory).
fn processes_naming(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            out.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    out
}

/// A runner killed with SIGKILL cannot stop its run: the run's processes die with
/// it (the kernel's parent-death signal), so none keeps measuring beside a resumed
/// suite, and `--resume` runs what was not done, not what was.
///
/// The kill lands mid-suite and mid-run without long measurements: each run is
/// one clock synchronization whose ranks then sleep 6 s before their residual
/// check, and the test waits for the first run's document, then for the second
/// run's launcher and ranks, and kills the runner then. Ranks that outlived their
/// runner would finish that check and write their document and record: the test
/// waits for the processes to end and finds neither.
#[test]
fn a_run_dies_with_a_runner_killed_by_sigkill_and_resume_finishes() {
    let (_tmp, suite, dir) = suite(
        "s.toml",
        "seed = 2\nlaunches = 2\n\
         [[experiment]]\nname = \"a\"\njob = { transports = [\"tcp\"], wait = \"block\" }\n\
         sync = { sync = \"linear\", reps = 1, check_after_s = [6.0] }\n",
    );
    let mut child = ngauge()
        .arg("run")
        .arg(&suite)
        .arg("--output")
        .arg(&dir)
        .spawn()
        .unwrap();
    let began = Instant::now();
    let first = dir.join("runs/a/launch-0.json");
    while !first.exists() {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no run finished"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let first_doc = std::fs::read(&first).unwrap();
    let partial = dir.join("runs/a/launch-1.json.partial");
    let needle = dir.join("runs").display().to_string();
    // The second run's launcher and its two ranks.
    while !partial.exists() || processes_naming(&needle).len() < 3 {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "the second run's ranks did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    loop {
        let left = processes_naming(&needle);
        if left.is_empty() {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "the run outlived its runner: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Order, not a deadline: ranks that outlived their runner would have finished
    // their residual check and written their document (to the `.partial` file that
    // is the run's stdout) and their record (to the run's stream). Neither exists.
    let written = |path: &std::path::Path| std::fs::read(path).map_or(0, |b| b.len());
    assert_eq!(
        written(&partial),
        0,
        "the run outlived its runner and finished"
    );
    assert_eq!(
        written(&dir.join("runs/a/launch-1.jsonl")),
        0,
        "the run outlived its runner and wrote its record"
    );
    assert!(!dir.join("runs/a/launch-1.json").exists());

    let doc = resume(&dir, 300);
    assert_eq!(
        (doc["done"].as_u64(), doc["left"].as_u64()),
        (Some(2), Some(0)),
        "{doc}"
    );
    assert!(
        dir.join("runs/a/launch-0.json").is_file() && dir.join("runs/a/launch-1.json").is_file()
    );
    assert_eq!(
        std::fs::read(&first).unwrap(),
        first_doc,
        "the run finished before the kill was not run again"
    );
}

#[test]
fn an_interrupted_suite_keeps_its_finished_runs_and_resume_runs_only_the_rest() {
    // Each run takes a second or more here; 3 launches of 2 experiments.
    let (_tmp, suite, dir) = suite(
        "s.toml",
        "seed = 9\nlaunches = 3\n\
         [[experiment]]\nname = \"a\"\npingpong = { sizes = \"1-1K\", reps = 2000, warmup = 10 }\n\
         [[experiment]]\nname = \"b\"\npingpong = { sizes = \"1-1K\", reps = 2000, warmup = 10 }\n",
    );
    let child = ngauge()
        .arg("run")
        .arg(&suite)
        .arg("--output")
        .arg(&dir)
        .spawn()
        .unwrap();
    let began = Instant::now();
    let done = |d: &Path| {
        ["a", "b"]
            .iter()
            .flat_map(|e| (0..3).map(move |k| d.join(format!("runs/{e}/launch-{k}.json"))))
            .filter(|p| p.is_file())
            .count()
    };
    while done(&dir) == 0 {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no run finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Stop while a run is under way: its output goes to a `.partial` file and its
    // document does not exist yet.
    let partial = |d: &Path| {
        ["a", "b"].iter().any(|e| {
            let runs = d.join("runs").join(e);
            std::fs::read_dir(&runs).is_ok_and(|entries| {
                entries.filter_map(Result::ok).any(|f| {
                    let name = f.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".partial")
                        .is_some_and(|doc| !runs.join(doc).exists())
                })
            })
        })
    };
    while !partial(&dir) {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no second run started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = support::output_within(child, Duration::from_secs(60)).expect("stopped in time");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let kept = done(&dir);
    assert!((1..6).contains(&kept), "{kept} runs done before the stop");
    // No partial document is left behind.
    for e in ["a", "b"] {
        for entry in std::fs::read_dir(dir.join("runs").join(e)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".partial") && !name.ends_with(".tmp"),
                "{name}"
            );
        }
    }
    let started_before: usize = (0..3)
        .filter_map(|k| std::fs::read_to_string(dir.join(format!("launches/launch-{k}.json"))).ok())
        .map(|t| {
            serde_json::from_str::<Value>(&t).unwrap()["runs"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert!(
        started_before > kept,
        "the stopped run is recorded as interrupted"
    );

    let doc = resume(&dir, 300);
    assert_eq!(done(&dir), 6);
    assert_eq!(doc["done"], 6);
    // Every (launch, experiment) finished exactly once: the kept runs were not run again.
    for k in 0..3 {
        let launch = json(&dir.join(format!("launches/launch-{k}.json")));
        for e in ["a", "b"] {
            let finished = launch["runs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["experiment"] == e && r["status"] == "done")
                .count();
            assert_eq!(finished, 1, "launch {k}, experiment {e}: {launch}");
        }
    }
    let interrupted = (0..3)
        .map(|k| json(&dir.join(format!("launches/launch-{k}.json"))))
        .flat_map(|l| l["runs"].as_array().unwrap().clone())
        .filter(|r| r["status"] == "interrupted")
        .count();
    assert_eq!(interrupted, 1);
    let summary = json(&dir.join("summary.json"));
    assert_eq!(
        summary["experiments"][0]["sizes"][0]["launch_medians"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // A finished directory resumed again runs nothing.
    let doc = resume(&dir, 60);
    assert_eq!(
        (doc["done"].as_u64(), doc["left"].as_u64()),
        (Some(6), Some(0))
    );
}

/// Runs `ngauge run` on a suite with `text`, expecting exit status 2 and one line.
fn refused(text: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("bad.toml");
    std::fs::write(&suite, text).unwrap();
    let out = run(
        ngauge()
            .current_dir(tmp.path())
            .args(["run", "bad.toml", "--output", "never"]),
        30,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(out.stdout.is_empty());
    assert!(!tmp.path().join("never").exists(), "nothing ran");
    stderr
}

#[test]
fn bad_suites_are_one_line_naming_file_line_and_key_with_status_2() {
    let head = "[[experiment]]\nname = \"a\"\n";
    let e = refused(&format!(
        "{head}[experiment.pingpong]\nsizes = \"1-8\"\nrepz = 5\n"
    ));
    assert!(
        e.contains("bad.toml:5:1: experiment[0].pingpong.repz: unknown field `repz`"),
        "{e}"
    );
    let e = refused(&format!("{head}pingpong = {{ reps = \"many\" }}\n"));
    assert!(
        e.contains("bad.toml:3:")
            && e.contains("experiment[0].pingpong.reps: invalid type: string \"many\""),
        "{e}"
    );
    let e = refused(&format!("{head}pingpong = {{ sizes = \"1-3x\" }}\n"));
    assert!(
        e.contains("bad.toml:3:") && e.contains("experiment[0].pingpong.sizes: invalid size"),
        "{e}"
    );
    let e = refused(&format!(
        "{head}job = {{ transports = [\"pigeon\"] }}\npingpong = {{}}\n"
    ));
    assert!(
        e.contains("bad.toml:3:")
            && e.contains("experiment[0].job.transports[0]")
            && e.contains("pigeon"),
        "{e}"
    );
    let e = refused(&format!(
        "launches = 2\n{head}loggp = {{ sizes = [1, 2] }}\n"
    ));
    assert!(
        e.contains("bad.toml:4:")
            && e.contains("experiment[0].loggp.sizes: LogGP fits need at least 3"),
        "{e}"
    );
    let coll = format!("{head}np = 3\n[experiment.coll]\nop = \"bcast\"\nsizes = \"1,1K\"\n");
    let e = refused(&format!("{coll}segmnt = 8192\n"));
    assert!(
        e.contains("bad.toml:7:1: experiment[0].coll.segmnt: unknown field `segmnt`"),
        "{e}"
    );
    let e = refused(&format!("{coll}reps = \"many\"\n"));
    assert!(
        e.contains("bad.toml:7:") && e.contains("experiment[0].coll.reps: invalid type"),
        "{e}"
    );
    let e = refused(&coll.replace("1,1K", "1,1Q"));
    assert!(
        e.contains("bad.toml:6:") && e.contains("experiment[0].coll.sizes: invalid size"),
        "{e}"
    );
    let e = refused(&format!("{coll}algo = [\"pigeon\"]\n"));
    assert!(
        e.contains("bad.toml:7:1: experiment[0].coll.algo:") && e.contains("pigeon"),
        "{e}"
    );
    let e = refused(&format!("{coll}root = 3\n"));
    assert!(
        e.contains("bad.toml:7:1: experiment[0].coll.root: 3 is not a rank of a job of 3 ranks"),
        "{e}"
    );
    let e = refused("seed = \"x\n");
    assert!(e.contains("bad.toml:1:"), "{e}");
}

#[test]
fn a_directory_in_use_and_a_directory_that_is_no_run_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("s.toml");
    std::fs::write(
        &suite,
        "[[experiment]]\nname = \"t\"\ntimer = { reads = 1000 }\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("x"), "").unwrap();
    let out = run(
        ngauge()
            .arg("run")
            .arg(&suite)
            .arg("--output")
            .arg(tmp.path()),
        30,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists and is not empty"));
    let out = run(ngauge().arg("run").arg("--resume").arg(tmp.path()), 30);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a run directory"));
}

#[test]
fn job_flags_given_to_run_are_refused_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("s.toml");
    std::fs::write(
        &suite,
        "[[experiment]]\nname = \"t\"\ntimer = { reads = 1000 }\n",
    )
    .unwrap();
    for (args, flag) in [
        (&["--np", "4", "run"][..], "--np"),
        (&["run", "-t", "udp"][..], "-t/--transport"),
        (
            &["-t", "tcp", "run", "--wait", "block"][..],
            "-t/--transport, --wait",
        ),
    ] {
        let out = run(
            ngauge()
                .current_dir(tmp.path())
                .args(args)
                .arg(&suite)
                .args(["--output", "never"]),
            30,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!("ngauge: error: {flag}: `ngauge run` takes")),
            "{stderr}"
        );
        assert!(!stderr.contains("  "), "one line, single-spaced: {stderr}");
        assert!(!tmp.path().join("never").exists(), "nothing ran");
    }
    // The same flags elsewhere, and --json with run, are fine.
    let out = run(
        ngauge()
            .current_dir(tmp.path())
            .args(["run", "--json"])
            .arg(&suite)
            .args(["--output", "ok"]),
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
