#!/usr/bin/env python3
"""How sure a benchmark's ratio is: paired statistics of alternating runs.

Usage: paired.py LABEL "B1 B2 ..." "A1 A2 ..."

Each position is one round of alternating runs (A's run i and B's run i ran next
to each other), so B_i / A_i cancels the host's drift between rounds, which on the
project's machines moves single runs by up to 2x. Prints one line: the median of
the per-round ratios B/A, a confidence interval for the true median (the
distribution-free one from order statistics, as the sign test gives it: the
narrowest [x_k, x_(n+1-k)] that covers it with at least 90 % probability, and the
probability it does), in how many rounds the ratio was below 1, and their range.
The interval says whether a bar such as "within 1.2x" is met by the data, or only
by its median.
"""

import math
import statistics
import sys


def median_interval(xs, level=0.90):
    """(low, high, coverage): order statistics around the median of `xs`."""
    xs = sorted(xs)
    n = len(xs)

    def coverage(k):
        # P(x_k <= true median <= x_(n+1-k)) = 1 - 2 P(Binomial(n, 1/2) < k)
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= level:
        k += 1
    return xs[k - 1], xs[n - k], coverage(k)


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    label, b, a = argv[1], argv[2].split(), argv[3].split()
    if len(a) != len(b) or not a:
        sys.exit(f"paired.py: {label}: {len(b)} and {len(a)} runs, need the same number (> 0)")
    ratios = [float(y) / float(x) for x, y in zip(a, b)]
    lo, hi, cov = median_interval(ratios)
    below = sum(r < 1 for r in ratios)
    print(
        f"{label}: per-round ratio median {statistics.median(ratios):.2f}, "
        f"{cov:.0%} interval {lo:.2f}-{hi:.2f}; below 1 in {below} of {len(ratios)} rounds; "
        f"range {min(ratios):.2f}-{max(ratios):.2f}"
    )


if __name__ == "__main__":
    main(sys.argv)
