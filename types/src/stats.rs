//! The medians, once: every "median" the product shows comes from here or
//! from [`crate::steps::percentile`] (the step statistics' p50 and p90).

/// The median of values in any order: the middle one, or the mean of the
/// two middle ones; 0 for none. (The ranks' median: the slowest rank's
/// lead over it.)
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The position of the median item by `key` (ties by position): the upper
/// middle one of an even count; `None` for no items. (The median step the
/// timelines align on.)
pub fn median_index<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Option<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| key(a).cmp(&key(b)).then(a.cmp(&b)));
    order.get(n / 2).copied()
}

/// Within this fraction of its time in run A a layer counts as unchanged
/// in run B (the diff timeline's layer strip colours by it).
pub const SAME_WITHIN: f64 = 0.03;

/// How a layer (or any span) changed from run A to run B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Faster by more than [`SAME_WITHIN`].
    Faster,
    /// Within [`SAME_WITHIN`] either way.
    Same,
    /// Slower by more than [`SAME_WITHIN`].
    Slower,
}

impl Change {
    /// The change of a time ratio minus one (`-0.6`: 60% faster).
    pub fn of(change: f64) -> Change {
        if change < -SAME_WITHIN {
            Change::Faster
        } else if change > SAME_WITHIN {
            Change::Slower
        } else {
            Change::Same
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        let d = [5, 1, 9, 3];
        assert_eq!(median_index(d.len(), |k| d[k]), Some(0));
        assert_eq!(median_index(0, |k| k), None);
        assert_eq!(median_index(3, |_| 0), Some(1));
    }

    #[test]
    fn changes() {
        assert_eq!(Change::of(-0.6), Change::Faster);
        assert_eq!(Change::of(0.02), Change::Same);
        assert_eq!(Change::of(-0.03), Change::Same);
        assert_eq!(Change::of(0.2), Change::Slower);
    }
}
