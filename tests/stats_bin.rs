//! `ngauge-stats`, the statistics plumbing `scripts/bench-mpi` calls, end to end.

use assert_cmd::Command;

fn stats(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = Command::cargo_bin("ngauge-stats")
        .unwrap()
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn nine_values_give_the_second_and_eighth_as_the_95_percent_interval() {
    // P(X <= 1) = 10/512 <= 2.5% < P(X <= 2) for X ~ Binomial(9, 1/2): k = 2,
    // coverage 1 - 20/512 = 0.9609375.
    let (code, out, err) = stats(&[], "1.03 0.97\n1.01 0.99 1.00\n1.02 0.98 1.04 0.96\n");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "9 1 0.97 1.03 0.960937\n",
        "1 - 20/512 = 0.9609375, six places"
    );
}

#[test]
fn an_even_count_has_the_midpoint_as_median_and_the_level_can_change() {
    let input = "8 1 7 2 6 3 5 4 10 9";
    let (code, out, _) = stats(&[], input);
    assert_eq!((code, out.as_str()), (0, "10 5.5 2 9 0.978516\n"));
    // 90%: P(X <= 2) = 56/1024 = 5.5% > 5%, P(X <= 1) = 11/1024: k = 2 as well;
    // 70%: P(X <= 2) <= 15%, P(X <= 3) = 176/1024 > 15%: k = 3.
    let (_, out, _) = stats(&["--level", "0.7"], input);
    assert_eq!(out, "10 5.5 3 8 0.890625\n");
    let (_, out, _) = stats(&["--level=0.9"], input);
    assert_eq!(out, "10 5.5 2 9 0.978516\n");
}

#[test]
fn too_few_values_have_no_interval() {
    let (code, out, _) = stats(&[], "3 1 2 5 4");
    assert_eq!((code, out.as_str()), (0, "5 3 - - -\n"));
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    for (args, stdin, names) in [
        (&[][..], "1 2 x 4", "number 3: 'x' is not a number"),
        (&[][..], "", "no numbers"),
        (&[][..], "1 inf", "number 2 (inf) is not finite"),
        (&["--level", "95"][..], "1 2", "--level 95"),
        (&["--level"][..], "1 2", "--level needs a value"),
        (&["--median"][..], "1 2", "unknown argument '--median'"),
    ] {
        let (code, out, err) = stats(args, stdin);
        assert_eq!(code, 2, "{args:?} {stdin:?}: {out} {err}");
        assert!(
            err.starts_with("ngauge-stats: ") && err.contains(names),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.is_empty());
    }
}

#[test]
fn help_names_the_output_columns() {
    let (code, out, _) = stats(&["--help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("N MEDIAN LO HI COVERAGE"));
}
