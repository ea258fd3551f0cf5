#!/usr/bin/env python3
"""Reference values for the tests of src/stats/ranksum.rs and src/stats/mean_ci.rs.

R is the reference (`wilcox.test(x, y)` with its defaults: two-sided, exact when
both samples have fewer than 50 values and no ties, else the normal approximation
with tie and continuity correction; `t.test(x)$conf.int`). R is not installed here,
so this script computes the same definitions with SciPy:
`mannwhitneyu(x, y, method='exact' | 'asymptotic', use_continuity=True)` and
`t.interval`. Run it (`pip install scipy`) and compare with the constants written
into the tests. The vectors `gen(seed, n, shift)` are reproduced bit for bit in
Rust by `stats::ranksum::tests::gen`.
"""
from scipy.stats import mannwhitneyu, t
import math

MASK = (1 << 64) - 1


def gen(seed, n, shift):
    x, out = seed, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK
        out.append((x >> 11) / float(1 << 53) * 10.0 + shift)
    return out


def rounded(values):
    return [round(v * 10.0) / 10.0 for v in values]


def show(name, x, y, method):
    ties = len(set(x) | set(y)) < len(x) + len(y)
    assert method == "asymptotic" or not ties, name
    r = mannwhitneyu(x, y, method=method, use_continuity=True, alternative="two-sided")
    print(f"{name}: n=({len(x)},{len(y)}) ties={ties} method={method} "
          f"W={float(r.statistic)!r} p={float(r.pvalue)!r}")


# Hollander & Wolfe (1973), p. 69, the example of R's ?wilcox.test.
hw_x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
hw_y = [1.15, 0.88, 0.90, 0.74, 1.21]
show("hollander-wolfe", hw_x, hw_y, "exact")
show("separated-3-4", [1.1, 2.2, 3.3], [4.4, 5.5, 6.6, 7.7], "exact")
show("gen-12-9", gen(1, 12, 0.0), gen(2, 9, 0.8), "exact")
show("gen-7-30", gen(5, 7, 0.0), gen(6, 30, 0.0), "exact")
show("gen-49-49", gen(3, 49, 0.0), gen(4, 49, 1.0), "exact")
# airquality$Ozone, months 5 and 8, NAs removed (R's ?wilcox.test example).
may = [41, 36, 12, 18, 28, 23, 19, 8, 7, 16, 11, 14, 18, 14, 34, 6, 30, 11, 1, 11,
       4, 32, 23, 45, 115, 37]
aug = [39, 9, 16, 78, 35, 66, 122, 89, 110, 44, 28, 65, 22, 59, 23, 31, 44, 21, 9,
       45, 168, 73, 76, 118, 84, 85]
show("airquality-5-8", may, aug, "asymptotic")
show("gen-50-49", gen(7, 50, 0.0), gen(8, 49, 0.5), "asymptotic")
show("small-ties", [1, 2, 2, 3], [2, 3, 3, 4, 5], "asymptotic")
show("rounded-200-150", rounded(gen(9, 200, 0.0)), rounded(gen(10, 150, 0.3)), "asymptotic")

# t-based 95% interval of the mean (R: t.test(x)$conf.int).
for name, x in [("hollander-wolfe-x", hw_x)]:
    n = len(x)
    mean = sum(x) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    lo, hi = t.interval(0.95, n - 1, loc=mean, scale=sd / math.sqrt(n))
    print(f"mean-ci {name}: n={n} mean={mean!r} lo={float(lo)!r} hi={float(hi)!r}")
for df in [1, 9, 29]:
    print(f"t quantile 0.975 df={df}: {float(t.ppf(0.975, df))!r}")
