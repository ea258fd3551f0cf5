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


# A run is "slow" when its figure exceeds this many times its tool's fastest run
# (the fast level; a median would call nothing slow in a tool whose runs split
# half and half): the host's slow whole runs of 2026-11-24..28 sat at 1.4-2.1x
# (docs/findings/2026-11-28-issue19-calm-host.md).
SLOW_RUN = 1.3


def fisher_one_sided(k_a, n_a, k_b, n_b):
    """P(A has at least k_a slow runs of n_a) under the null hypothesis that both
    tools' runs are slow alike, given k_a + k_b slow runs in all (Fisher's exact
    test, hypergeometric upper tail)."""
    from math import comb
    k = k_a + k_b
    n = n_a + n_b
    total = comb(n, k)
    return sum(comb(n_a, i) * comb(n_b, k - i) for i in range(k_a, min(k, n_a) + 1)) / total


# From this many rounds per tool on, the spread verdict reads the spread as
# p90/p10 of the runs that are not slow, and counts the slow runs apart, instead
# of max/min: max/min is then decided by the single slowest run of each tool, and
# grows with the number of rounds. In one boot
# of 80 rounds (2026-11-28), a slow whole run came to ngauge in 2 of 160 runs and
# to perftest in 9 of 160, isolated, never to both tools of a round.
ROBUST_ROUNDS = 20


def quantile(values, q):
    """The q-quantile of `values`, interpolated linearly between order statistics
    (numpy's default, type 7)."""
    v = sorted(values)
    at = (len(v) - 1) * q
    lo = int(at)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (at - lo)


def spread_verdict(a, b, slack=0.10, alpha=0.05):
    """Issue 19's spread target on per-round figures `a` (ngauge) and `b` (the
    reference): the spread of `a` at most (1 + slack) times that of `b`.

    Below ROBUST_ROUNDS rounds the spread is max/min. Over a few rounds it is
    decided by the slow whole runs the host gives either tool. So a miss is
    `fails` only when `a` had significantly more slow runs than `b` (one-sided
    Fisher exact test at `alpha`); otherwise the rounds cannot tell the tools
    apart and the verdict is `undecided`. A tool's fastest run is never slow, so
    at most n - 1 of n runs are: the smallest p is 0.20 with 3 rounds, 0.071 with
    4 and 0.024 with 5 (4 of 5 slow against none). Below 5 rounds no miss can
    fail, and the text says so.

    From ROBUST_ROUNDS rounds on, the slow runs are judged on their own, by their
    count, and the spread is p90/p10 of each tool's other runs (so that slow
    runs the count does not flag cannot move it: at 20 rounds, 3 slow runs move
    a p90 of all runs): `holds` when that p90/p10 is within the limit and `a` had
    not significantly more slow runs than `b`; `fails` otherwise. A run without
    a finite figure (perftest once printed `inf`) counts as slow. Returns (word,
    text)."""
    a = [x for x in a if x == x and x > 0]
    b = [x for x in b if x == x and x > 0]
    if not any(x != float("inf") for x in a) or not any(x != float("inf") for x in b):
        return "undecided", "no finite figures"
    if not a or not b:
        return "undecided", "no figures"
    is_slow = lambda x, v: x > SLOW_RUN * min(v)
    slow = lambda v: sum(is_slow(x, v) for x in v)
    k_a, k_b = slow(a), slow(b)
    p = fisher_one_sided(k_a, len(a), k_b, len(b))
    slow_text = (f"slow whole runs (> {SLOW_RUN}x the tool's fastest): {k_a} of {len(a)} against "
                 f"{k_b} of {len(b)}, one-sided Fisher p = {p:.2f}")
    if min(len(a), len(b)) >= ROBUST_ROUNDS:
        fast_a = [x for x in a if not is_slow(x, a)]
        fast_b = [x for x in b if not is_slow(x, b)]
        spread_a = quantile(fast_a, 0.9) / quantile(fast_a, 0.1)
        spread_b = quantile(fast_b, 0.9) / quantile(fast_b, 0.1)
        limit = spread_b * (1 + slack)
        text = (f"p90/p10 of the runs that are not slow {spread_a:.3f} against {spread_b:.3f} "
                f"x {1 + slack:.2f} = {limit:.3f} (max/min {max(a) / min(a):.2f} against "
                f"{max(b) / min(b):.2f}); {slow_text}")
        return ("holds" if spread_a <= limit and p >= alpha else "fails"), text
    spread_a, spread_b = max(a) / min(a), max(b) / min(b)
    limit = spread_b * (1 + slack)
    text = f"spread {spread_a:.2f} against {spread_b:.2f} x {1 + slack:.2f} = {limit:.2f}"
    if spread_a <= limit:
        return "holds", text
    text += "; " + slow_text
    best = fisher_one_sided(len(a) - 1, len(a), 0, len(b))
    if best >= alpha:
        text += f" (with {len(a)} rounds no count reaches p < {alpha}: more rounds could decide)"
    return ("fails" if p < alpha else "undecided"), text
