//! Issue 18's acceptance: `-t udp loggp` and `-t udp pingpong` across two network
//! namespaces joined by a veth pair, with real random loss (an nftables rule in each
//! namespace drops 1 % or 5 % of the outgoing UDP datagrams; the control channel is
//! TCP and left alone). Both commands must complete with every point and report
//! the loss: the transport's `lost_datagrams` at least one and never more than the
//! datagrams nftables dropped (its rule counters).
//!
//! Needs root, `ip` and `nft` (scripts/test installs nftables); without them the
//! test says on stdout that it skipped, and under `CI=true` it fails instead. The
//! times against the lossless link are in docs/findings/2026-11-24-udp-loss.md
//! (scripts/udp-loss measures them).
//!
//! Issue 38's acceptance runs over the same link without loss: strangers send
//! datagrams with a rank's source address (raw sockets in both namespaces) while
//! `-t udp pingpong --check` runs, and the job must complete with correct data and
//! count them as `foreign_datagrams`.

use serde_json::Value;
use std::io::Write;
use std::net::SocketAddrV4;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_ngauge");

use crate::netns;
use netns::{have, sh, Netns};

/// Whether the test can run; if not, says why on stdout (libtest does not capture
/// a direct write) or, under `CI=true`, fails.
fn can_run() -> bool {
    let reason = if !rustix::process::geteuid().is_root() {
        Some("needs root for network namespaces".to_string())
    } else {
        ["ip", "nft"]
            .into_iter()
            .find(|t| !have(t))
            .map(|t| format!("needs {t} (scripts/test installs it)"))
    };
    let Some(reason) = reason else {
        return true;
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true: udp_loss may not skip, and it {reason}");
    }
    let _ = writeln!(std::io::stdout().lock(), "\nudp_loss: SKIPPED: {reason}");
    false
}

/// Two namespaces joined by a veth pair, each dropping `percent` % of its outgoing
/// UDP datagrams at random; removed on drop.
struct LossyLink {
    ns: Netns,
    prefix: String,
}

impl LossyLink {
    fn new(tag: u32, percent: u32) -> LossyLink {
        let pid = std::process::id();
        let link = LossyLink {
            ns: Netns::new(&format!("ngu{tag}-"), 2),
            prefix: format!("10.{}.{}", 150 + tag, pid & 0xff),
        };
        link.ns.veth(0, "nua", 1, "nub");
        for (ns, dev, host) in [(0, "nua", 1), (1, "nub", 2)] {
            link.ns.addr(ns, &format!("{}.{host}/24", link.prefix), dev);
            let rules = format!(
                "table inet ngauge_loss {{\n\
                 \tchain out {{\n\
                 \t\ttype filter hook output priority 0; policy accept;\n\
                 \t\tmeta l4proto udp numgen random mod 100 < {percent} counter drop\n\
                 \t}}\n\
                 }}\n"
            );
            let mut nft = link
                .ns
                .exec(ns, &["nft", "-f", "-"])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("nft");
            nft.stdin
                .take()
                .unwrap()
                .write_all(rules.as_bytes())
                .unwrap();
            let out = nft.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "nft: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        link
    }

    /// Datagrams the rules dropped so far, both namespaces.
    fn dropped(&self) -> u64 {
        [self.ns.name(0), self.ns.name(1)]
            .into_iter()
            .map(|ns| {
                let out = sh(&["ip", "netns", "exec", ns, "nft", "list", "ruleset"]);
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let after = text
                    .split_once("counter packets ")
                    .unwrap_or_else(|| panic!("no counter in {text}"))
                    .1;
                after
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("bad counter in {text}"))
            })
            .sum()
    }

    /// Runs `args` as a two-rank job, rank 0 in `a` and rank 1 in `b`; rank 0's
    /// JSON document and the wall time.
    fn run(&self, port: u16, args: &[&str]) -> (Value, Duration) {
        let start = Instant::now();
        let (zero, one) = self.start(port, args);
        let doc = finish(args, zero, one);
        (doc, start.elapsed())
    }

    /// Starts `args` as a two-rank job, rank 0 in `a` and rank 1 in `b`.
    fn start(&self, port: u16, args: &[&str]) -> (Child, Child) {
        let rendezvous = format!("{}.1:{port}", self.prefix);
        let token = format!("udp-loss-{}-{port}", std::process::id());
        let rank = |ns: usize, r: &str| {
            let mut c = self.ns.exec(ns, &[EXE]);
            c.args(["--rank", r, "--size", "2", "--rendezvous", &rendezvous])
                .args(["--job-token", &token, "--timeout", "20", "-t", "udp"])
                .args(["--wait", "block"])
                .args(args)
                .arg("--json")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for var in [
                "NGAUGE_RANK",
                "NGAUGE_SIZE",
                "NGAUGE_RENDEZVOUS",
                "NGAUGE_JOB_TOKEN",
                "NGAUGE_LAUNCHER",
                "NGAUGE_TEST_UDP_DROP_ONE_IN",
            ] {
                c.env_remove(var);
            }
            c.spawn().unwrap()
        };
        // Rank 1 first: it retries until rank 0 listens.
        let one = rank(1, "1");
        let zero = rank(0, "0");
        (zero, one)
    }
}

/// Waits for both ranks of [`LossyLink::start`]; both must succeed. Rank 0's JSON
/// document.
fn finish(args: &[&str], zero: Child, one: Child) -> Value {
    let zero = zero.wait_with_output().unwrap();
    let one = one.wait_with_output().unwrap();
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(zero.status.success(), "{args:?}: rank 0: {}", err(&zero));
    assert!(one.status.success(), "{args:?}: rank 1: {}", err(&one));
    serde_json::from_slice(&zero.stdout).expect("one JSON document from rank 0")
}

/// The sum of counter `name` over `records` (each with a `counters` object).
fn total(records: &[Value], name: &str) -> u64 {
    records
        .iter()
        .map(|r| {
            r["counters"][name]
                .as_u64()
                .unwrap_or_else(|| panic!("{name} missing in {r}"))
        })
        .sum()
}

#[test]
fn udp_loggp_and_pingpong_complete_across_lossy_namespaces_and_report_the_loss() {
    if !can_run() {
        return;
    }
    for (tag, percent) in [(1u32, 1u32), (2, 5)] {
        let link = LossyLink::new(tag, percent);
        let (doc, took) = link.run(
            7400 + tag as u16,
            &["loggp", "--sizes", "1-64", "--reps", "30"],
        );
        let points = doc["points"].as_array().expect("points").clone();
        assert_eq!(points.len(), 7, "{percent} %: {doc}");
        let after_loggp = link.dropped();
        let lost = total(&points, "lost_datagrams");
        assert!(
            (1..=after_loggp).contains(&lost),
            "{percent} %: loggp lost {lost}, nft dropped {after_loggp}"
        );
        assert!(total(&points, "retransmissions") >= lost);
        let (doc, took_pp) = link.run(
            7500 + tag as u16,
            &["pingpong", "--sizes", "1-4K", "--reps", "300"],
        );
        let results = doc["results"].as_array().expect("results").clone();
        assert_eq!(results.len(), 13, "{percent} %: {doc}");
        let dropped = link.dropped() - after_loggp;
        let lost = total(&results, "lost_datagrams");
        assert!(
            (1..=dropped).contains(&lost),
            "{percent} %: pingpong lost {lost}, nft dropped {dropped}"
        );
        let _ = writeln!(
            std::io::stdout().lock(),
            "udp_loss {percent} %: loggp {:.1} s, pingpong {:.1} s",
            took.as_secs_f64(),
            took_pp.as_secs_f64()
        );
    }
}

/// The connected UDP sockets in namespace `ns`: (local, peer) addresses, from
/// `ss`.
fn udp_links(ns: &str) -> Vec<(SocketAddrV4, SocketAddrV4)> {
    let out = sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "ss",
        "-Hnu",
        "state",
        "established",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut addrs = line.split_whitespace().filter_map(|w| w.parse().ok());
            Some((addrs.next()?, addrs.next()?))
        })
        .collect()
}

/// One UDP datagram from `from` to `to` with `payload`, as an IPv4 packet for a
/// raw socket (the kernel fills in the IP checksum, length and id; a UDP checksum
/// of 0 means none).
fn forged_packet(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = (8 + payload.len()) as u16;
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
    p.extend_from_slice(&from.ip().octets());
    p.extend_from_slice(&to.ip().octets());
    p.extend_from_slice(&from.port().to_be_bytes());
    p.extend_from_slice(&to.port().to_be_bytes());
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// The forgeries, in turn: (a) the magic and the `BYE` flag, (b) data with a
/// random sequence number (and a header-sized payload), (c) random bytes that
/// start with the magic.
fn forgery(i: u64, rng: &mut u64) -> Vec<u8> {
    let mut next = || {
        // xorshift64: the bytes need not be good, only varied.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    match i % 3 {
        0 => {
            let mut d = b"NU".to_vec();
            d.extend_from_slice(&[4, 0]);
            d.extend_from_slice(&(next() as u32).to_le_bytes());
            d
        }
        1 => {
            let mut d = b"NU".to_vec();
            d.extend_from_slice(&[0, next() as u8]);
            d.extend_from_slice(&(next() as u32 % 64).to_le_bytes());
            d.extend_from_slice(&next().to_le_bytes());
            d
        }
        _ => {
            let mut d = b"NU".to_vec();
            let len = 1 + next() % 64;
            d.extend((0..len).map(|_| next() as u8));
            d
        }
    }
}

/// Not a test on its own: `issue38_*` runs this binary with `--exact
/// udp_loss::forge_datagrams --ignored` inside a namespace, with `NGAUGE_TEST_FORGE` set to
/// `FROM TO MILLIS`, to send forgeries from `FROM` to `TO` every millisecond for
/// `MILLIS` ms through a raw socket. Prints how many it sent.
#[test]
#[ignore = "helper of issue38_strangers_forging_a_ranks_address_do_not_disturb_udp"]
fn forge_datagrams() {
    let Ok(spec) = std::env::var("NGAUGE_TEST_FORGE") else {
        return;
    };
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (from, to): (SocketAddrV4, SocketAddrV4) =
        (words[0].parse().unwrap(), words[1].parse().unwrap());
    let millis: u64 = words[2].parse().unwrap();
    use rustix::net::{ipproto, socket, AddressFamily, SendFlags, SocketType};
    let raw = socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::RAW)).unwrap();
    let mut rng = u64::from(from.port()) << 16 | u64::from(to.port()) | 1;
    let end = Instant::now() + Duration::from_millis(millis);
    let mut sent = 0u64;
    while Instant::now() < end {
        let packet = forged_packet(from, to, &forgery(sent, &mut rng));
        rustix::net::sendto(&raw, &packet, SendFlags::empty(), &to).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = writeln!(std::io::stdout().lock(), "forged {sent}");
}

#[test]
fn issue38_strangers_forging_a_ranks_address_do_not_disturb_udp() {
    if !can_run() {
        return;
    }
    let link = LossyLink::new(3, 0);
    let args = ["pingpong", "--sizes", "1-4K", "--reps", "4000", "--check"];
    let (zero, one) = link.start(7600, &args);
    // Rank 0's socket to rank 1 (both addresses), once the transport is connected.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (addr0, addr1) = loop {
        if let Some(&pair) = udp_links(link.ns.name(0)).first() {
            break pair;
        }
        assert!(
            Instant::now() < deadline,
            "no UDP link in {}",
            link.ns.name(0)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Strangers in both namespaces: as rank 1 to rank 0, as rank 0 to rank 1.
    let me = std::env::current_exe().unwrap();
    let forge = |ns: &str, from: SocketAddrV4, to: SocketAddrV4| {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&me)
            .arg("--exact")
            .arg(crate::support::test_path(module_path!(), "forge_datagrams"))
            .args(["--ignored", "--nocapture"])
            .env("NGAUGE_TEST_FORGE", format!("{from} {to} 1500"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let forgers = [
        forge(link.ns.name(1), addr1, addr0),
        forge(link.ns.name(0), addr0, addr1),
    ];
    let mut sent = 0;
    for f in forgers {
        let out = f.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "forger: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        sent += text
            .lines()
            .find_map(|l| l.strip_prefix("forged ")?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("forger said: {text}"));
    }
    let doc = finish(&args, zero, one);
    let results = doc["results"].as_array().expect("results").clone();
    assert_eq!(results.len(), 13, "{doc}");
    assert!(results.iter().all(|r| r["data_check"] == true), "{doc}");
    let foreign = total(&results, "foreign_datagrams");
    assert!(
        foreign >= 1 && foreign <= sent,
        "{foreign} foreign datagrams counted, {sent} forged"
    );
    let _ = writeln!(
        std::io::stdout().lock(),
        "issue38: {sent} forged, {foreign} counted as foreign during the sweep"
    );
}
