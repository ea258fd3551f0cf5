//! Issue 31: the library runs every measuring command from its spec, with no
//! command line in sight. Two ranks are started by hand as two threads of this
//! process (`LaunchOptions { rank, size, rendezvous, job_token }`), each runs the
//! command's experiment from `ngauge::experiment` with tiny sizes, and rank 0's
//! document is checked, its records and its schema. The transports wait blocking:
//! the two ranks share the cores with everything else on a loaded host.

use crate::documents;

use ngauge::coll::Collective;
use ngauge::experiment::{self, Context};
use ngauge::job::{JobSpec, TransportName, WaitPolicy};
use ngauge::launch::{LaunchOptions, Started, World};
use ngauge::patterns::coll::Scheme;
use ngauge::report::document::Export;
use ngauge::report::Document;
use ngauge::sim::spec::{LogGpSpec, NetworkSpec, SimulateSpec};
use ngauge::spec::{
    CollCmdSpec, InfoSpec, LateCmdSpec, LoggpSpec, NbcCmdSpec, NoiseSpec, PingpongSpec, SizeList,
    SyncSpec, TimerSpec, WindowColl,
};
use ngauge::sync::Algorithm;
use std::time::Duration;

const TOKEN: &str = "library-test-token-0123456789";

fn command_line() -> Vec<String> {
    vec!["library-test".into()]
}

/// A job of the transports `transports`, waiting blocking.
fn job(transports: &[TransportName]) -> JobSpec {
    JobSpec {
        transports: transports.to_vec(),
        wait: WaitPolicy::Block,
        ..JobSpec::default()
    }
}

/// Runs `body` on both ranks of a two-rank job started by hand, one thread each,
/// and ends the job in step; returns each rank's result, by rank.
fn on_two_ranks<T: Send>(job: &JobSpec, body: impl Fn(&mut World) -> T + Sync) -> Vec<T> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let body = &body;
    std::thread::scope(|s| {
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                s.spawn(move || {
                    let opts = LaunchOptions {
                        rank: Some(rank),
                        size: Some(2),
                        rendezvous: Some(format!("127.0.0.1:{port}")),
                        job_token: Some(TOKEN.into()),
                        timeout: Duration::from_secs(120),
                        ..LaunchOptions::default()
                    };
                    let Started::Rank(mut world) = ngauge::job::start(job, &opts).unwrap() else {
                        panic!("rank {rank} started as a launcher");
                    };
                    let out = body(&mut world);
                    world.finish().unwrap();
                    out
                })
            })
            .collect();
        ranks.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

/// The document serialized, valid against `docs/schemas/COMMAND.schema.json`.
fn valid<D: Document>(doc: &D, command: &str) -> serde_json::Value {
    let value = serde_json::to_value(doc).unwrap();
    documents::assert_valid(&value, command);
    assert!(!doc.render().is_empty(), "{command} renders a table");
    value
}

#[test]
fn timer_runs_from_its_spec() {
    let mut records = Vec::new();
    let mut ctx = Context {
        records: Some(&mut records),
        ..Context::quiet(command_line())
    };
    let spec = TimerSpec {
        reads: 1000,
        samples: true,
    };
    let doc = experiment::timer::run(&spec, &mut ctx).unwrap();
    let value = valid(&doc, "timer");
    assert_eq!(
        doc.samples.as_ref().map(|s| s.overhead_ns.len()),
        Some(1000)
    );
    assert_eq!(value["meta"]["command_line"][0], "library-test");
    assert_eq!(records.len(), 1, "the document is the one record");
    let bad = TimerSpec { reads: 1, ..spec };
    let e = experiment::timer::run(&bad, &mut Context::quiet(command_line())).unwrap_err();
    assert!(e.is_input(), "{e}");
}

/// `--timer rdtsc` reaches the experiment through its context: the facts, the
/// document's `meta` and its warnings name the plain reading.
#[test]
fn timer_reads_the_counter_the_context_names() {
    if crate::rdtsc::lacking("timer_reads_the_counter_the_context_names") {
        return;
    }
    let mut ctx = Context {
        timer: ngauge::clock::TimerSource::Rdtsc,
        ..Context::quiet(command_line())
    };
    let spec = TimerSpec {
        reads: 1000,
        samples: false,
    };
    let doc = experiment::timer::run(&spec, &mut ctx).unwrap();
    let value = valid(&doc, "timer");
    assert_eq!(value["source"], "rdtsc");
    assert_eq!(value["meta"]["timer"], "rdtsc");
    let kinds: Vec<&str> = (value["warnings"].as_array().unwrap().iter())
        .filter_map(|w| w["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"unordered_timer"), "{kinds:?}");
}

#[test]
fn info_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let docs = on_two_ranks(&job, |world| {
        let mut ctx = Context::quiet(command_line());
        experiment::info::run(world, &job, &InfoSpec::default(), &mut ctx).unwrap()
    });
    assert!(docs[1].is_none(), "only rank 0 has the document");
    let doc = docs[0].as_ref().unwrap();
    valid(doc, "info");
    assert_eq!(doc.launcher.size, 2);
    let ranks: Vec<usize> = doc.launcher.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1]);
    assert!(doc
        .transports
        .iter()
        .any(|t| t.name == TransportName::Tcp && t.usable));
}

#[test]
fn pingpong_runs_from_its_spec_on_two_ranks_over_two_transports() {
    let job = job(&[TransportName::Tcp, TransportName::Udp]);
    let spec = PingpongSpec {
        sizes: SizeList(vec![1, 1024]),
        reps: 10,
        warmup: 2,
        check: true,
        ..PingpongSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let mut ctx = Context {
            records: Some(&mut records),
            ..Context::quiet(command_line())
        };
        let doc = experiment::pingpong::run(world, &job, &spec, &mut ctx).unwrap();
        (doc, records)
    });
    let (doc, records) = &out[0];
    let doc = doc.as_ref().unwrap();
    let value = valid(doc, "pingpong");
    let measured: Vec<(String, u64)> = value["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap().into(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = |t: &str| [(t.to_string(), 1), (t.to_string(), 1024)];
    assert_eq!(measured, [want("tcp"), want("udp")].concat());
    assert!(value["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["data_check"] == true));
    assert_eq!(
        records.len(),
        4,
        "one record per size and transport: {records:?}"
    );
    assert!(doc.comparison.is_some(), "two transports side by side");
    assert!(doc.render().contains("side by side"));
    assert!(
        out[1].0.is_none() && out[1].1.is_empty(),
        "rank 1 keeps nothing"
    );
}

#[test]
fn noise_runs_from_its_spec_on_two_ranks() {
    let spec = NoiseSpec {
        duration_ns: 10e6,
        ..NoiseSpec::default()
    };
    let out = on_two_ranks(&job(&[TransportName::Tcp]), |world| {
        let mut records = Vec::new();
        let mut ctx = Context {
            records: Some(&mut records),
            ..Context::quiet(command_line())
        };
        let doc = experiment::noise::run(world, &spec, &mut ctx).unwrap();
        (doc, records.len())
    });
    let (doc, records) = &out[0];
    let doc = doc.as_ref().unwrap();
    let value = valid(doc, "noise");
    let ranks: Vec<u64> = value["cores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(*records, 2, "one record per core");
    assert!(
        value["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "short_measurement"),
        "{value}"
    );
}

#[test]
fn loggp_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let spec = LoggpSpec {
        sizes: Some(SizeList(vec![1024, 2048, 3072, 4096])),
        reps: 3,
        warmup: 1,
        ..LoggpSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let mut ctx = Context {
            records: Some(&mut records),
            ..Context::quiet(command_line())
        };
        let doc = experiment::loggp::run(world, &job, &spec, &mut ctx).unwrap();
        (doc, records.len())
    });
    let (doc, records) = &out[0];
    let doc = doc.as_ref().unwrap();
    let value = valid(doc, "loggp");
    let sizes: Vec<u64> = value["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [1024, 2048, 3072, 4096]);
    assert_eq!(value["passes"], 3, "3 repetitions: 3 passes of 1");
    assert_eq!(*records, 3 * 4, "one record per point and pass");
    assert!(doc.render().contains("L [us]"));
    // The exports come from the document: one file each, for its one transport.
    let params = doc.export(Export::Params);
    assert_eq!(params.len(), 1);
    assert_eq!(params[0].0, None, "one transport: no part name");
    let file: serde_json::Value = serde_json::from_str(params[0].1.as_ref().unwrap()).unwrap();
    assert_eq!(file["schema"], "ngauge-loggp-params/2");
    assert!(doc.export(Export::Plot)[0]
        .1
        .as_ref()
        .unwrap()
        .starts_with("<svg"));
    assert!(out[1].0.is_none() && out[1].1 == 0, "rank 1 keeps nothing");
}

#[test]
fn sync_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let spec = SyncSpec {
        sync: Algorithm::Hca,
        fitpoints: 10,
        exchanges: Some(5),
        check_after_s: vec![0.0],
        reps: 2,
        samples: true,
        ..SyncSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let mut ctx = Context {
            records: Some(&mut records),
            ..Context::quiet(command_line())
        };
        let doc = experiment::sync::run(world, &job, &spec, &mut ctx).unwrap();
        (doc, records)
    });
    let (doc, records) = &out[0];
    let doc = doc.as_ref().unwrap();
    let value = valid(doc, "sync");
    let ranks: Vec<u64> = value["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(value["samples"]["duration_us"].as_array().unwrap().len(), 2);
    // Issue 38: one record per synchronization, as each finishes.
    assert_eq!(records.len(), 2, "one record per repetition");
    for (i, r) in records.iter().enumerate() {
        let record: serde_json::Value = serde_json::from_str(r).unwrap();
        assert_eq!(
            (record["algo"].as_str(), record["rep"].as_u64()),
            (Some("hca"), Some(i as u64))
        );
    }
    assert!(doc.render().contains("residual @0s [ns]"));
    assert!(
        out[1].0.is_none() && out[1].1.is_empty(),
        "rank 1 keeps nothing"
    );
}

/// A context keeping its records in `records`.
fn keeping(records: &mut Vec<String>) -> Context<'_> {
    Context {
        records: Some(records),
        ..Context::quiet(command_line())
    }
}

/// Few calls, a light sync: a windowed collective in a second on a loaded host.
fn light(op: Collective) -> WindowColl {
    WindowColl {
        op,
        reps: 5,
        warmup: 2,
        max_rounds: 10,
        sync: Algorithm::Logp,
        ..WindowColl::default()
    }
}

#[test]
fn coll_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let spec = CollCmdSpec {
        algo: vec!["binomial".into(), "linear".into()],
        sizes: SizeList(vec![1, 1024]),
        reps: 5,
        warmup: 2,
        max_rounds: 10,
        samples: true,
        sync: Algorithm::Logp,
        ..CollCmdSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let doc = experiment::coll::run(world, &job, &spec, &mut keeping(&mut records)).unwrap();
        (doc, records.len())
    });
    let doc = out[0].0.as_ref().unwrap();
    let value = valid(doc, "coll");
    let measured: Vec<(&str, u64)> = (value["results"].as_array().unwrap().iter())
        .map(|r| (r["algo"].as_str().unwrap(), r["size"].as_u64().unwrap()))
        .collect();
    let want = [
        ("binomial", 1),
        ("linear", 1),
        ("binomial", 1024),
        ("linear", 1024),
    ];
    assert_eq!(measured, want, "interleaved size by size");
    assert_eq!(out[0].1, 4, "one record per point");
    assert_eq!(value["sync"]["ranks"].as_array().map(Vec::len), Some(2));
    assert!(doc.comparison.is_some() && doc.render().contains("ratio to tcp/linear"));
    // The plot draws every algorithm with a run-time; a point whose windows were
    // all invalid (a loaded host, 10 rounds of 5) has none, and is left out.
    let svg = doc.plot_svg().unwrap().unwrap();
    for r in value["results"].as_array().unwrap() {
        if !r["runtime_us"].is_null() {
            let label = format!("tcp/{}", r["algo"].as_str().unwrap());
            assert!(svg.contains(&label), "{label} is not drawn");
        }
    }
    assert!(out[1].0.is_none() && out[1].1 == 0, "rank 1 keeps nothing");
}

#[test]
fn late_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let spec = LateCmdSpec {
        coll: light(Collective::Barrier),
        delay_ns: vec![0.0, 50e3],
        ..LateCmdSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let doc = experiment::late::run(world, &job, &spec, &mut keeping(&mut records)).unwrap();
        (doc, records.len())
    });
    let doc = out[0].0.as_ref().unwrap();
    let value = valid(doc, "late");
    let delays: Vec<f64> = (value["results"].as_array().unwrap().iter())
        .map(|r| r["delay_us"].as_f64().unwrap())
        .collect();
    assert_eq!(delays, [0.0, 50.0]);
    assert_eq!(out[0].1, 2, "one record per row");
    assert_eq!(value["results"][0]["delayed_ranks"], serde_json::json!([0]));
    assert_eq!(value["sync"]["ranks"].as_array().map(Vec::len), Some(2));
    assert!(doc.plot_svg().unwrap().unwrap().starts_with("<svg"));
    let mpi = LateCmdSpec {
        coll: WindowColl {
            algo: Some("mpi".into()),
            ..spec.coll.clone()
        },
        ..spec.clone()
    };
    let e = on_two_ranks(&job, |world| {
        experiment::late::run(world, &job, &mpi, &mut Context::quiet(command_line())).unwrap_err()
    });
    assert!(e[0].is_input(), "{}", e[0]);
}

#[test]
fn nbc_runs_from_its_spec_on_two_ranks() {
    let job = job(&[TransportName::Tcp]);
    let spec = NbcCmdSpec {
        coll: light(Collective::Allreduce),
        sizes: SizeList(vec![8]),
        test_every_ns: vec![0.0, 10e3],
        ..NbcCmdSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let doc = experiment::nbc::run(world, &job, &spec, &mut keeping(&mut records)).unwrap();
        (doc, records.len())
    });
    let doc = out[0].0.as_ref().unwrap();
    let value = valid(doc, "nbc");
    let every: Vec<Option<f64>> = (value["results"].as_array().unwrap().iter())
        .map(|r| r["test_every_us"].as_f64())
        .collect();
    assert_eq!(every, [None, Some(10.0)]);
    assert_eq!(out[0].1, 2, "one record per point");
    assert_eq!(value["algo"], "recursive-doubling");
}

fn simulate_spec() -> SimulateSpec {
    SimulateSpec {
        op: "bcast".into(),
        algorithms: vec!["binomial".into(), "linear".into()],
        segments_bytes: Vec::new(),
        np: 4,
        sizes_bytes: vec![1, 1024],
        root: 0,
        network: NetworkSpec::Loggp(LogGpSpec {
            l_us: 5.0,
            o_s_us: 1.0,
            o_r_us: 1.0,
            g_us: 2.0,
            big_g_us_per_byte: 0.001,
            rendezvous: false,
        }),
        receive_gap: true,
        per_rank: false,
        loop_calls: None,
    }
}

#[test]
fn simulate_runs_from_its_spec_in_one_process_and_measures_on_two_ranks() {
    let spec = simulate_spec();
    let doc = experiment::simulate::run(&spec, &mut Context::quiet(command_line())).unwrap();
    let value = valid(&doc, "simulate");
    assert_eq!(value["results"].as_array().map(Vec::len), Some(4));
    assert_eq!(value["meta"]["np"], 4);
    let job = job(&[TransportName::Tcp]);
    let how = CollCmdSpec {
        scheme: Scheme::Barrier,
        reps: 5,
        warmup: 2,
        ..CollCmdSpec::default()
    };
    let out = on_two_ranks(&job, |world| {
        let mut records = Vec::new();
        let doc =
            experiment::simulate::measure(world, &job, &spec, &how, &mut keeping(&mut records));
        (doc.unwrap(), records.len())
    });
    let doc = out[0].0.as_ref().unwrap();
    let value = valid(doc, "simulate");
    assert_eq!(value["meta"]["np"], 2, "the job's size is simulated");
    let m = doc.measurement.as_ref().unwrap();
    assert_eq!((m.results.len(), out[0].1), (4, 4));
    assert!(m.results.iter().all(|r| r.predicted.is_some()), "{value}");
    assert!(m.selection.is_some() && doc.render().contains("model-based selection"));
}
