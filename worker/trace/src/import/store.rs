//! The columnar event store the parser fills and the analysis reads.
//!
//! Events are split by what they are (CPU-side slices, GPU ops, launch flows)
//! into struct-of-arrays tables with interned names, so that a 1.4 M-event
//! trace takes tens of megabytes and the analysis walks plain vectors.
//! Times are integer nanoseconds, exactly as written in the trace (see
//! `parse::parse_time_ns`).

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};

/// A string id in an [`Interner`]. Id 0 is always the empty string.
pub type Sym = u32;

/// Deduplicated strings: each distinct name is stored once, and at most
/// [`MAX_TEXTS`] of them (and [`MAX_TEXT_POOL_BYTES`]) as written.
#[derive(Default)]
pub struct Interner {
    table: HashTable<Sym>,
    spans: Vec<(u32, u32)>,
    arena: String,
    hasher: foldhash::fast::FixedState,
    /// Texts past the bound: kept folded, then lumped ([`MAX_TEXTS`]).
    pub past_bound: PastBound,
}

/// Distinct texts (names, categories, shapes and dtypes, text track ids)
/// a trace keeps as written. Past this, a new text is kept folded
/// ([`fold_text`]: `request_1234` as `request_#`) while the folded texts
/// fit in a quarter more ([`FOLDED_ROOM`]), and past that as
/// [`LUMPED_TEXT`].
///
/// Why this value: the most distinct texts of any trace we have is 2,722
/// (`tracelens-mi300x-xdit-sd3.5-infer`: 2,115 names, the rest shapes and
/// dtypes; the story's H200 capture has a few hundred), so no real trace
/// comes near it. Above it, what each distinct name costs in the analysis
/// (its op row's sums, the classifiers' and the layer search's maps) took
/// the CLI past its memory budget (50 MiB + 32 B an event) on a million
/// calls of a name each: 70.7 MiB with this bound, 86 MiB with 12,000,
/// 82-88 MiB with 16,000-50,000, 311 MiB unbounded (BENCHMARKS.md,
/// "Distinct names"; the budget there is 80.5 MiB). The test:
/// `robustness::a_name_a_call_is_folded_past_the_bound`.
pub const MAX_TEXTS: usize = 10_000;

/// Bytes of distinct text kept as written: the same bound by bytes. The
/// longest real names (templated kernels, Python frames) are a few
/// kilobytes, and 10,000 of them at 64 KB each ([`MAX_TEXT_BYTES`]) would
/// be 640 MB; the shared traces hold well under 1 MB of text.
pub const MAX_TEXT_POOL_BYTES: usize = 4 << 20;

/// Room for folded texts past the bound, in quarters of it: the bound and
/// a quarter more (a folded text costs what any text costs).
const FOLDED_ROOM: usize = 5;

/// What a text past the folded texts' room is kept as.
pub const LUMPED_TEXT: &str = "(other names, past the limit)";

/// Distinct (pid, tid) pairs (CPU threads, GPU streams) a trace keeps
/// apart. Past this, the slices of every new pair go on one track, named
/// [`LUMPED_TRACK`]. Why: the most any trace we have has is 62
/// (`hta-mtia-inference-rank0`; the 8-rank and serving traces 10-18), and
/// each track costs the analysis a few lists of its own, so a trace with a
/// thread a call (a tid per event) held 304 MiB for a million calls; with
/// this bound, BENCHMARKS.md "Distinct names", `tid1m`. The test:
/// `robustness::a_thread_a_call_is_put_on_one_track_past_the_bound`.
pub const MAX_TRACKS: usize = 4096;

/// The track of the threads past [`MAX_TRACKS`], by name.
pub const LUMPED_TRACK: &str = "(threads past the limit)";

/// How many interned texts were past the bound.
#[derive(Clone, Copy, Debug, Default)]
pub struct PastBound {
    /// Texts kept folded ([`fold_text`]), counted each time one was read.
    pub folded: u64,
    /// Texts kept as [`LUMPED_TEXT`], counted the same way.
    pub lumped: u64,
}

/// A text with what most often makes names of one kind distinct folded
/// away: each run of digits (and each `0x` hex number or long hex run, an
/// address or a hash) as `#`. `request_1234` and `request_98` are both
/// `request_#`, `ProfilerStep#12` is `ProfilerStep##`, `Tensor<float>[64, 8]`
/// is `Tensor<float>[#, #]`.
pub fn fold_text(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let word = s[i..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        if word == 0 {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let w = &s[i..i + word];
        let hex = |w: &[u8]| !w.is_empty() && w.iter().all(u8::is_ascii_hexdigit);
        let number = w.starts_with(b"0x") && hex(&w[2..])
            || w.len() >= 8 && hex(w) && w.iter().any(u8::is_ascii_digit);
        if number {
            out.push(b'#');
        } else {
            let mut k = 0;
            while k < w.len() {
                if w[k].is_ascii_digit() {
                    while k < w.len() && w[k].is_ascii_digit() {
                        k += 1;
                    }
                    out.push(b'#');
                } else {
                    out.push(w[k]);
                    k += 1;
                }
            }
        }
        i += word;
    }
    out
}

impl Interner {
    /// An interner holding only the empty string (id 0).
    pub fn new() -> Self {
        let mut i = Interner::default();
        i.intern("");
        i
    }

    fn hash(&self, s: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(s);
        h.finish()
    }

    /// The id of `s`, adding it if new.
    pub fn intern(&mut self, s: &str) -> Sym {
        self.intern_bytes(s.as_bytes())
    }

    /// The id of `s`, adding it if new. Invalid UTF-8 is replaced (once, when
    /// the string is first seen). Text longer than [`MAX_TEXT_BYTES`] is
    /// kept cut to that length (marked as cut): a 2 KB upload can hold a
    /// 50 MB name, which every table, cache and answer would carry.
    pub fn intern_bytes(&mut self, s: &[u8]) -> Sym {
        if s.len() > MAX_TEXT_BYTES {
            return self.intern_bytes(cut_text(s).as_bytes());
        }
        let hash = self.hash(s);
        if let Some(id) = self.find_hashed(hash, s) {
            return id;
        }
        if self.within(4, s.len()) {
            return self.insert(hash, s);
        }
        // Past the bound: the text folded, kept while the folded texts'
        // room holds, and past that the one lumped text.
        let folded = fold_text(s);
        let hash = self.hash(&folded);
        if let Some(id) = self.find_hashed(hash, &folded) {
            self.past_bound.folded += 1;
            return id;
        }
        if self.within(FOLDED_ROOM, folded.len()) {
            self.past_bound.folded += 1;
            return self.insert(hash, &folded);
        }
        self.past_bound.lumped += 1;
        let lumped = LUMPED_TEXT.as_bytes();
        let hash = self.hash(lumped);
        match self.find_hashed(hash, lumped) {
            Some(id) => id,
            None => self.insert(hash, lumped),
        }
    }

    /// Whether a new text of `len` bytes fits within `k` quarters of the
    /// bound.
    fn within(&self, k: usize, len: usize) -> bool {
        self.spans.len() < k * MAX_TEXTS / 4
            && self.arena.len() + len <= k * MAX_TEXT_POOL_BYTES / 4
    }

    fn find_hashed(&self, hash: u64, s: &[u8]) -> Option<Sym> {
        let eq = |&id: &Sym| {
            let (start, len) = self.spans[id as usize];
            &self.arena.as_bytes()[start as usize..(start + len) as usize] == s
        };
        self.table.find(hash, eq).copied()
    }

    fn insert(&mut self, hash: u64, s: &[u8]) -> Sym {
        let Interner {
            table,
            spans,
            arena,
            hasher,
            ..
        } = self;
        let id = spans.len() as Sym;
        let start = arena.len() as u32;
        match std::str::from_utf8(s) {
            Ok(text) => arena.push_str(text),
            Err(_) => arena.push_str(&String::from_utf8_lossy(s)),
        }
        spans.push((start, arena.len() as u32 - start));
        let spans = &*spans;
        let arena_ref = &*arena;
        let hasher = &*hasher;
        table.insert_unique(hash, id, |&other| {
            let (st, len) = spans[other as usize];
            let mut h = hasher.build_hasher();
            h.write(&arena_ref.as_bytes()[st as usize..(st + len) as usize]);
            h.finish()
        });
        id
    }

    /// Looks up a string without adding it.
    pub fn find(&self, s: &str) -> Option<Sym> {
        let hash = self.hash(s.as_bytes());
        self.table.find(hash, |&id| self.get(id) == s).copied()
    }

    /// The string of an id.
    pub fn get(&self, id: Sym) -> &str {
        let (start, len) = self.spans[id as usize];
        &self.arena[start as usize..(start + len) as usize]
    }

    /// Bytes of text held.
    pub fn bytes(&self) -> usize {
        self.arena.len()
    }

    /// Number of distinct strings (including the empty one).
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether only the empty string is held.
    pub fn is_empty(&self) -> bool {
        self.spans.len() <= 1
    }
}

/// The longest name or text value a trace keeps, bytes. The longest real
/// names (templated CUDA kernels) are a few kilobytes; past this a name is
/// cut (see [`cut_text`]).
pub const MAX_TEXT_BYTES: usize = 64 << 10;

/// `s` cut to at most [`MAX_TEXT_BYTES`] bytes on a character boundary,
/// with a note of how long it was.
pub fn cut_text(s: &[u8]) -> String {
    let note = format!("… [{} bytes cut]", s.len());
    let mut end = MAX_TEXT_BYTES.saturating_sub(note.len() + 3);
    let head = String::from_utf8_lossy(&s[..end.min(s.len())]);
    // A lossy decode may end in a cut character's replacement: drop it.
    end = head.len().min(end);
    while !head.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = head[..end].trim_end_matches('\u{FFFD}').to_string();
    out.push_str(&note);
    out
}

/// A `pid` or `tid` value: JSON integers and all-digit strings become
/// integers (2020-21 traces write CPU tids as strings but flows as integers);
/// other strings (`"Spans"`, `"stream 7"`) become a reserved negative range.
pub type TrackId = i64;

/// Offset of string-valued pid/tid ids: `STRING_ID_BASE + sym`.
pub const STRING_ID_BASE: i64 = i64::MIN / 2;

/// Marker for "no value" in integer columns (correlation, external id).
pub const NONE: i64 = i64::MIN;

/// An integer column at four bytes a row: durations (ns), ids, devices and
/// streams are almost always below 2^32 - 2, so a row holds the value
/// itself; [`NONE`] and any other value (negative, huge: damaged or unusual
/// traces) are marked in the row and kept in a side map, so every value
/// reads back exactly. Half the memory of a `Vec<i64>` on real traces,
/// which matters because the parsed columns live through the analysis.
/// A column where values that do not fit are common (every op longer than
/// 4.3 s: the map took 60 MB at a million rows) keeps every value whole
/// instead, in `wide`, once they are [`WIDE_SHARE`](Self::WIDE_SHARE) of
/// its rows, and frees its rows: 8 bytes a row at most.
#[derive(Clone, Debug, Default)]
pub struct IntColumn {
    rows: Vec<u32>,
    spilled: hashbrown::HashMap<u32, i64>,
    /// Every row's value, once the column is wide (`rows` and `spilled`
    /// are then empty); empty before.
    wide: Vec<i64>,
}

impl IntColumn {
    /// The row of [`NONE`].
    const ABSENT: u32 = u32::MAX;
    /// The row of a value kept in `spilled` (or in `wide`).
    const SPILLED: u32 = u32::MAX - 1;
    /// The column turns wide when one row in this many is spilled, and at
    /// least [`WIDE_MIN`](Self::WIDE_MIN) are: a spilled value costs 20-40
    /// bytes in the map with its slack, so past an eighth of the rows 8
    /// more bytes a row is less. Real traces spill a few rows (steps and
    /// frames over 4.3 s; absent ids are not spilled).
    const WIDE_SHARE: usize = 8;
    /// Spilled rows below which a column stays narrow (a small table's
    /// map is small).
    const WIDE_MIN: usize = 4096;

    /// `n` zeros (sums to add to).
    pub fn zeros(n: usize) -> IntColumn {
        IntColumn {
            rows: vec![0; n],
            ..Default::default()
        }
    }

    /// The row that holds `v` at index `i` (kept aside when it does not fit).
    #[inline]
    fn row_of(&mut self, i: usize, v: i64) -> u32 {
        if (0..i64::from(Self::SPILLED)).contains(&v) {
            v as u32
        } else if v == NONE {
            Self::ABSENT
        } else {
            self.spilled.insert(i as u32, v);
            Self::SPILLED
        }
    }

    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: i64) {
        if !self.wide.is_empty() {
            self.wide.push(v);
            return;
        }
        let row = self.row_of(self.rows.len(), v);
        self.rows.push(row);
        if row == Self::SPILLED {
            self.widen_if_common();
        }
    }

    /// Whether `spilled` values of `rows` are common enough for a column
    /// to keep every value whole (this column's rule, and [`NearColumn`]'s).
    fn spills_are_common(spilled: usize, rows: usize) -> bool {
        spilled >= Self::WIDE_MIN && spilled * Self::WIDE_SHARE >= rows
    }

    /// Turns the column wide when spilled values are common.
    #[cold]
    fn widen_if_common(&mut self) {
        if !Self::spills_are_common(self.spilled.len(), self.rows.len()) {
            return;
        }
        self.wide = (0..self.rows.len()).map(|i| self.get(i)).collect();
        self.rows = Vec::new();
        self.spilled = Default::default();
    }

    /// Adds `d` to row `i`.
    #[inline]
    pub fn add(&mut self, i: usize, d: i64) {
        if let Some(w) = self.wide.get_mut(i) {
            *w += d;
            return;
        }
        let row = self.rows[i];
        if row < Self::SPILLED {
            let v = i64::from(row) + d;
            if (0..i64::from(Self::SPILLED)).contains(&v) {
                self.rows[i] = v as u32;
                return;
            }
        }
        self.set(i, self.get(i) + d);
    }

    /// Sets row `i` to `v`.
    pub fn set(&mut self, i: usize, v: i64) {
        if let Some(w) = self.wide.get_mut(i) {
            *w = v;
            return;
        }
        if self.rows[i] == Self::SPILLED {
            self.spilled.remove(&(i as u32));
        }
        self.rows[i] = self.row_of(i, v);
        if self.rows[i] == Self::SPILLED {
            self.widen_if_common();
        }
    }

    /// The value of row `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> i64 {
        match self.rows.get(i) {
            Some(&row) if row < Self::SPILLED => i64::from(row),
            Some(&row) => self.rare(i, row),
            None => self.wide_at(i),
        }
    }

    /// Row `i` of a wide column.
    #[cold]
    fn wide_at(&self, i: usize) -> i64 {
        self.wide[i]
    }

    #[cold]
    fn rare(&self, i: usize, row: u32) -> i64 {
        if row == Self::ABSENT {
            NONE
        } else {
            self.spilled[&(i as u32)]
        }
    }

    /// The last value.
    pub fn last(&self) -> Option<i64> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len().max(self.wide.len())
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values in row order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The values, copied out (tests and small tables).
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }
}

/// Values kept whole beside a column, by row, for the rows whose value
/// the column cannot hold: rows are pushed in increasing order, so the
/// list is sorted and a row is found by binary search. Twelve bytes a
/// value (a map took 20-40 with its slack); a column whose spills are
/// common goes wide first ([`NearColumn`]).
#[derive(Clone, Debug, Default)]
pub struct Spills {
    rows: Vec<u32>,
    values: Vec<i64>,
}

impl Spills {
    /// Keeps `v` for row `i` (after every row kept so far).
    #[inline]
    fn push(&mut self, i: u32, v: i64) {
        debug_assert!(self.rows.last().is_none_or(|&r| r < i));
        self.rows.push(i);
        self.values.push(v);
    }

    /// The value kept for row `i`.
    #[cold]
    fn get(&self, i: u32) -> i64 {
        let k = self
            .rows
            .binary_search(&i)
            .expect("a spilled row's value is kept");
        self.values[k]
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Timestamps, ns: see [`NearColumn`].
pub type TimeColumn = NearColumn;

/// Values that move little from row to row (timestamps, memory totals) at
/// four bytes a row: each block of 65,536 rows keeps a base (its first
/// value less 2^31), and a row its offset from that base. Rows of one block
/// lie within a few milliseconds of each other in real traces, well inside
/// the offsets' ±2 s, and a device's memory total within ±2 GiB; a value
/// that falls outside (a trace stitched from far-apart clocks, a damaged
/// one) is kept whole in [`Spills`], so every value reads back exactly.
/// Once an eighth of the rows are spilled (two clocks in turn), every
/// value is kept whole in `wide` instead: no input costs more than 8
/// bytes a row (the rule and its reasons are [`IntColumn`]'s). Starts are
/// the largest column of a trace: half of it is 40 MB at 10 M slices.
#[derive(Clone, Debug, Default)]
pub struct NearColumn {
    bases: Vec<i64>,
    offsets: Vec<u32>,
    spilled: Spills,
    /// Every row's value once the column is wide (the rest is then
    /// empty); empty before.
    wide: Vec<i64>,
}

impl NearColumn {
    /// Rows per base.
    const BLOCK_BITS: u32 = 16;
    /// The offset of a value kept in `spilled`.
    const SPILLED: u32 = u32::MAX;

    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: i64) {
        if !self.wide.is_empty() {
            self.wide.push(v);
            return;
        }
        let i = self.offsets.len();
        if i & ((1 << Self::BLOCK_BITS) - 1) == 0 {
            self.bases.push(v.saturating_sub(1 << 31));
        }
        let base = self.bases[i >> Self::BLOCK_BITS];
        match v.checked_sub(base) {
            Some(o) if (0..i64::from(Self::SPILLED)).contains(&o) => self.offsets.push(o as u32),
            _ => {
                self.spilled.push(i as u32, v);
                self.offsets.push(Self::SPILLED);
                self.widen_if_common();
            }
        }
    }

    /// Keeps every value whole once spilled ones are common.
    #[cold]
    fn widen_if_common(&mut self) {
        if !IntColumn::spills_are_common(self.spilled.len(), self.offsets.len()) {
            return;
        }
        self.wide = (0..self.offsets.len()).map(|i| self.get(i)).collect();
        (self.bases, self.offsets, self.spilled) = Default::default();
    }

    /// Row `i` of a wide column.
    #[cold]
    fn wide_at(&self, i: usize) -> i64 {
        self.wide[i]
    }

    /// The value of row `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> i64 {
        match self.offsets.get(i) {
            Some(&o) if o != Self::SPILLED => self.bases[i >> Self::BLOCK_BITS] + i64::from(o),
            Some(_) => self.spilled.get(i as u32),
            None => self.wide_at(i),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len().max(self.wide.len())
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last value.
    pub fn last(&self) -> Option<i64> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// The values in row order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The values, copied out (tests and small tables).
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }
}

/// A column of values that repeat a lot (input shapes, launch geometry,
/// threads and streams): each distinct value stored once, a row holds its
/// id in two bytes while there are at most 65,536 distinct values (always,
/// on the traces we have seen), in four past that.
#[derive(Clone, Debug)]
pub struct DistinctColumn<T> {
    rows: DistinctIds,
    values: Vec<T>,
    ids: hashbrown::HashMap<T, u32>,
}

/// A [`DistinctColumn`]'s ids, as narrow as they fit.
#[derive(Clone, Debug)]
enum DistinctIds {
    /// This many rows, all of the first value: no bytes a row while a
    /// column has one value (a trace of one thread, or without shapes:
    /// 4 of the 36 bytes an event of `few5m` in BENCHMARKS.md).
    One(usize),
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl<T> Default for DistinctColumn<T> {
    fn default() -> Self {
        DistinctColumn {
            rows: DistinctIds::One(0),
            values: Vec::new(),
            ids: hashbrown::HashMap::default(),
        }
    }
}

impl<T: Copy + Eq + std::hash::Hash> DistinctColumn<T> {
    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: T) {
        let next = self.values.len() as u32;
        let id = *self.ids.entry(v).or_insert(next);
        if id == next {
            self.values.push(v);
        }
        match &mut self.rows {
            DistinctIds::One(n) if id == 0 => *n += 1,
            DistinctIds::One(n) => {
                let mut narrow = vec![0u16; *n];
                narrow.push(id as u16);
                self.rows = DistinctIds::Narrow(narrow);
            }
            DistinctIds::Narrow(rows) if id <= u32::from(u16::MAX) => rows.push(id as u16),
            DistinctIds::Narrow(rows) => {
                let mut wide: Vec<u32> = rows.iter().map(|&r| u32::from(r)).collect();
                wide.push(id);
                self.rows = DistinctIds::Wide(wide);
            }
            DistinctIds::Wide(rows) => rows.push(id),
        }
    }

    /// The value of row `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        self.values[self.id(i) as usize]
    }

    /// The id of row `i`'s value: rows with equal values share it; ids
    /// run from 0 to [`distinct`](Self::distinct) - 1.
    #[inline(always)]
    pub fn id(&self, i: usize) -> u32 {
        match &self.rows {
            DistinctIds::One(n) => {
                assert!(i < *n, "row {i} of {n}");
                0
            }
            DistinctIds::Narrow(rows) => u32::from(rows[i]),
            DistinctIds::Wide(rows) => rows[i],
        }
    }

    /// Number of distinct values.
    pub fn distinct(&self) -> usize {
        self.values.len()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match &self.rows {
            DistinctIds::One(n) => *n,
            DistinctIds::Narrow(rows) => rows.len(),
            DistinctIds::Wide(rows) => rows.len(),
        }
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last value.
    pub fn last(&self) -> Option<T> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// The values in row order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The values, copied out (tests and small tables).
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().collect()
    }
}

/// Sorts rows of a table by start, longer first among rows that start
/// together (a parent before the children it starts with), then by `tie`;
/// stable. Starts are compared first and alone, and the rare equal starts
/// sorted apart, which is much cheaper than one sort on the whole key.
pub fn sort_by_start(
    rows: &mut [u32],
    ts: &TimeColumn,
    dur: &IntColumn,
    mut tie: impl FnMut(u32, u32) -> std::cmp::Ordering,
) {
    sort_by_time_then(rows, ts, |equal| {
        equal.sort_by(|&a, &b| {
            dur.get(b as usize)
                .cmp(&dur.get(a as usize))
                .then_with(|| tie(a, b))
        })
    });
}

/// Sorts rows by their time in `ts`, stably. Kineto writes CPU slices as
/// they end, so sorting them by start is a real sort: a comparison sort
/// spent 600 instructions a row here, through the column's base and offset
/// on each compare. Rows already in order are left as they are after one
/// scan. Holds one `u32` per row of scratch, as the standard stable sort
/// does, and one per four rows of counts.
pub fn sort_by_time(rows: &mut [u32], ts: &TimeColumn) {
    sort_by_time_then(rows, ts, |_| ());
}

/// [`sort_by_time`], then `equal` on each run of two or more rows with one
/// time.
fn sort_by_time_then(rows: &mut [u32], ts: &TimeColumn, mut equal: impl FnMut(&mut [u32])) {
    // Each run of equal times in `part` (sorted) to `equal`.
    let mut runs = |part: &mut [u32]| {
        let mut lo = 0;
        while lo < part.len() {
            let start = ts.get(part[lo] as usize);
            let mut hi = lo + 1;
            while hi < part.len() && ts.get(part[hi] as usize) == start {
                hi += 1;
            }
            if hi - lo > 1 {
                equal(&mut part[lo..hi]);
            }
            lo = hi;
        }
    };
    if rows.len() < 64 {
        rows.sort_by_key(|&r| ts.get(r as usize));
        runs(rows);
        return;
    }
    let (mut lo, mut hi, mut sorted, mut prev) = (i64::MAX, i64::MIN, true, i64::MIN);
    for &r in rows.iter() {
        let t = ts.get(r as usize);
        sorted &= t >= prev;
        prev = t;
        lo = lo.min(t);
        hi = hi.max(t);
    }
    if sorted {
        runs(rows);
        return;
    }
    // One pass on the top bits of the time (less the smallest) puts each row
    // in its bucket, stably, about four rows a bucket; then each bucket is
    // sorted on its own, mostly by insertion. Rows come nearly in time
    // order, so the buckets fill nearly in order and a bucket's rows are
    // near each other in the column (a least-significant-digit radix sort
    // reads the column in a scrambled order once per pass: at 300 steps it
    // took twice as long). Equal times share a bucket.
    let bucket_bits = (rows.len() / 4).max(2).ilog2().clamp(8, 22);
    // Times are clamped to [-2^60, 2^61] when parsed: the span fits in u64.
    let span = hi.abs_diff(lo);
    let shift = (u64::BITS - span.leading_zeros()).saturating_sub(bucket_bits);
    let key = |r: u32| ts.get(r as usize).abs_diff(lo);
    // Rows per bucket, then where each bucket starts; after the rows are
    // placed, where each ends.
    let mut at = vec![0u32; (span >> shift) as usize + 2];
    for &r in rows.iter() {
        at[(key(r) >> shift) as usize + 1] += 1;
    }
    for k in 1..at.len() {
        at[k] += at[k - 1];
    }
    let mut scratch = vec![0u32; rows.len()];
    for &r in rows.iter() {
        let d = (key(r) >> shift) as usize;
        scratch[at[d] as usize] = r;
        at[d] += 1;
    }
    let mut start = 0;
    for &end in &at {
        let part = &mut scratch[start as usize..end as usize];
        start = end;
        if part.len() <= 16 {
            // Insertion, stable: a row moves before those with later times.
            for j in 1..part.len() {
                let (r, k) = (part[j], key(part[j]));
                let mut i = j;
                while i > 0 && key(part[i - 1]) > k {
                    part[i] = part[i - 1];
                    i -= 1;
                }
                part[i] = r;
            }
        } else {
            part.sort_by_key(|&r| key(r));
        }
        runs(part);
    }
    rows.copy_from_slice(&scratch);
}

/// One (pid, tid) pair: a CPU thread or a GPU stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Track {
    /// Process id.
    pub pid: TrackId,
    /// Thread id.
    pub tid: TrackId,
}

/// What a CPU-side slice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CpuKind {
    /// `user_annotation`: record_function ranges (`ProfilerStep#N`, `nccl:all_reduce`).
    Annotation = 0,
    /// `cpu_op` / `Operator`: ATen ops and autograd nodes.
    Op = 1,
    /// `cuda_runtime` / `Runtime` (also HIP calls on AMD).
    Runtime = 2,
    /// `cuda_driver` (`cuLaunchKernel`).
    Driver = 3,
    /// `python_function` frames of `nn.Module`s (other Python frames are only counted).
    Module = 4,
    /// Kineto's `overhead` events (`Command Buffer Full` inside a launch
    /// that blocked on a full queue, `Lazy Function Loading`, `Buffer
    /// Flush`): written on a track of their own (pid -1), but children of
    /// the runtime call around them in torch's event tree.
    Overhead = 5,
}

impl CpuKind {
    /// Ops and annotations can launch GPU work and own child events.
    pub fn is_op(self) -> bool {
        matches!(self, CpuKind::Annotation | CpuKind::Op)
    }
    /// Runtime and driver calls.
    pub fn is_runtime(self) -> bool {
        matches!(self, CpuKind::Runtime | CpuKind::Driver)
    }
}

/// CPU-side slices (`X` events on CPU threads), one column per field. The
/// columns are private: rows go in whole ([`Trace::push_cpu`]), so every
/// column has the table's length; readers get each column by its method.
#[derive(Default)]
pub struct CpuTable {
    ts: TimeColumn,
    dur: IntColumn,
    name: Vec<Sym>,
    /// A thread: few distinct.
    track: DistinctColumn<u32>,
    kind: Vec<CpuKind>,
    /// Interned `Input Dims` and `Input type` text (0 when absent): ops
    /// repeat a few thousand distinct pairs.
    inputs: DistinctColumn<(Sym, Sym)>,
}

/// One CPU-side slice, as it is stored.
#[derive(Clone, Copy, Debug)]
pub struct CpuRow {
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Name.
    pub name: Sym,
    /// Track (a thread).
    pub track: u32,
    /// What it is.
    pub kind: CpuKind,
    /// Interned `Input Dims` text (0 when absent).
    pub shapes: Sym,
    /// Interned `Input type` text (0 when absent).
    pub dtypes: Sym,
}

impl CpuTable {
    fn push(&mut self, r: &CpuRow) {
        self.ts.push(r.ts);
        self.dur.push(r.dur);
        self.name.push(r.name);
        self.track.push(r.track);
        self.kind.push(r.kind);
        self.inputs.push((r.shapes, r.dtypes));
    }
    /// Starts, ns.
    #[inline]
    pub fn ts(&self) -> &TimeColumn {
        &self.ts
    }
    /// Durations, ns.
    #[inline]
    pub fn dur(&self) -> &IntColumn {
        &self.dur
    }
    /// Names.
    #[inline]
    pub fn name(&self) -> &[Sym] {
        &self.name
    }
    /// Tracks (threads).
    #[inline]
    pub fn track(&self) -> &DistinctColumn<u32> {
        &self.track
    }
    /// Kinds.
    #[inline]
    pub fn kind(&self) -> &[CpuKind] {
        &self.kind
    }
    /// Interned `Input Dims` text of row `i` (0 when absent).
    pub fn shapes(&self, i: usize) -> Sym {
        self.inputs.get(i).0
    }
    /// Interned `Input type` text of row `i` (0 when absent).
    pub fn dtypes(&self, i: usize) -> Sym {
        self.inputs.get(i).1
    }
    /// Row `i`'s shapes and types as one id, shared by rows with both
    /// equal (below [`distinct_inputs`](Self::distinct_inputs)).
    pub fn inputs_id(&self, i: usize) -> u32 {
        self.inputs.id(i)
    }
    /// Number of distinct shapes and types pairs.
    pub fn distinct_inputs(&self) -> usize {
        self.inputs.distinct()
    }
    /// Number of slices.
    pub fn len(&self) -> usize {
        self.ts.len()
    }
    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// What a GPU-side slice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum GpuKind {
    /// Kernel.
    Kernel = 0,
    /// Memcpy.
    Memcpy = 1,
    /// Memset.
    Memset = 2,
    /// `gpu_user_annotation`: the GPU projection of a record_function range;
    /// not device work, never counted as GPU-op time.
    Annotation = 3,
}

impl GpuKind {
    /// Kernels, memcpys and memsets: the device work.
    pub fn is_gpu_op(self) -> bool {
        !matches!(self, GpuKind::Annotation)
    }
    /// The kind of GPU op in summaries (annotations are not GPU ops and
    /// read as kernels; callers filter them out first).
    pub fn public(self) -> kinetoscope_types::GpuOpKind {
        match self {
            GpuKind::Memcpy => kinetoscope_types::GpuOpKind::Memcpy,
            GpuKind::Memset => kinetoscope_types::GpuOpKind::Memset,
            GpuKind::Kernel | GpuKind::Annotation => kinetoscope_types::GpuOpKind::Kernel,
        }
    }
}

/// GPU-side slices, one column per field, private as [`CpuTable`]'s are
/// ([`Trace::push_gpu`]).
#[derive(Default)]
pub struct GpuTable {
    ts: TimeColumn,
    dur: IntColumn,
    name: Vec<Sym>,
    kind: Vec<GpuKind>,
    /// Devices and streams: few distinct (no bytes a row for one).
    device: DistinctColumn<i64>,
    stream: DistinctColumn<i64>,
    /// Launch grid and block: a trace launches few distinct shapes.
    geometry: DistinctColumn<([u32; 3], [u32; 3])>,
    /// `args.bytes` of memcpy/memset, else 0.
    bytes: IntColumn,
    /// A stream: few distinct.
    track: DistinctColumn<u32>,
    /// The rows that carry a CUDA-graph kernel annotation, with it, by row:
    /// few traces have any, so they are kept apart from the columns.
    annotations: Vec<(u32, Sym)>,
}

/// One GPU-side slice, as it is stored.
#[derive(Clone, Copy, Debug)]
pub struct GpuRow {
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Name.
    pub name: Sym,
    /// What it is.
    pub kind: GpuKind,
    /// Device.
    pub device: i64,
    /// Stream.
    pub stream: i64,
    /// Launch grid (`[0, 0, 0]` when absent).
    pub grid: [u32; 3],
    /// Launch block (`[0, 0, 0]` when absent).
    pub block: [u32; 3],
    /// Bytes of a copy or set, else 0.
    pub bytes: i64,
    /// Track (a stream).
    pub track: u32,
    /// Its CUDA-graph annotation (`args.name`), if it carries one.
    pub annotation: Option<Sym>,
}

impl GpuTable {
    fn push(&mut self, r: &GpuRow) {
        if let Some(a) = r.annotation {
            self.annotations.push((self.name.len() as u32, a));
        }
        self.ts.push(r.ts);
        self.dur.push(r.dur);
        self.name.push(r.name);
        self.kind.push(r.kind);
        self.device.push(r.device);
        self.stream.push(r.stream);
        self.geometry.push((r.grid, r.block));
        self.bytes.push(r.bytes);
        self.track.push(r.track);
    }
    /// Starts, ns.
    #[inline]
    pub fn ts(&self) -> &TimeColumn {
        &self.ts
    }
    /// Durations, ns.
    #[inline]
    pub fn dur(&self) -> &IntColumn {
        &self.dur
    }
    /// Names.
    #[inline]
    pub fn name(&self) -> &[Sym] {
        &self.name
    }
    /// Kinds.
    #[inline]
    pub fn kind(&self) -> &[GpuKind] {
        &self.kind
    }
    /// Devices.
    #[inline]
    pub fn device(&self) -> &DistinctColumn<i64> {
        &self.device
    }
    /// Streams.
    #[inline]
    pub fn stream(&self) -> &DistinctColumn<i64> {
        &self.stream
    }
    /// Bytes of copies and sets (0 for kernels).
    #[inline]
    pub fn bytes(&self) -> &IntColumn {
        &self.bytes
    }
    /// Tracks (streams).
    #[inline]
    pub fn track(&self) -> &DistinctColumn<u32> {
        &self.track
    }
    /// The CUDA-graph kernel annotations: (row, its `args.name`), by row.
    #[inline]
    pub fn annotations(&self) -> &[(u32, Sym)] {
        &self.annotations
    }
    /// Launch grid of row `g`, `[0, 0, 0]` when absent.
    pub fn grid(&self, g: usize) -> [u32; 3] {
        self.geometry.get(g).0
    }
    /// Block of row `g`, `[0, 0, 0]` when absent.
    pub fn block(&self, g: usize) -> [u32; 3] {
        self.geometry.get(g).1
    }
    /// Number of slices.
    pub fn len(&self) -> usize {
        self.ts.len()
    }
    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// Launch flows (`ac2g`, `async_cpu_to_gpu`, `async`): only used when a GPU
/// op lacks `args.correlation`.
#[derive(Default)]
pub struct FlowTable {
    is_start: Vec<bool>,
    id: IntColumn,
    track: Vec<u32>,
    ts: TimeColumn,
}

/// One launch flow's start or end.
#[derive(Clone, Copy, Debug)]
pub struct FlowRow {
    /// `true` for a start (`s`, at the launch), `false` for an end (`f`).
    pub is_start: bool,
    /// The flow's id.
    pub id: i64,
    /// Track.
    pub track: u32,
    /// Time, ns.
    pub ts: i64,
}

impl FlowTable {
    /// Starts (`true`) and ends.
    pub fn is_start(&self) -> &[bool] {
        &self.is_start
    }
    /// Ids.
    pub fn id(&self) -> &IntColumn {
        &self.id
    }
    /// Tracks.
    pub fn track(&self) -> &[u32] {
        &self.track
    }
    /// Times, ns.
    pub fn ts(&self) -> &TimeColumn {
        &self.ts
    }
    /// Number of flow events.
    pub fn len(&self) -> usize {
        self.is_start.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.is_start.is_empty()
    }
}

/// The ids that link a GPU op to its launch and a launch to its op: per CPU
/// slice its `args.correlation` (runtime and driver calls, else [`NONE`])
/// and `External id`, per GPU op its correlation, and the launch flows.
/// Only finding the launches reads them; they are kept apart from the
/// tables ([`Trace::into_parts`]) so that a pass after that step, which
/// gets the [`Tables`] alone, cannot read them, and the job can free them
/// by dropping them.
#[derive(Default)]
pub struct LaunchIds {
    cpu_correlation: IntColumn,
    cpu_external_id: IntColumn,
    gpu_correlation: IntColumn,
    flows: FlowTable,
}

impl LaunchIds {
    /// Per CPU slice: `args.correlation` of runtime and driver calls, else
    /// [`NONE`].
    #[inline]
    pub fn cpu_correlation(&self) -> &IntColumn {
        &self.cpu_correlation
    }
    /// Per CPU slice: `args.External id` / `external id`, else [`NONE`].
    #[inline]
    pub fn cpu_external_id(&self) -> &IntColumn {
        &self.cpu_external_id
    }
    /// Per GPU slice: `args.correlation`, else [`NONE`]. (`External id` is
    /// not kept for GPU ops: a GPU op reaches its op through its launch.)
    #[inline]
    pub fn gpu_correlation(&self) -> &IntColumn {
        &self.gpu_correlation
    }
    /// The launch flows.
    pub fn flows(&self) -> &FlowTable {
        &self.flows
    }
    /// `External id` alone, when the links still need it (the job frees
    /// the rest once the launches are found).
    pub fn into_external_id(self) -> IntColumn {
        self.cpu_external_id
    }
}

/// `python_function` frames (`with_stack=True` traces): the Python call
/// stack above the ops. Kept lean (no args): they are often most of the
/// events of such traces, and only their nesting and names matter.
#[derive(Default)]
pub struct PythonTable {
    ts: TimeColumn,
    dur: IntColumn,
    name: Vec<Sym>,
    track: Vec<u32>,
}

/// A Python frame, or a slice of the "other" table.
#[derive(Clone, Copy, Debug)]
pub struct PlainRow {
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Name.
    pub name: Sym,
    /// Track.
    pub track: u32,
}

impl PythonTable {
    /// Starts, ns.
    #[inline]
    pub fn ts(&self) -> &TimeColumn {
        &self.ts
    }
    /// Durations, ns.
    #[inline]
    pub fn dur(&self) -> &IntColumn {
        &self.dur
    }
    /// Names.
    #[inline]
    pub fn name(&self) -> &[Sym] {
        &self.name
    }
    /// Tracks.
    #[inline]
    pub fn track(&self) -> &[u32] {
        &self.track
    }
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.ts.len()
    }
    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// Slices of categories the analysis does not interpret (`cuda_sync`,
/// `cuda_profiler_range`, `mtia_runtime`, ...): kept so nothing is lost.
#[derive(Default)]
pub struct OtherTable {
    cat: Vec<Sym>,
    ts: TimeColumn,
    dur: IntColumn,
    name: Vec<Sym>,
    track: Vec<u32>,
}

impl OtherTable {
    /// Categories.
    pub fn cat(&self) -> &[Sym] {
        &self.cat
    }
    /// Starts, ns.
    pub fn ts(&self) -> &TimeColumn {
        &self.ts
    }
    /// Durations, ns.
    pub fn dur(&self) -> &IntColumn {
        &self.dur
    }
    /// Names.
    pub fn name(&self) -> &[Sym] {
        &self.name
    }
    /// Tracks.
    pub fn track(&self) -> &[u32] {
        &self.track
    }
    /// Number of slices.
    pub fn len(&self) -> usize {
        self.ts.len()
    }
    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// One entry of `deviceProperties`.
#[derive(Clone, Debug, Default)]
pub struct DeviceProps {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Number of SMs.
    pub num_sms: Option<i64>,
    /// Total global memory.
    pub total_global_mem: Option<i64>,
    /// `computeMajor`.
    pub compute_major: Option<i64>,
}

/// Top-level metadata of the trace file.
#[derive(Clone, Debug, Default)]
pub struct TraceMeta {
    /// Layout array.
    pub layout_array: bool,
    /// Schema version.
    pub schema_version: Option<i64>,
    /// Devices.
    pub devices: Vec<DeviceProps>,
    /// Rank.
    pub rank: Option<i64>,
    /// World size.
    pub world_size: Option<i64>,
    /// Backend.
    pub backend: Option<String>,
    /// Base time, ns.
    pub base_time_ns: Option<i64>,
    /// Trace name.
    pub trace_name: Option<String>,
    /// Display time unit.
    pub display_time_unit: Option<String>,
    /// Profiler options set to 1 at the top level (`record_shapes`, ...).
    pub options: Vec<String>,
}

/// One `[memory]` event: an allocation (`bytes` > 0) or a free (`bytes` <
/// 0) by the CPU thread of `track`, with the device's totals after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEvent {
    /// When, ns.
    pub ts: i64,
    /// The CPU thread that allocated or freed.
    pub track: u32,
    /// Index into [`MemoryTable::devices`].
    pub device: u16,
    /// The block's address (`Addr`; 0 when absent).
    pub addr: i64,
    /// Bytes allocated (> 0) or freed (< 0).
    pub bytes: i64,
    /// `Total Allocated` on the device after the event.
    pub total_allocated: i64,
    /// `Total Reserved` after the event (-1 when absent).
    pub total_reserved: i64,
}

/// `[memory]` events, column by column: 32 to 36 bytes an event rather
/// than a [`MemoryEvent`]'s 56. A trace with `profile_memory=True` has
/// about one memory event an op, and a million allocations held the
/// CLI's peak over its budget (`memsame` in BENCHMARKS.md).
#[derive(Default)]
pub struct MemoryEvents {
    ts: TimeColumn,
    /// The CPU thread: one or a few.
    track: DistinctColumn<u32>,
    /// One or a few.
    device: DistinctColumn<u16>,
    addr: Vec<i64>,
    /// Bytes, as an `i32` (sizes up to 2 GiB, and frees, as negatives),
    /// [`SPILLED`](Self::SPILLED) where kept in `bytes_spilled`.
    bytes: Vec<i32>,
    bytes_spilled: Spills,
    /// The device's totals after the event: they move by one allocation at
    /// a time, so four bytes a row (a million allocations never freed,
    /// `memsame` in BENCHMARKS.md, held 16 MB in them as `i64`s).
    total_allocated: NearColumn,
    total_reserved: NearColumn,
}

impl MemoryEvents {
    const SPILLED: i32 = i32::MIN;

    /// Appends an event.
    pub fn push(&mut self, e: &MemoryEvent) {
        let i = self.addr.len() as u32;
        self.ts.push(e.ts);
        self.track.push(e.track);
        self.device.push(e.device);
        self.addr.push(e.addr);
        match i32::try_from(e.bytes).ok().filter(|&b| b != Self::SPILLED) {
            Some(b) => self.bytes.push(b),
            None => {
                self.bytes.push(Self::SPILLED);
                self.bytes_spilled.push(i, e.bytes);
            }
        }
        self.total_allocated.push(e.total_allocated);
        self.total_reserved.push(e.total_reserved);
    }

    /// Event `i`.
    #[inline]
    pub fn get(&self, i: usize) -> MemoryEvent {
        MemoryEvent {
            ts: self.ts.get(i),
            track: self.track.get(i),
            device: self.device.get(i),
            addr: self.addr[i],
            bytes: self.bytes(i),
            total_allocated: self.total_allocated.get(i),
            total_reserved: self.total_reserved.get(i),
        }
    }

    /// Event `i`'s time, ns.
    #[inline]
    pub fn ts(&self, i: usize) -> i64 {
        self.ts.get(i)
    }

    /// Event `i`'s block address.
    #[inline]
    pub fn addr(&self, i: usize) -> i64 {
        self.addr[i]
    }

    /// Event `i`'s bytes (> 0 allocated, < 0 freed).
    #[inline]
    pub fn bytes(&self, i: usize) -> i64 {
        match self.bytes[i] {
            Self::SPILLED => self.bytes_spilled.get(i as u32),
            b => i64::from(b),
        }
    }

    /// Event `i`'s device (an index into [`MemoryTable::devices`]).
    #[inline]
    pub fn device(&self, i: usize) -> u16 {
        self.device.get(i)
    }

    /// Event `i`'s `Total Allocated`.
    #[inline]
    pub fn total_allocated(&self, i: usize) -> i64 {
        self.total_allocated.get(i)
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.addr.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }

    /// Every event, in file order.
    pub fn iter(&self) -> impl Iterator<Item = MemoryEvent> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// The `[memory]` events of a trace (`profile_memory=True`), in file order.
#[derive(Default)]
pub struct MemoryTable {
    /// The events.
    pub events: MemoryEvents,
    /// The devices, by the events' index: `cuda:0`, `cpu`.
    pub devices: Vec<String>,
    /// Events on devices past [`MAX_MEMORY_DEVICES`], left out.
    pub past_bound: u64,
}

/// Devices (`Device Type`, `Device Id`) whose memory events a trace keeps.
/// Past this, the events of new devices are left out, and counted. Why: a
/// process sees the CPU and its node's GPUs (8, at most 16 on the nodes we
/// know; the shared traces one or two); each device's memory is replayed
/// over its own events, and a trace with a device an event (a new
/// `Device Id` in each) had a million devices, and (its index a `u16`)
/// aliased them past 65,536: 901 s of CPU for a million events
/// (BENCHMARKS.md, "Distinct names", `mem1m`). The test:
/// `robustness::a_memory_device_an_event_is_bounded`.
pub const MAX_MEMORY_DEVICES: usize = 64;

/// One series of counter events (`ph: "C"`): a process's track, the
/// event's name and one key of its `args`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSeries {
    /// The track of the event's pid and tid.
    pub track: u32,
    /// The event's name.
    pub name: String,
    /// The `args` key.
    pub key: String,
}

/// One counter sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CounterSample {
    /// Index into [`CounterTable::series`].
    pub series: u32,
    /// When, ns.
    pub ts: i64,
    /// The value.
    pub value: f64,
}

/// The counter events of a trace, in file order.
#[derive(Default)]
pub struct CounterTable {
    /// The series.
    pub series: Vec<CounterSeries>,
    /// The samples.
    pub samples: Vec<CounterSample>,
    /// Series by (track, name, key), while parsing.
    pub(crate) index: hashbrown::HashMap<(u32, String, String), u32>,
    /// Process names (`process_name` metadata) by pid.
    pub process_names: hashbrown::HashMap<TrackId, String>,
    /// Samples of series past [`MAX_COUNTER_SERIES`], left out.
    pub past_bound: u64,
}

/// Counter series (`ph: "C"` events' (track, name, `args` key)) a trace
/// keeps. Past this, the samples of new series are left out, and counted.
/// Why: a counter is a handful of series (memory, utilization, clocks; the
/// generator's `--counters` writes 4, the shared traces none), and the
/// counters artifact keeps 4 MB of them at most; each series costs about
/// 860 bytes between its strings, its index and its track, so a trace with
/// a series a sample (a new `args` key in every counter event) held
/// 860 MiB for a million samples (BENCHMARKS.md, "Distinct names",
/// `ctr1m`). The test: `robustness::a_counter_series_a_sample_is_bounded`.
pub const MAX_COUNTER_SERIES: usize = 4096;

/// A counter series' key as the parser reads it, looked up without
/// making its strings (they are made once, when the series is new).
#[derive(Hash)]
pub(crate) struct SeriesKey<'a>(pub u32, pub &'a str, pub &'a str);

impl hashbrown::Equivalent<(u32, String, String)> for SeriesKey<'_> {
    fn equivalent(&self, key: &(u32, String, String)) -> bool {
        self.0 == key.0 && self.1 == key.1 && self.2 == key.2
    }
}

/// Per-`cat` counters, including events that are not stored.
#[derive(Default)]
pub struct Counters {
    /// Entries of `traceEvents`.
    pub events: u64,
    /// Events per interned `cat` (sym 0 = no cat).
    pub by_cat: hashbrown::HashMap<Sym, u64>,
    /// Peak `Total Allocated` per device key (`cuda:0`, `cpu`).
    pub peak_memory: Vec<(String, i64)>,
    /// Decompressed JSON bytes read.
    pub json_bytes: u64,
    /// Slices put on the one track of the threads past [`MAX_TRACKS`].
    pub past_tracks: u64,
}

/// What the analysis passes read of a trace: every table but the launch
/// ids.
pub struct Tables {
    /// Meta.
    pub meta: TraceMeta,
    /// Names.
    pub names: Interner,
    /// Tracks.
    pub tracks: Vec<Track>,
    /// CPU.
    pub cpu: CpuTable,
    /// GPU.
    pub gpu: GpuTable,
    /// Python.
    pub python: PythonTable,
    /// Other.
    pub other: OtherTable,
    /// Counters.
    pub counters: Counters,
    /// Memory events.
    pub memory: MemoryTable,
    /// Counter events (`ph: "C"`).
    pub counter_samples: CounterTable,
}

impl Tables {
    /// The name of a string id.
    pub fn name(&self, sym: Sym) -> &str {
        self.names.get(sym)
    }

    /// Readable form of a pid or tid.
    pub fn track_id_text(&self, id: TrackId) -> String {
        if (STRING_ID_BASE..STRING_ID_BASE + (1 << 32)).contains(&id) {
            self.names.get((id - STRING_ID_BASE) as Sym).to_string()
        } else {
            id.to_string()
        }
    }
}

/// A parsed trace: the input of the analysis. Its [`Tables`] (what it
/// dereferences to) and its [`LaunchIds`]; rows go in through the `push_`
/// methods, which keep every column of a table, and the ids beside it, the
/// same length.
pub struct Trace {
    tables: Tables,
    ids: LaunchIds,
}

impl std::ops::Deref for Trace {
    type Target = Tables;
    #[inline]
    fn deref(&self) -> &Tables {
        &self.tables
    }
}

impl std::ops::DerefMut for Trace {
    #[inline]
    fn deref_mut(&mut self) -> &mut Tables {
        &mut self.tables
    }
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Trace {
            tables: Tables {
                meta: TraceMeta::default(),
                names: Interner::new(),
                tracks: Vec::new(),
                cpu: CpuTable::default(),
                gpu: GpuTable::default(),
                python: PythonTable::default(),
                other: OtherTable::default(),
                counters: Counters::default(),
                memory: MemoryTable::default(),
                counter_samples: CounterTable::default(),
            },
            ids: LaunchIds::default(),
        }
    }

    /// Appends a CPU-side slice with its correlation and `External id`
    /// ([`NONE`] when absent).
    #[inline]
    pub fn push_cpu(&mut self, row: &CpuRow, correlation: i64, external_id: i64) {
        self.tables.cpu.push(row);
        self.ids.cpu_correlation.push(correlation);
        self.ids.cpu_external_id.push(external_id);
    }

    /// Appends a GPU-side slice with its correlation ([`NONE`] when absent).
    #[inline]
    pub fn push_gpu(&mut self, row: &GpuRow, correlation: i64) {
        self.tables.gpu.push(row);
        self.ids.gpu_correlation.push(correlation);
    }

    /// Appends a Python frame.
    #[inline]
    pub fn push_python(&mut self, row: &PlainRow) {
        let p = &mut self.tables.python;
        p.ts.push(row.ts);
        p.dur.push(row.dur);
        p.name.push(row.name);
        p.track.push(row.track);
    }

    /// Appends a slice of a category the analysis does not interpret.
    pub fn push_other(&mut self, cat: Sym, row: &PlainRow) {
        let o = &mut self.tables.other;
        o.cat.push(cat);
        o.ts.push(row.ts);
        o.dur.push(row.dur);
        o.name.push(row.name);
        o.track.push(row.track);
    }

    /// Appends a launch flow's start or end.
    pub fn push_flow(&mut self, row: &FlowRow) {
        let f = &mut self.ids.flows;
        f.is_start.push(row.is_start);
        f.id.push(row.id);
        f.track.push(row.track);
        f.ts.push(row.ts);
    }

    /// The launch ids, for finding launches on a trace the caller keeps.
    pub fn ids(&self) -> &LaunchIds {
        &self.ids
    }

    /// The tables and the launch ids apart: the job finds the launches
    /// with both, then drops the ids, and no pass after can read them.
    pub fn into_parts(self) -> (Tables, LaunchIds) {
        (self.tables, self.ids)
    }
}

impl Default for Trace {
    fn default() -> Self {
        Trace::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn texts_fold_their_numbers() {
        let fold = |s: &str| String::from_utf8(super::fold_text(s.as_bytes())).unwrap();
        assert_eq!(fold("request_1234"), "request_#");
        assert_eq!(fold("ProfilerStep#12"), "ProfilerStep##");
        assert_eq!(fold("Tensor<float>[64, 8]"), "Tensor<float>[#, #]");
        assert_eq!(fold("buf 0x7f3a9c00 at deadbeef01"), "buf # at #");
        assert_eq!(fold("layers.3.mlp fp8"), "layers.#.mlp fp#");
        assert_eq!(fold("aten::copy_"), "aten::copy_");
        assert_eq!(fold("naïve_7"), "naïve_#");
    }

    use super::*;

    #[test]
    fn names_past_the_limit_are_kept_cut() {
        let mut i = Interner::new();
        let long = "é".repeat(MAX_TEXT_BYTES); // two bytes a character
        let a = i.intern(&long);
        assert!(i.get(a).len() <= MAX_TEXT_BYTES, "{}", i.get(a).len());
        assert!(i.get(a).starts_with("éé"));
        assert!(i.get(a).ends_with(&format!("[{} bytes cut]", long.len())));
        // The same long name is the same name; a short one is untouched.
        assert_eq!(i.intern(&long), a);
        let b = i.intern("aten::copy_");
        assert_eq!(i.get(b), "aten::copy_");
        // Invalid UTF-8 cut mid-way still gives text within the limit.
        let bytes = vec![0xffu8; 3 * MAX_TEXT_BYTES];
        let c = i.intern_bytes(&bytes);
        assert!(i.get(c).len() <= MAX_TEXT_BYTES);
    }

    #[test]
    fn a_time_column_reads_back_every_value_near_and_far_from_its_blocks_base() {
        let block = 1usize << TimeColumn::BLOCK_BITS;
        let first = 1_700_000_000_000_000_000i64;
        let mut want: Vec<i64> = Vec::new();
        for i in 0..(2 * block + 10) as i64 {
            want.push(first + i * 1_000);
        }
        // A block's base is its first value less 2^31: offsets from 0 to
        // 2^32 - 2 fit, the rest are kept whole.
        let at = block + 7;
        let base = want[block] - (1 << 31);
        want[at] = base; // offset 0
        want[at + 1] = base - 1; // below the base
        want[at + 2] = base + (u32::MAX as i64) - 1; // the last offset that fits
        want[at + 3] = base + (u32::MAX as i64); // the spill marker's value
        want[at + 4] = i64::MIN;
        want[at + 5] = i64::MAX;
        want[at + 6] = 0;
        want[at + 7] = -5;
        let mut c = TimeColumn::default();
        for &v in &want {
            c.push(v);
        }
        assert_eq!(
            c.spilled.len(),
            6,
            "below the base, the marker, the extremes, 0, -5"
        );
        assert_eq!(c.to_vec(), want);
        assert_eq!((c.len(), c.last()), (want.len(), want.last().copied()));
        // A block that starts at an extreme value.
        let mut c = TimeColumn::default();
        for v in [i64::MIN, i64::MIN + 1, i64::MAX, 0] {
            c.push(v);
        }
        assert_eq!(c.to_vec(), vec![i64::MIN, i64::MIN + 1, i64::MAX, 0]);
        assert!(TimeColumn::default().is_empty());
    }

    #[test]
    fn two_interleaved_clocks_read_back_whole_once_spills_are_common() {
        // Two processes a day apart on their clocks, one event each in
        // turn: the far clock's rows are spilled, in row order, until they
        // are common; then every value is kept whole. A few far rows stay
        // spilled. Each value reads back.
        let n = 3 * (1usize << NearColumn::BLOCK_BITS) / 2;
        let day = 86_400_000_000_000i64;
        let want: Vec<i64> = (0..n as i64)
            .map(|i| if i % 2 == 0 { i * 10 } else { day + i * 10 })
            .collect();
        let mut c = NearColumn::default();
        for (i, &v) in want.iter().enumerate() {
            c.push(v);
            if i == 2 * IntColumn::WIDE_MIN - 2 {
                assert_eq!(
                    (c.spilled.len(), c.wide.len()),
                    (IntColumn::WIDE_MIN - 1, 0)
                );
            }
        }
        assert_eq!(c.wide.len(), n);
        assert!(c.offsets.is_empty() && c.bases.is_empty() && c.spilled.is_empty());
        assert_eq!(c.to_vec(), want);
        assert_eq!((c.len(), c.last()), (n, want.last().copied()));
        let mut few = NearColumn::default();
        for i in 0..n as i64 {
            few.push(if i % 1000 == 7 { day + i } else { i });
        }
        assert_eq!((few.wide.len(), few.spilled.len()), (0, n.div_ceil(1000)));
        assert_eq!(few.get(7), day + 7);
    }

    #[test]
    fn memory_events_read_back_as_written() {
        let events: Vec<MemoryEvent> = [512, -512, 3 << 30, -(3 << 30), i64::from(i32::MIN), 0]
            .into_iter()
            .enumerate()
            .map(|(k, bytes)| MemoryEvent {
                ts: 1_000 + k as i64,
                track: (k % 2) as u32,
                device: (k / 3) as u16,
                addr: 0x7f00_0000_0000 + k as i64,
                bytes,
                total_allocated: (5 << 30) + k as i64,
                total_reserved: if k == 5 { -1 } else { 8 << 30 },
            })
            .collect();
        let mut m = MemoryEvents::default();
        events.iter().for_each(|e| m.push(e));
        assert_eq!(m.len(), events.len());
        assert!(m.iter().eq(events.iter().copied()));
        assert_eq!(
            (m.bytes(2), m.device(4), m.addr(1)),
            (3 << 30, 1, 0x7f00_0000_0001)
        );
    }

    #[test]
    fn a_distinct_column_holds_no_row_bytes_until_a_second_value() {
        let mut c: DistinctColumn<u32> = DistinctColumn::default();
        for _ in 0..1000 {
            c.push(7);
        }
        assert!(matches!(c.rows, DistinctIds::One(1000)));
        assert_eq!(
            (c.len(), c.get(999), c.id(0), c.distinct()),
            (1000, 7, 0, 1)
        );
        c.push(9);
        c.push(7);
        assert!(matches!(c.rows, DistinctIds::Narrow(_)));
        assert_eq!(c.len(), 1002);
        assert!((0..1000).all(|i| c.get(i) == 7));
        assert_eq!((c.get(1000), c.get(1001), c.last()), (9, 7, Some(7)));
    }

    #[test]
    fn a_distinct_column_widens_its_ids_past_65536_values_and_reads_back_every_row() {
        let mut c: DistinctColumn<u64> = DistinctColumn::default();
        let value = |i: u64| (i % 70_001) * 7;
        for i in 0..140_000u64 {
            c.push(value(i));
            if i == 65_535 {
                assert!(
                    matches!(c.rows, DistinctIds::Narrow(_)),
                    "65,536 values fit two bytes"
                );
            }
            if i == 65_536 {
                assert!(
                    matches!(c.rows, DistinctIds::Wide(_)),
                    "the 65,537th widens"
                );
            }
        }
        assert_eq!(c.len(), 140_000);
        assert_eq!(c.last(), Some(value(139_999)));
        assert!((0..140_000).all(|i| c.get(i as usize) == value(i)));
        let mut few: DistinctColumn<u32> = DistinctColumn::default();
        assert!(few.is_empty() && few.last().is_none());
        few.push(3);
        few.push(3);
        assert_eq!((few.len(), few.get(1), few.distinct()), (2, 3, 1));
        few.push(9);
        assert_eq!((few.id(0), few.id(1), few.id(2)), (0, 0, 1));
    }

    #[test]
    fn int_column_reads_back_every_value() {
        let values = [
            0,
            1,
            1_250,
            i64::from(u32::MAX) - 2,
            i64::from(u32::MAX) - 1,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            -1,
            NONE,
            i64::MAX,
            STRING_ID_BASE + 7,
            42,
        ];
        let mut col = IntColumn::default();
        for v in values {
            col.push(v);
        }
        assert_eq!(col.to_vec(), values);
        assert_eq!(col.len(), values.len());
        assert_eq!(col.last(), Some(42));
        assert_eq!(col.get(8), NONE);
        // Only the values that do not fit in a row are kept aside.
        assert_eq!(col.spilled.len(), 6);

        // Sums cross the row limit both ways and read back exactly.
        let mut sums = IntColumn::zeros(3);
        sums.add(0, i64::from(u32::MAX) - 3);
        sums.add(0, 5);
        assert_eq!(sums.get(0), i64::from(u32::MAX) + 2);
        sums.add(0, -10);
        assert_eq!(sums.get(0), i64::from(u32::MAX) - 8);
        assert!(sums.spilled.is_empty());
        sums.add(1, -4);
        sums.add(2, 7);
        assert_eq!(sums.to_vec(), [i64::from(u32::MAX) - 8, -4, 7]);
    }

    #[test]
    fn an_int_column_of_common_spills_turns_wide_and_reads_back() {
        // Every other op longer than 4.3 s, and some absent: past an eighth
        // of the rows spilled the column keeps every value whole.
        let n = 4 * IntColumn::WIDE_MIN;
        let value = |i: usize| match i % 4 {
            0 => 5_000_000_000 + i as i64,
            1 => NONE,
            2 => -(i as i64),
            _ => i as i64,
        };
        let mut col = IntColumn::default();
        for i in 0..n {
            col.push(value(i));
            if i == IntColumn::WIDE_MIN {
                assert!(
                    col.wide.is_empty(),
                    "narrow below {} spills",
                    IntColumn::WIDE_MIN
                );
            }
        }
        assert_eq!(col.wide.len(), n);
        assert!(
            col.spilled.is_empty() && col.rows.is_empty(),
            "rows and map are freed"
        );
        assert_eq!(col.to_vec(), (0..n).map(value).collect::<Vec<_>>());
        col.add(3, 10);
        col.set(1, 42);
        col.push(7);
        assert_eq!((col.get(3), col.get(1), col.last()), (13, 42, Some(7)));
        // Sums that cross the row limit often turn wide too.
        let mut sums = IntColumn::zeros(n);
        for i in 0..n {
            sums.add(i, if i % 2 == 0 { 1 << 40 } else { 1 });
        }
        assert_eq!(sums.wide.len(), n);
        assert_eq!(sums.get(n - 2), 1 << 40);
        assert_eq!(sums.get(n - 1), 1);
    }

    /// The radix sort orders as the standard stable sort does: short and
    /// long inputs, sorted ones, times far apart (spilled offsets, the
    /// clamp bounds) and many equal times.
    #[test]
    fn sort_by_time_equals_a_stable_sort() {
        let mut seed = 99u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 20) % m
        };
        for (n, spread) in [
            (10, 5),
            (63, 1000),
            (64, 3),
            (500, 1 << 40),
            (5000, 1 << 20),
            (20_000, 50),
            (70_000, 1 << 33),
        ] {
            let mut times: Vec<i64> = (0..n).map(|_| 1_000_000 + next(spread) as i64).collect();
            if n == 500 {
                times[7] = -(1 << 60);
                times[9] = 1 << 61;
            }
            let mut column = TimeColumn::default();
            for &v in &times {
                column.push(v);
            }
            for rows in [
                (0..n as u32).rev().collect::<Vec<_>>(),
                (0..n as u32).collect(),
            ] {
                let mut want = rows.clone();
                want.sort_by_key(|&r| times[r as usize]);
                let mut got = rows;
                sort_by_time(&mut got, &column);
                assert_eq!(got, want, "{n} rows over {spread}");
            }
        }
    }

    #[test]
    fn sort_by_start_equals_one_sort_on_the_whole_key() {
        // Many equal starts and durations, some durations spilled.
        let mut seed = 12345u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 33) % m
        };
        let n = 2000;
        let ts: Vec<i64> = (0..n).map(|_| next(300) as i64).collect();
        let mut dur = IntColumn::default();
        for _ in 0..n {
            dur.push(match next(10) {
                0 => -5,
                1 => 1 << 40,
                _ => next(4) as i64,
            });
        }
        let rank: Vec<u8> = (0..n).map(|_| next(3) as u8).collect();
        let mut want: Vec<u32> = (0..n as u32).rev().collect();
        let mut got = want.clone();
        want.sort_by_key(|&r| {
            let r = r as usize;
            (ts[r], std::cmp::Reverse(dur.get(r)), rank[r])
        });
        let mut column = TimeColumn::default();
        for &v in &ts {
            column.push(v);
        }
        sort_by_start(&mut got, &column, &dur, |a, b| {
            rank[a as usize].cmp(&rank[b as usize])
        });
        assert_eq!(got, want);
    }
}
