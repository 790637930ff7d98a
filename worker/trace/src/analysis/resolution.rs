//! Series at a bounded resolution (the memory curve, counter tracks): the
//! one rule for which points of a long series are kept for drawing.

use std::ops::Range;

/// Marks in `keep` the lowest and the highest point of `range` (the first
/// of each among equals).
pub(crate) fn keep_extremes<T: PartialOrd>(
    range: Range<usize>,
    value: impl Fn(usize) -> T,
    keep: &mut [bool],
) {
    if range.is_empty() {
        return;
    }
    let (mut lo, mut hi) = (range.start, range.start);
    for k in range {
        if value(k) < value(lo) {
            lo = k;
        }
        if value(k) > value(hi) {
            hi = k;
        }
    }
    keep[lo] = true;
    keep[hi] = true;
}

/// Marks in `keep` the first and last points and each of `buckets` equal
/// time buckets' lowest and highest, for `n` points sorted by `ts`.
pub(crate) fn keep_bucket_extremes<T: PartialOrd>(
    n: usize,
    buckets: usize,
    ts: impl Fn(usize) -> i64,
    value: impl Fn(usize) -> T,
    keep: &mut [bool],
) {
    if n == 0 {
        return;
    }
    keep[0] = true;
    keep[n - 1] = true;
    let (t0, t1) = (ts(0), ts(n - 1));
    let width = ((t1 - t0) / buckets.max(1) as i64).max(1);
    let mut start = 0;
    while start < n {
        let bucket_end = ts(start) - (ts(start) - t0) % width + width;
        // Points are sorted: the bucket ends at the first point past it.
        let (mut lo, mut hi) = (start, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if ts(mid) < bucket_end {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        keep_extremes(start..lo, &value, keep);
        start = lo.max(start + 1);
    }
}
