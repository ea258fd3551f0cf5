use super::*;
use crate::clock::TimerSource;
use crate::report::Document;
use crate::stats::Summary;

fn result(
    from: usize,
    to: usize,
    half_rtt_us: f64,
    bandwidth_mbps: f64,
    window: usize,
) -> PairResult {
    let s = Summary::of(&[half_rtt_us]).unwrap();
    PairResult {
        from,
        to,
        step: 0,
        concurrent_pairs: 1,
        size: if window > 1 { 65536 } else { 8 },
        window,
        half_rtt_us: s,
        bandwidth_mbps,
        msgs_per_s: 1.0,
        data_check: None,
    }
}

/// Four ranks on two hosts; link 3->1 has a quarter of the bandwidth.
fn doc() -> MatrixDoc {
    let hosts: Vec<String> = ["a", "a", "b", "b"].iter().map(|s| s.to_string()).collect();
    let (mut lat, mut bw) = (Vec::new(), Vec::new());
    for from in 0..4 {
        for to in (0..4).filter(|&t| t != from) {
            let same = hosts[from] == hosts[to];
            let jitter = (from * 4 + to) as f64 * 0.01;
            lat.push(result(
                from,
                to,
                if same { 1.0 } else { 10.0 } + jitter,
                0.0,
                1,
            ));
            let b = if same { 5000.0 } else { 1000.0 } + jitter;
            bw.push(result(
                from,
                to,
                1.0,
                if (from, to) == (3, 1) { b / 4.0 } else { b },
                16,
            ));
        }
    }
    let meta = Meta::builder(Vec::<String>::new(), TimerSource::Rdtscp, 1e9).build();
    let schedule = ScheduleFacts {
        kind: "tournament".into(),
        seed: 1,
        steps: 6,
    };
    MatrixDoc::new(meta, hosts, schedule, &lat, &bw, 2.0, &[])
}

#[test]
fn the_slow_link_is_named_within_its_class_and_nothing_else() {
    let d = doc();
    assert_eq!(d.links.len(), 12);
    assert_eq!(d.latency_us[0][0], None);
    assert_eq!(d.latency_us[0][1], Some(1.01));
    assert_eq!(d.bandwidth_mbps[3][1], Some((1000.0 + 0.13) / 4.0));
    assert_eq!(d.outliers.len(), 1, "{:?}", d.outliers);
    let o = &d.outliers[0];
    assert_eq!(
        (o.metric, o.from, o.to, o.placement),
        (Metric::Bandwidth, 3, 1, Placement::InterHost)
    );
    assert!((o.times_worse - 4.0).abs() < 0.01);
    assert_eq!(
        o.message,
        "link 3->1: bandwidth 1/4.0x the median of inter-host links"
    );
    assert_eq!(d.placements.len(), 2);
    assert_eq!(d.placements[0].medians.links, 4);
    assert_eq!(d.host_summaries.len(), 2);
    assert_eq!(d.host_summaries[1].ranks, vec![2, 3]);
    assert_eq!(d.ranks[1].into.links, 3);
    let text = d.render();
    assert!(text.contains("link 3->1"), "{text}");
    assert!(text.contains("per host"), "{text}");
}

#[test]
fn the_csv_has_a_row_per_link_and_the_svg_draws_both_maps() {
    let d = doc();
    let csv = d.csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 13);
    assert!(lines[0].starts_with("from,to,from_host"));
    let cols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == cols));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("3,1,") && l.ends_with(",bandwidth")));
    assert_eq!(csv_field("x,y"), "\"x,y\"");
    let svg = d.heat_map_svg().unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("bandwidth [MB/s]"),
        "{svg}"
    );
    let exports = d.export(crate::report::document::Export::Csv);
    assert_eq!(exports.len(), 1);
}
