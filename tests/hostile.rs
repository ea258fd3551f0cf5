//! Issue 18: hostile and careless clients against a real job. Rank 0 and rank 1 are
//! real processes started by hand; strangers attack rank 0's rendezvous port while
//! the job starts, and the job must complete as if they were not there.
//!
//! The data-plane listeners (TCP transport, liveness links) are open only for the
//! milliseconds of setup on an ephemeral port, so their attacks run in process,
//! against the real listener code: `ngauge-tcp`'s
//! `issue18_strangers_on_the_data_listener_do_not_disturb_the_job` and
//! `ngauge_transport::auth`'s tests.

use ngauge::launch::frame::{self, Join, Kind};
use ngauge::launch::local::ANNOUNCE;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support;

const EXE: &str = env!("CARGO_BIN_EXE_ngauge");
const TOKEN: &str = "hostile-suite-token-0123456789";
/// `--timeout` of the real ranks: long, so that a stranger who stalled the job for
/// a timeout (or a flood that kept rank 1 out) shows as twice the time the job
/// takes even on a loaded machine (91 s at a load of 35 on two cores).
const JOB_TIMEOUT_S: &str = "300";
/// The attacks that burn CPU (200 connections, a flood) run one at a time.
static ONE_ATTACK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn raw(args: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(args);
    for var in [
        "NGAUGE_RANK",
        "NGAUGE_SIZE",
        "NGAUGE_RENDEZVOUS",
        "NGAUGE_JOB_TOKEN",
        "NGAUGE_LAUNCHER",
        "NGAUGE_ANNOUNCE",
    ] {
        c.env_remove(var);
    }
    c.stdin(Stdio::null());
    c
}

/// Rank 0 of a 2-rank job by hand, under `sh -c "PRELUDE; exec ngauge ..."`;
/// returns it, its rendezvous address and its stderr lines.
fn start_rank0(prelude: &str, args: &[&str]) -> (Child, String, mpsc::Receiver<String>) {
    let mut words = vec![
        EXE.to_string(),
        "--rank".into(),
        "0".into(),
        "--size".into(),
        "2".into(),
        "--bind".into(),
        "127.0.0.1:0".into(),
        "--job-token".into(),
        TOKEN.into(),
        "--timeout".into(),
        JOB_TIMEOUT_S.into(),
    ];
    words.extend(args.iter().map(|a| a.to_string()));
    let script = format!("{prelude}; exec {}", words.join(" "));
    let mut sh = Command::new("sh");
    sh.args(["-c", &script]);
    for var in [
        "NGAUGE_RANK",
        "NGAUGE_SIZE",
        "NGAUGE_JOB_TOKEN",
        "NGAUGE_LAUNCHER",
    ] {
        sh.env_remove(var);
    }
    let mut child = sh
        .env("NGAUGE_ANNOUNCE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix(ANNOUNCE) {
                    return (child, addr.trim().to_string(), rx);
                }
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("rank 0 did not announce its address: {e}");
            }
        }
    }
}

fn start_rank1(addr: &str, args: &[&str]) -> Child {
    let mut all = vec![
        "--rank",
        "1",
        "--size",
        "2",
        "--rendezvous",
        addr,
        "--job-token",
        TOKEN,
        "--timeout",
        JOB_TIMEOUT_S,
    ];
    all.extend_from_slice(args);
    raw(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn join_frame(token: &str, rank: u32) -> Vec<u8> {
    let join = Join {
        token: token.into(),
        rank,
        size: 2,
        data_addr: "127.0.0.1".parse().unwrap(),
        host: "intruder".into(),
        pid: 1,
    };
    frame::encode(Kind::Join, &join.encode())
}

/// What rank 0 sends a stranger that wrote `bytes` (empty when it just closes).
fn attack(addr: &str, bytes: &[u8]) -> std::thread::JoinHandle<Vec<u8>> {
    let (addr, bytes) = (addr.to_string(), bytes.to_vec());
    std::thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            return Vec::new();
        };
        let _ = s.write_all(&bytes);
        let _ = s.set_read_timeout(Some(Duration::from_secs(15)));
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        got
    })
}

const JOB: [&str; 6] = ["pingpong", "--sizes", "1,4K", "--reps", "50", "--json"];

#[test]
fn issue18_empty_token_is_refused() {
    for (how, env, args) in [
        (
            "--job-token ''",
            None,
            vec!["--job-token", "", "--np", "2", "info"],
        ),
        ("NGAUGE_JOB_TOKEN=", Some(""), vec!["--np", "2", "info"]),
        (
            "a short token",
            Some("abc"),
            vec!["--rank", "1", "--size", "2", "info"],
        ),
    ] {
        let mut c = raw(&args);
        if let Some(v) = env {
            c.env("NGAUGE_JOB_TOKEN", v);
        }
        let out = support::output_within(
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            Duration::from_secs(20),
        )
        .expect("exits at once");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{how}: {err}");
        assert_eq!(err.lines().count(), 1, "{how}: {err}");
        assert!(err.contains("job token"), "{how}: {err}");
        assert!(out.stdout.is_empty(), "{how}");
    }
}

#[test]
fn issue18_strangers_at_the_rendezvous_do_not_disturb_a_real_job() {
    let _one = ONE_ATTACK.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (zero, addr, zero_err) = start_rank0("true", &JOB);
    // The attacks of the issue, all at once, before the real rank 1 arrives.
    let mut half = frame::encode(Kind::Join, &[0u8; 40]);
    half.truncate(10);
    let attackers = vec![
        ("garbage", attack(&addr, b"\x00\xffgarbage")),
        ("silence", attack(&addr, b"")),
        ("empty token as rank 1", attack(&addr, &join_frame("", 1))),
        (
            "wrong token as rank 1",
            attack(&addr, &join_frame("guess", 1)),
        ),
        ("stalled half-frame", attack(&addr, &half)),
    ];
    // 200 parallel idle connections.
    let crowd: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let one = start_rank1(&addr, &JOB);
    let zero_out = support::output_within(zero, Duration::from_secs(400)).expect("rank 0 ends");
    let one_out = support::output_within(one, Duration::from_secs(30)).expect("rank 1 ends");
    drop(crowd);
    let zero_text: Vec<String> =
        std::iter::from_fn(|| zero_err.recv_timeout(Duration::from_secs(2)).ok()).collect();
    assert!(
        zero_out.status.success() && one_out.status.success(),
        "rank 0: {zero_text:?}\nrank 1: {}",
        String::from_utf8_lossy(&one_out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&zero_out.stdout).expect("rank 0's JSON");
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(2), "{doc}");
    // The silent and half-frame strangers stalled nobody for the join timeout
    // (300 s); the job takes a few seconds, 30 to 90 on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(150),
        "{:?}",
        started.elapsed()
    );
    for (what, a) in attackers {
        let answer = a.join().unwrap();
        // Whatever they got, it was never the job table.
        if !answer.is_empty() {
            let (kind, _, _) = frame::decode(&answer, 1 << 16).unwrap_or((Kind::Refuse, &[], 0));
            assert_eq!(kind, Kind::Refuse, "{what}: {answer:02x?}");
        }
    }
    // Refusals are logged, but rate-limited: far fewer lines than the 205 strangers.
    let refusals = zero_text.iter().filter(|l| l.contains("refused")).count();
    assert!(refusals >= 1, "{zero_text:?}");
    assert!(refusals <= 25, "{refusals} refusal lines: {zero_text:?}");
}

#[test]
fn issue18_a_flood_at_a_low_descriptor_limit_does_not_keep_the_real_rank_out() {
    // Rank 0 may hold 64 descriptors; strangers open connections as fast as they
    // can, and keep them open, for as long as rank 1 needs to join.
    let _one = ONE_ATTACK.lock().unwrap_or_else(|e| e.into_inner());
    let (zero, addr, zero_err) = start_rank0("ulimit -n 64", &JOB);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut held = std::collections::VecDeque::new();
                let mut opened = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(s) = TcpStream::connect(&addr) {
                        held.push_back(s);
                        opened += 1;
                    }
                    if held.len() > 100 {
                        held.pop_front();
                    }
                }
                opened
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let joined = Instant::now();
    let one = start_rank1(&addr, &JOB);
    // Before, the flood kept rank 1 out for as long as it lasted (here: until rank
    // 0 gives up on it after the join timeout, exit 1).
    let zero_out = support::output_within(zero, Duration::from_secs(400));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened: usize = flood.into_iter().map(|h| h.join().unwrap()).sum();
    let one_out = support::output_within(one, Duration::from_secs(30)).expect("rank 1 ends");
    let zero_text: Vec<String> =
        std::iter::from_fn(|| zero_err.recv_timeout(Duration::from_secs(2)).ok()).collect();
    let zero_out = zero_out.unwrap_or_else(|o| panic!("rank 0 hung: {zero_text:?} {o:?}"));
    assert!(
        zero_out.status.success() && one_out.status.success(),
        "after {opened} flood connections; rank 0: {zero_text:?}\nrank 1: {}",
        String::from_utf8_lossy(&one_out.stderr)
    );
    assert!(opened > 64, "the flood opened only {opened} connections");
    // A burst of 10 lines, then at most one a second (`RefusalLog`); the flood
    // opened thousands of connections.
    let refusals = zero_text.iter().filter(|l| l.contains("refused")).count();
    let seconds = joined.elapsed().as_secs() as usize + 2;
    assert!(
        refusals <= 10 + seconds,
        "{refusals} refusal lines in {seconds} s"
    );
}

/// The careless user's outputs: every file the command line names is checked before
/// any measuring, and a bad one is a usage error (exit 2) before the job starts.
#[test]
fn issue18_outputs_are_checked_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let missing = format!("{d}/no/such/dir/x");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["loggp", "--params-out", &d], "--params-out"),
        (vec!["loggp", "--plot", &d], "--plot"),
        (vec!["loggp", "--netgauge-out", &missing], "--netgauge-out"),
        (vec!["-o", &d, "pingpong"], "-o/--output"),
        (vec!["-o", &missing, "sync"], "-o/--output"),
        (vec!["-o", &missing, "timer"], "-o/--output"),
        (vec!["-o", &missing, "info"], "-o/--output"),
        (vec!["pingpong", "--sizes", "0"], "--sizes"),
        (vec!["--rank", "0", "--size", "1", "pingpong"], "2 ranks"),
        (vec!["--np", "1", "pingpong"], "2 ranks"),
    ];
    for (args, named) in cases {
        // Order, not a deadline: a job that names no rank or size runs as rank 0 of
        // two started by hand, whose rank 1 never comes. Checked after the job
        // started, it would wait the whole --timeout for that rank; checked before,
        // it ends at once.
        let mut argv = args.clone();
        if !args.iter().any(|a| matches!(*a, "--rank" | "--np")) {
            argv.splice(0..0, ["--rank", "0", "--size", "2", "--timeout", "3000"]);
        }
        let out = support::output_within(
            raw(&argv)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            Duration::from_secs(600),
        )
        .expect("ends before rank 1 could be waited for");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{argv:?}: {err}");
        assert!(err.contains(named), "{argv:?}: {err}");
    }
    // No file was left behind by the checks.
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    // timer and info write their one document to -o.
    for cmd in ["timer", "info"] {
        let path = format!("{d}/{cmd}.jsonl");
        let out = raw(&["-o", &path, cmd]).output().unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{cmd}: {text}");
        serde_json::from_str::<serde_json::Value>(text.trim()).unwrap();
    }
}

#[test]
fn issue37_a_usage_error_is_one_line_said_once_under_mpirun() {
    // Every rank of an mpirun job parses the same command line: rank 0 alone says
    // what is wrong, in one line, and every rank exits with status 2.
    for (argv, said) in [
        (
            &["pingpong", "--reps", "x"][..],
            "see `ngauge pingpong --help`",
        ),
        (&["pingpong", "--sizes", "1-0"], "--sizes"),
    ] {
        for rank in ["0", "1"] {
            let out = raw(argv)
                .env("OMPI_COMM_WORLD_RANK", rank)
                .env("OMPI_COMM_WORLD_SIZE", "2")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{argv:?} rank {rank}: {err}");
            if rank == "0" {
                assert_eq!(err.lines().count(), 1, "{argv:?}: {err}");
                assert!(
                    err.starts_with("ngauge: error: ") && err.contains(said),
                    "{err}"
                );
            } else {
                assert_eq!(err, "", "{argv:?} rank {rank}");
            }
        }
    }
}
