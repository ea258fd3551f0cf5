//! `ngauge info`: transports compiled and usable, the launcher, timer facts.

use crate::cli::GlobalArgs;
use ngauge::clock::TimerFacts;
use ngauge::launch;
use ngauge::report::{BuildFacts, Meta};
use serde::Serialize;
use std::time::Duration;

/// One transport's availability.
#[derive(Debug, Serialize)]
pub struct TransportInfo {
    pub name: &'static str,
    pub compiled: bool,
    pub usable: bool,
    pub reason: Option<String>,
}

fn probe(name: &'static str, global: &GlobalArgs) -> TransportInfo {
    let build = BuildFacts::current();
    if !build.has_transport(name) {
        return TransportInfo {
            name,
            compiled: false,
            usable: false,
            reason: Some(format!(
                "built without the `{name}` feature; rebuild with `cargo build --release --features {name}`"
            )),
        };
    }
    #[cfg(feature = "mpi")]
    if name == "mpi" {
        let usable = ngauge_mpi::launched_by_mpi();
        return TransportInfo {
            name,
            compiled: true,
            usable,
            reason: (!usable).then(|| {
                format!(
                    "needs an MPI launcher: run under {} (built against {})",
                    ngauge_mpi::BUILD_MPIEXEC,
                    ngauge_mpi::BUILD_FLAVOR
                )
            }),
        };
    }
    if name == "verbs" {
        let probe = super::verbs::probe(global);
        return TransportInfo {
            name,
            compiled: true,
            usable: probe.is_ok(),
            reason: probe.err(),
        };
    }
    let usable = match name {
        "tcp" => std::net::TcpListener::bind("127.0.0.1:0").map(drop),
        "udp" => std::net::UdpSocket::bind("127.0.0.1:0").map(drop),
        _ => Err(std::io::Error::other("no probe for this transport")),
    };
    TransportInfo {
        name,
        compiled: true,
        usable: usable.is_ok(),
        reason: usable.err().map(|e| format!("cannot open a socket: {e}")),
    }
}

/// One rank's place in the job, gathered at rank 0.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct RankInfo {
    pub rank: usize,
    pub host: String,
    pub pid: u32,
    pub data_addr: std::net::IpAddr,
    pub pinned_core: Option<usize>,
}

pub fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    super::with_world(global, |world| {
        let mine = RankInfo {
            rank: world.rank,
            host: world
                .peers
                .get(world.rank)
                .map_or_else(String::new, |p| p.host.clone()),
            pid: std::process::id(),
            data_addr: world.data_addr,
            pinned_core: world.pinned_core,
        };
        let gathered = world.control.gather(0, &serde_json::to_vec(&mine)?)?;
        if world.rank != 0 {
            return Ok(());
        }
        let ranks = gathered
            .iter()
            .map(|bytes| serde_json::from_slice::<RankInfo>(bytes))
            .collect::<Result<Vec<_>, _>>()?;
        report(global, world, &ranks)
    })
}

fn report(global: &GlobalArgs, world: &launch::World, ranks: &[RankInfo]) -> anyhow::Result<()> {
    let transports: Vec<TransportInfo> = ["tcp", "udp", "verbs", "mpi"]
        .into_iter()
        .map(|name| probe(name, global))
        .collect();
    let env = &world.env;
    let (facts, _) = TimerFacts::measure(Duration::from_millis(50), 100_000);
    if global.json {
        let mut meta = Meta::for_this_host(
            facts.source.as_str(),
            facts.hz,
            &facts.frequency.description,
        );
        meta.launcher = env.kind.describe().into();
        meta.np = world.size;
        meta.pinning = ranks.iter().map(|r| r.pinned_core).collect();
        let doc = serde_json::json!({
            "transports": transports,
            "launcher": {
                "kind": env.kind,
                "name": env.kind.describe(),
                "rank": world.rank,
                "size": world.size,
                "ranks_on_host": world.ranks_on_host,
                "ranks": ranks,
            },
            "timer": facts,
            "meta": meta,
        });
        super::print_json(&doc)?;
    } else {
        use std::fmt::Write as _;
        let mut out = String::from("transports:\n");
        for t in &transports {
            let state = match (t.compiled, t.usable) {
                (true, true) => "usable".to_string(),
                (true, false) => format!(
                    "compiled, not usable: {}",
                    t.reason.as_deref().unwrap_or("")
                ),
                (false, _) => format!("not compiled: {}", t.reason.as_deref().unwrap_or("")),
            };
            writeln!(out, "  {:<6} {state}", t.name)?;
        }
        writeln!(
            out,
            "launcher: {}, {} ranks",
            env.kind.describe(),
            world.size
        )?;
        for r in ranks {
            writeln!(
                out,
                "  rank {:<3} {} pid {} data {} core {}",
                r.rank,
                r.host,
                r.pid,
                r.data_addr,
                r.pinned_core
                    .map_or_else(|| "unpinned".to_string(), |c| c.to_string())
            )?;
        }
        writeln!(
            out,
            "timer:    {} at {:.6} GHz, read cost {:.1} ns median, TSC {}",
            facts.source.as_str(),
            facts.hz / 1e9,
            facts.overhead_ns.median,
            if facts.invariant_tsc {
                "invariant"
            } else {
                "NOT invariant"
            }
        )?;
        // Written, not println!: a closed pipe (`| head`) is an error main() treats
        // as success, not a panic.
        use std::io::Write as _;
        std::io::stdout().lock().write_all(out.as_bytes())?;
    }
    Ok(())
}
