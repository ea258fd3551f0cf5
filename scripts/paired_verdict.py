"""Paired verdicts for the interleaved benchmark scripts (bench-latency,
bench-verbs): does a ratio A/B meet its target, does the run say it does not, or
can the run not decide?

The host flips between speed levels from one run to the next, so a ratio of two
tools' medians over rounds depends on how the levels fell among their runs. The
two runs of a round are adjacent, and their ratio cancels most of the level the
machine was at. The verdict is taken on the median of those per-round ratios and
its distribution-free confidence interval (order statistics of the sign test,
`ngauge-stats`, the library's `stats::median_ci`, docs/statistics.md):

- holds:     the whole interval is on the target's good side;
- fails:     the whole interval is on its bad side;
- undecided: the interval reaches across the target, or there are too few rounds
             for an interval at the level (5 at 90 %, 6 at 95 %): more rounds, or a
             calmer host, decide.
"""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS = os.path.join(ROOT, "target", "release", "ngauge-stats")
LEVEL = 0.90


def build_stats():
    """Builds ngauge-stats (the interval's one implementation) if missing."""
    if not os.access(STATS, os.X_OK):
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "ngauge-stats"], cwd=ROOT, check=True)


def interval(values, level=LEVEL):
    """(median, lo, hi, coverage) of `values`; lo, hi, coverage are None when there
    are too few values for an interval at `level`."""
    out = subprocess.run([STATS, "--level", str(level)], input=" ".join(f"{v:.17g}" for v in values),
                         capture_output=True, text=True, check=True).stdout.split()
    _, median, lo, hi, coverage = out
    if lo == "-":
        return float(median), None, None, None
    return float(median), float(lo), float(hi), float(coverage)


def verdict(ratios, target, at_most=True, level=LEVEL):
    """The verdict on `ratios` (one per round) against `target`: the ratio must be
    at most the target (`at_most`, a time) or at least it (a bandwidth). Returns
    (word, text)."""
    ratios = [r for r in ratios if r == r]
    if not ratios:
        return "undecided", "no paired rounds"
    median, lo, hi, coverage = interval(ratios, level)
    sign = "<=" if at_most else ">="
    if lo is None:
        return "undecided", (f"paired median {median:.3f} (target {sign} {target}); {len(ratios)} rounds "
                             f"give no {level:.0%} interval")
    good = (lambda x: x <= target) if at_most else (lambda x: x >= target)
    if good(lo) and good(hi):
        word = "holds"
    elif not good(lo) and not good(hi):
        word = "fails"
    else:
        word = "undecided"
    return word, (f"paired median {median:.3f}, {coverage:.1%} interval {lo:.3f}-{hi:.3f} "
                  f"(target {sign} {target}, {len(ratios)} rounds)")
