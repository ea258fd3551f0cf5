use super::*;
use crate::clock::TimerSource;
use crate::report::Document;
use crate::stats::Summary;

fn result(step: usize, from: usize, to: usize, bandwidth_mbps: f64) -> PairResult {
    PairResult {
        from,
        to,
        step,
        concurrent_pairs: 2,
        size: 65536,
        window: 16,
        half_rtt_us: Summary::of(&[1.0]).unwrap(),
        bandwidth_mbps,
        msgs_per_s: 1.0,
        data_check: Some(true),
    }
}

#[test]
fn the_distribution_covers_every_pair_of_every_bisection() {
    let spec = EbbSpec {
        bisections: 2,
        ..EbbSpec::default()
    };
    let results = vec![
        result(0, 0, 1, 100.0),
        result(0, 2, 3, 300.0),
        result(1, 3, 1, 20.0),
        result(1, 0, 2, 200.0),
    ];
    let meta = Meta::builder(Vec::<String>::new(), TimerSource::Rdtscp, 1e9).build();
    let d = EbbDoc::new(meta, &spec, results, &[]);
    let dist = d.distribution.clone().unwrap();
    assert_eq!(dist.pairs, 4);
    assert_eq!((dist.min_mbps, dist.max_mbps), (20.0, 300.0));
    assert_eq!((dist.median_mbps, dist.mean_mbps), (150.0, 155.0));
    // definition 7 over 20, 100, 200, 300
    assert_eq!((dist.q1_mbps, dist.q3_mbps), (80.0, 225.0));
    assert_eq!(d.per_bisection.len(), 2);
    let b = &d.per_bisection[1];
    assert_eq!(b.pairs, vec![[3, 1], [0, 2]]);
    assert_eq!(
        (b.min_mbps, b.median_mbps, b.total_mbps),
        (20.0, 110.0, 220.0)
    );
    let text = d.render();
    assert!(text.contains("2 random bisections (seed 1)"), "{text}");
    assert!(text.contains("3->1 0->2"), "{text}");
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["distribution"]["min_MBps"], 20.0);
}
