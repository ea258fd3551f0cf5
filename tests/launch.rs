//! Issue 3, end to end with real processes: the local launcher, ranks started by
//! hand, a rank killed during a barrier, hostile clients at the rendezvous port, and
//! two ranks in two network namespaces joined by a veth pair.

use assert_cmd::Command;
use ngauge::launch::frame::{self, Join, Kind};
use ngauge::launch::local::ANNOUNCE;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support;
use support::Lack;

const EXE: &str = env!("CARGO_BIN_EXE_ngauge");

fn ngauge() -> Command {
    let mut c = Command::new(EXE);
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
    c
}

fn raw(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(EXE);
    c.args(args)
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_RENDEZVOUS")
        .env_remove("NGAUGE_JOB_TOKEN")
        .env_remove("NGAUGE_LAUNCHER")
        .stdin(Stdio::null());
    c
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn info_json(np: usize) -> Value {
    let out = ngauge()
        .args(["--np", &np.to_string(), "info", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    serde_json::from_slice(&out.stdout).expect("exactly one JSON document from rank 0")
}

#[test]
fn issue_3_local_launcher_joins_2_4_and_8_ranks_on_2_cores() {
    for np in [2, 4, 8] {
        let doc = info_json(np);
        let launcher = &doc["launcher"];
        assert_eq!(launcher["size"], np, "{launcher}");
        assert_eq!(launcher["rank"], 0);
        assert_eq!(launcher["kind"], "local");
        assert_eq!(doc["meta"]["np"], np);
        let ranks = launcher["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), np);
        for (i, r) in ranks.iter().enumerate() {
            assert_eq!(r["rank"], i);
            assert_eq!(r["data_addr"], "127.0.0.1");
        }
        // Distinct cores while there are cores; wrapping around after that.
        let cores: Vec<_> = ranks.iter().map(|r| r["pinned_core"].clone()).collect();
        assert!(cores.iter().all(Value::is_u64), "{cores:?}");
        let n = ngauge::clock::allowed_cores().len();
        if np <= n {
            let mut distinct: Vec<u64> = cores.iter().filter_map(Value::as_u64).collect();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), np, "{cores:?}");
        }
    }
    let out = ngauge()
        .args(["--np", "8", "selftest", "barrier-loop", "--count", "50"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "barriers: 50\n");
    assert!(
        stderr_of(&out).contains("8 ranks on"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn issue_3_human_info_lists_every_rank() {
    let out = ngauge()
        .args(["--np", "3", "info"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 ranks"), "{text}");
    assert_eq!(text.matches("rank ").count(), 3, "{text}");
}

/// Rank 0 started by hand, listening on an ephemeral port; returns it and its
/// address, and a channel with the rest of its stderr lines.
fn start_rank0(size: usize, token: &str, args: &[&str]) -> (Child, String, mpsc::Receiver<String>) {
    let size = size.to_string();
    let mut all = vec![
        "--rank",
        "0",
        "--size",
        &size,
        "--bind",
        "127.0.0.1:0",
        "--job-token",
        token,
        "--timeout",
        "20",
    ];
    all.extend_from_slice(args);
    let mut child = raw(&all)
        .env("NGAUGE_ANNOUNCE", "1")
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

fn start_rank(rank: usize, size: usize, addr: &str, token: &str, args: &[&str]) -> Child {
    let (rank, size) = (rank.to_string(), size.to_string());
    let mut all = vec![
        "--rank",
        &rank,
        "--size",
        &size,
        "--rendezvous",
        addr,
        "--job-token",
        token,
        "--timeout",
        "20",
    ];
    all.extend_from_slice(args);
    raw(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Everything a line channel still delivers until its sender is gone.
fn drain(rx: &mpsc::Receiver<String>) -> Vec<String> {
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(line);
    }
    lines
}

/// Waits for a child in a thread; the receiver gets its exit status and stderr.
fn watch(mut child: Child) -> mpsc::Receiver<(std::process::ExitStatus, String)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = child.wait().unwrap();
        let _ = tx.send((status, err));
    });
    rx
}

#[test]
fn issue_3_a_rank_killed_in_a_barrier_is_named_by_everyone_within_5_s() {
    let token = "kill-test-token-0001";
    let args = ["selftest", "barrier-loop"];
    let (zero, addr, zero_err) = start_rank0(4, token, &args);
    let mut others: Vec<Child> = (1..4)
        .map(|r| start_rank(r, 4, &addr, token, &args))
        .collect();
    // Wait until the job runs, then let it loop in barriers for a moment.
    let joined = zero_err
        .recv_timeout(Duration::from_secs(20))
        .expect("rank 0 reports the join");
    assert!(joined.contains("4 ranks joined"), "{joined}");
    std::thread::sleep(Duration::from_millis(300));
    let victim = others.remove(1); // rank 2
    let mut victim = victim;
    victim.kill().unwrap(); // SIGKILL
    let killed_at = Instant::now();
    let _ = victim.wait();

    let zero_done = watch(zero);
    let watched: Vec<_> = others.into_iter().map(watch).collect();
    let deadline = killed_at + Duration::from_secs(5);
    let (status, _) = zero_done
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("rank 0 exits within 5 s");
    assert!(!status.success());
    let zero_text = drain(&zero_err).join("\n");
    assert!(
        zero_text.contains("lost rank 2"),
        "rank 0 said: {zero_text}"
    );
    for (i, rx) in watched.into_iter().enumerate() {
        let rank = [1, 3][i];
        let (status, err) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("rank {rank} exits within 5 s"));
        assert!(!status.success(), "rank {rank}");
        assert!(err.contains("lost rank 2"), "rank {rank} said: {err}");
    }
}

#[test]
fn issue_3_local_launcher_reports_a_rank_that_kills_itself() {
    let started = Instant::now();
    let out = ngauge()
        .args([
            "--np",
            "4",
            "selftest",
            "barrier-loop",
            "--die-rank",
            "2",
            "--die-after",
            "20",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("lost rank 2"), "{err}");
    assert!(err.contains("rank 2 was killed by signal 9"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "{err}");
}

#[test]
fn issue_3_a_failing_rank_tells_the_others_why() {
    let out = ngauge()
        .args([
            "--np",
            "3",
            "selftest",
            "barrier-loop",
            "--fail-rank",
            "1",
            "--die-after",
            "5",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("lost rank 1"), "{err}");
    assert!(
        err.contains("selftest failure requested after 5 barriers"),
        "{err}"
    );
}

#[test]
fn issue_3_local_launcher_stops_ranks_that_outlive_a_failure() {
    let started = Instant::now();
    let out = ngauge()
        .args([
            "--np",
            "4",
            "selftest",
            "barrier-loop",
            "--die-rank",
            "1",
            "--hang-rank",
            "2",
            "--die-after",
            "10",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("lost rank 1"), "{err}");
    assert!(err.contains("stopped ranks [2]"), "{err}");
    // Rank 2 sleeps for an hour unless the launcher stops it.
    assert!(started.elapsed() < Duration::from_secs(30), "{err}");
}

fn join_frame(token: &str, rank: u32, size: u32, version: u16) -> Vec<u8> {
    let join = Join {
        token: token.into(),
        rank,
        size,
        data_addr: "127.0.0.1".parse().unwrap(),
        host: "intruder".into(),
        pid: 1,
    };
    frame::encode_with_version(Kind::Join, version, &join.encode())
}

/// Sends `bytes` to the rendezvous port and returns what came back (until close).
fn hostile(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

#[test]
fn issue_3_hostile_clients_are_refused_and_the_job_completes() {
    let token = "the-real-token-of-this-job";
    let (zero, addr, zero_err) = start_rank0(2, token, &["info", "--json"]);
    let mut oversized = frame::encode(Kind::Join, &[]);
    oversized[8..12].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "garbage",
            b"\x00\xffhello, is this HTTP?\r\n\r\n".to_vec(),
            "bad magic",
        ),
        (
            "wrong token",
            join_frame("guess", 1, 2, frame::VERSION),
            "wrong job token",
        ),
        (
            "wrong version",
            join_frame(token, 1, 2, 9),
            "protocol version 9",
        ),
        ("oversized", oversized, "exceeds the limit"),
        (
            "wrong size",
            join_frame(token, 1, 3, frame::VERSION),
            "believes the job has 3",
        ),
    ];
    for (what, bytes, reason) in &cases {
        let back = hostile(&addr, bytes);
        let (kind, payload, _) = frame::decode(&back, 4096)
            .unwrap_or_else(|e| panic!("{what}: no refusal frame ({e}): {back:?}"));
        assert_eq!(kind, Kind::Refuse, "{what}");
        let text = frame::decode_refusal(payload);
        assert!(text.contains(reason), "{what}: {text}");
    }
    // A client that connects and says nothing does not block the real rank either.
    let _silent = TcpStream::connect(&addr).unwrap();
    let one = start_rank(1, 2, &addr, token, &["info", "--json"]);
    let one_out = one.wait_with_output().unwrap();
    assert!(one_out.status.success(), "{}", stderr_of(&one_out));
    assert!(one_out.stdout.is_empty(), "only rank 0 prints");
    let out = zero.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["launcher"]["size"], 2);
    assert_eq!(doc["launcher"]["kind"], "manual");
    let log = drain(&zero_err);
    for (what, _, reason) in &cases {
        assert!(
            log.iter()
                .any(|l| l.contains("refused") && l.contains(reason)),
            "{what} not logged: {log:#?}"
        );
    }
}

#[test]
fn issue_3_rank_0_by_hand_prints_the_command_for_the_others() {
    let mut zero = raw(&[
        "--rank",
        "0",
        "--size",
        "2",
        "--bind",
        "127.0.0.1:0",
        "--timeout",
        "20",
        "info",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let err = zero.stderr.take().unwrap();
    let mut lines = BufReader::new(err).lines().map_while(Result::ok);
    let command = lines
        .find_map(|l| {
            let l = l.trim().to_string();
            l.contains("--rank 1").then_some(l)
        })
        .expect("rank 0 prints the command line");
    let words: Vec<&str> = command.split_whitespace().collect();
    assert!(words[0].ends_with("ngauge"), "{command}");
    assert!(
        words.contains(&"info") && words.contains(&"--job-token"),
        "{command}"
    );
    assert!(!words.contains(&"--bind"), "{command}");
    let one = raw(&words[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(one.status.success(), "{}", stderr_of(&one));
    let out = zero.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 ranks"));
}

#[test]
fn issue_3_bad_launch_flags_are_usage_errors() {
    for args in [
        &["--rank", "1", "info"][..],
        &["--rank", "2", "--size", "2", "info"],
        &["--rank", "1", "--size", "2", "info"],
    ] {
        let out = ngauge()
            .args(args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn issue_3_selftest_is_hidden_from_help() {
    let out = ngauge().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(!help.contains("selftest"), "{help}");
    assert!(help.contains("--rendezvous"), "{help}");
}

/// Network namespaces `a` and `b` joined by a veth pair; removed on drop.
struct Netns {
    a: String,
    b: String,
    prefix: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    fn new() -> Result<Netns, String> {
        let pid = std::process::id();
        let ns = Netns {
            a: format!("ngauge-a-{pid}"),
            b: format!("ngauge-b-{pid}"),
            prefix: format!("10.{}.{}", 100 + (pid >> 8) % 100, pid & 0xff),
        };
        ip(&["netns", "add", &ns.a])?;
        ip(&["netns", "add", &ns.b])?;
        let (va, vb) = (format!("nga{pid}"), format!("ngb{pid}"));
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", &ns.a])?;
        ip(&["link", "set", &vb, "netns", &ns.b])?;
        ip(&[
            "-n",
            &ns.a,
            "addr",
            "add",
            &format!("{}.1/24", ns.prefix),
            "dev",
            &va,
        ])?;
        ip(&[
            "-n",
            &ns.b,
            "addr",
            "add",
            &format!("{}.2/24", ns.prefix),
            "dev",
            &vb,
        ])?;
        for (n, v) in [(&ns.a, &va), (&ns.b, &vb)] {
            ip(&["-n", n, "link", "set", v, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

#[test]
fn issue_3_two_ranks_by_hand_in_two_network_namespaces() {
    const TEST: &str = "issue_3_two_ranks_by_hand_in_two_network_namespaces";
    if !rustix::process::geteuid().is_root() {
        return support::skip(TEST, Lack::Host, "needs root for network namespaces");
    }
    if std::process::Command::new("ip").arg("-V").output().is_err() {
        return support::skip(TEST, Lack::Installed, "no ip (iproute2) on PATH");
    }
    let ns = match Netns::new() {
        Ok(ns) => ns,
        // Root without the capability (a container): nothing an install changes.
        Err(e) => return support::skip(TEST, Lack::Host, e),
    };
    let rendezvous = format!("{}.1:7000", ns.prefix);
    let rank = |n: &str, r: &str| {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", n, EXE])
            .args(["--rank", r, "--size", "2", "--rendezvous", &rendezvous])
            .args([
                "--job-token",
                "veth-job-token-0001",
                "--timeout",
                "20",
                "info",
                "--json",
            ])
            .env_remove("NGAUGE_RANK")
            .env_remove("NGAUGE_SIZE")
            .env_remove("NGAUGE_JOB_TOKEN")
            .env_remove("NGAUGE_RENDEZVOUS")
            .env_remove("NGAUGE_LAUNCHER")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    // Rank 1 first: it retries until rank 0 listens.
    let one = rank(&ns.b, "1");
    let zero = rank(&ns.a, "0");
    let one = one.wait_with_output().unwrap();
    let zero = zero.wait_with_output().unwrap();
    assert!(zero.status.success(), "rank 0: {}", stderr_of(&zero));
    assert!(one.status.success(), "rank 1: {}", stderr_of(&one));
    assert!(one.stdout.is_empty());
    let doc: Value = serde_json::from_slice(&zero.stdout).unwrap();
    let ranks = doc["launcher"]["ranks"].as_array().unwrap();
    assert_eq!(doc["launcher"]["size"], 2);
    assert_eq!(ranks[0]["data_addr"], format!("{}.1", ns.prefix));
    assert_eq!(ranks[1]["data_addr"], format!("{}.2", ns.prefix));
    drop(ns);
}

#[test]
fn issue_3_under_mpirun_rank_and_size_come_from_open_mpi() {
    let probe = std::process::Command::new("mpirun")
        .arg("--version")
        .output();
    const TEST: &str = "issue_3_under_mpirun_rank_and_size_come_from_open_mpi";
    let Ok(probe) = probe else {
        return support::skip(TEST, Lack::Installed, "no mpirun (openmpi-bin) on PATH");
    };
    if !String::from_utf8_lossy(&probe.stdout).contains("Open MPI") {
        // Both MPIs installed, and the alternatives chose MPICH's mpirun.
        return support::skip(TEST, Lack::Host, "mpirun on PATH is not Open MPI's");
    }
    let out = std::process::Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "4",
            EXE,
            "info",
            "--json",
        ])
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_RENDEZVOUS")
        .env_remove("NGAUGE_JOB_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["launcher"]["size"], 4);
    // With the pmix feature, Open MPI's mpirun is a PMIx launcher (tests/pmix.rs
    // checks the rest of what it reports).
    let kind = if cfg!(feature = "pmix") {
        "pmix"
    } else {
        "open_mpi"
    };
    assert_eq!(doc["launcher"]["kind"], kind);
    assert_eq!(doc["launcher"]["ranks"].as_array().unwrap().len(), 4);
}

/// Whether a process is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[test]
fn issue_3_ranks_die_with_a_killed_local_launcher() {
    let mut launcher = raw(&["--np", "3", "selftest", "barrier-loop"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = launcher.stderr.take().unwrap();
    let line = BufReader::new(err)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("ranks joined"));
    let Some(line) = line else {
        let _ = launcher.kill();
        let _ = launcher.wait();
        panic!("the job did not start");
    };
    let pids: Vec<u32> = line
        .rsplit_once('[')
        .map(|(_, list)| list.trim_end_matches(']'))
        .unwrap_or("")
        .split(", ")
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "{line}");
    launcher.kill().unwrap(); // SIGKILL: the launcher cannot clean up
    launcher.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids.iter().all(|&p| gone(p)) {
        assert!(
            Instant::now() < deadline,
            "ranks {pids:?} outlived their launcher"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
