//! The timeline index: every CPU-side slice (ops, annotations, runtime
//! calls) and every GPU op of a trace, laid out for drawing, built once at
//! analysis time and stored as an artifact, so the timeline never re-parses
//! a trace.
//!
//! Layout: tracks (a CPU thread, a GPU stream), each with rows. CPU slices
//! go to the row of their nesting depth; GPU ops to the first row where they
//! do not overlap the one before; a slice that partly overlaps its row's
//! previous slice goes to an extra row rather than being dropped. Within a
//! row, slices are sorted by start and never overlap.
//!
//! Columns per slice: start (ns), duration (ns, clamped to `u32`), name and
//! kind (packed), a link (a GPU op's launch, a CPU slice's parent) and an
//! args reference (two bytes into the row's own table): 22 bytes. Every 64 slices of a row also keep
//! their total duration and their longest slice, so a window query answers
//! "what is in each pixel" in O(pixels x log n) per row: each pixel bucket
//! is found by binary search, and its busy time and longest slice come from
//! whole blocks plus at most two partial ones.
//!
//! Event ids are positions in that layout (track by track, row by row), so
//! an id names one slice for the lifetime of the artifact.
//!
//! The code: this module holds the index's types and the accessors every
//! part shares; [`build`](TimelineIndex::build) lays out a trace
//! (`build.rs`), the queries answer windows, events and searches
//! (`query.rs`), and `codec.rs` writes and reads the stored form.

mod build;
mod codec;
mod query;

use build::Slices;
pub use build::MAX_ROWS_PER_TRACK;
use codec::write_row;
use query::ReverseLinks;
pub use query::{EventColumns, MAX_RELATED};

use crate::import::store::{sort_by_start, CpuKind, GpuKind, Tables};
use hashbrown::HashMap;
use std::io::{self, Read, Write};

/// Slices per summary block.
const BLOCK: usize = 64;
/// "No link".
pub const NONE: u32 = u32::MAX;
/// Bits of the packed name that hold the kind.
const KIND_SHIFT: u32 = 28;
/// Format version of the stored index.
const FORMAT: u32 = 3;
/// zstd level of the stored index. On the realistic trace 1 stores 5.4 MB
/// (2: 5.2 MB, 3: 5.7 MB) and frees a quarter of the index build's time:
/// the compression shares the second core with the layer attribution.
const LEVEL: i32 = 1;

pub use kinetoscope_types::SliceKind;

/// A slice kind from its code in the index (`kind as u8`).
fn slice_kind(k: u8) -> SliceKind {
    SliceKind::ALL
        .get(k as usize)
        .copied()
        .unwrap_or(SliceKind::Memset)
}

/// Arguments shown in an event's details.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Args {
    /// A CPU slice's `Input Dims` and `Input type` (name-pool ids), and the
    /// Python stack above it (an index into the stacks, or [`NONE`]) for the
    /// outermost ops and graph launches of `with_stack` traces.
    Inputs {
        /// `Input Dims`.
        shapes: u32,
        /// `Input type`.
        dtypes: u32,
        /// The Python stack above it.
        python: u32,
    },
    /// A GPU op's launch geometry and bytes.
    Launch {
        /// Grid.
        grid: [u32; 3],
        /// Block.
        block: [u32; 3],
        /// Bytes moved (memcpy, memset).
        bytes: u64,
    },
}

/// One track: a CPU thread or a GPU stream.
#[derive(Clone, Debug, PartialEq)]
pub struct TrackInfo {
    /// `true` for a GPU stream.
    pub gpu: bool,
    /// A label for people, with the lane's kind first (`CPU · main thread
    /// 38211 (pid 38211)`, `GPU 0 · stream 7`).
    pub label: String,
    /// Process id as written (a number, or text for string pids).
    pub pid: String,
    /// Thread id as written.
    pub tid: String,
    /// GPU device, for GPU tracks.
    pub device: Option<i64>,
    /// GPU stream, for GPU tracks.
    pub stream: Option<i64>,
    /// First row (index into the index's rows) and number of rows.
    pub first_row: u32,
    /// Number of rows.
    pub rows: u32,
    /// Slices drawn on the track (in its rows).
    pub events: u64,
    /// Slices of the track's thread or stream that fit in none of its
    /// [`MAX_ROWS_PER_TRACK`] rows: counted, not drawn.
    pub hidden: u64,
}

/// A named time span (a step, a layer).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The step's name, or the layer's index as text.
    pub name: String,
    /// Layer index, for layers.
    pub index: i64,
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
}

/// One row of a track: slices sorted by start, never overlapping.
#[derive(Clone, Debug, Default)]
struct Row {
    track: u32,
    first_event: u32,
    start: Vec<i64>,
    dur: Vec<u32>,
    /// Name-pool id in the low 28 bits, [`SliceKind`] above.
    name: Vec<u32>,
    /// GPU: the launch's event id; CPU: the parent's; or [`NONE`].
    link: Vec<u32>,
    /// Per slice, its args as an index into this row's `args_table`
    /// ([`NO_ARGS`] when none; [`MORE_ARGS`]: in `args_more`). Rows use few
    /// distinct args, so two bytes per slice carry them.
    args: Vec<u16>,
    /// The args-pool ids this row uses.
    args_table: Vec<u32>,
    /// Where a row uses more than 65534 distinct args: slice -> args-pool id.
    args_more: HashMap<u32, u32>,
    /// Per block of [`BLOCK`] slices: total duration and longest slice.
    block_sum: Vec<i64>,
    block_max: Vec<u32>,
}

/// "No args" in a row's args column.
const NO_ARGS: u16 = u16::MAX;
/// "Args in the row's overflow map".
const MORE_ARGS: u16 = u16::MAX - 1;

impl PartialEq for Row {
    fn eq(&self, o: &Row) -> bool {
        self.track == o.track
            && self.first_event == o.first_event
            && self.start == o.start
            && self.dur == o.dur
            && self.name == o.name
            && self.link == o.link
            && (0..self.len()).all(|i| self.args_of(i) == o.args_of(i))
    }
}

impl Row {
    /// An empty row of `n` slices to come, its first event id `first_event`.
    fn with_capacity(track: u32, first_event: u32, n: usize) -> Row {
        Row {
            track,
            first_event,
            start: Vec::with_capacity(n),
            dur: Vec::with_capacity(n),
            name: Vec::with_capacity(n),
            link: Vec::with_capacity(n),
            args: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    fn len(&self) -> usize {
        self.start.len()
    }

    /// A slice's args-pool id, or [`NONE`].
    fn args_of(&self, i: usize) -> u32 {
        match self.args[i] {
            NO_ARGS => NONE,
            MORE_ARGS => self.args_more.get(&(i as u32)).copied().unwrap_or(NONE),
            k => self.args_table[k as usize],
        }
    }

    /// Sets a slice's args-pool id (the row's table grows as needed).
    fn set_args(&mut self, i: usize, id: u32, index: &mut HashMap<u32, u16>) {
        if id == NONE {
            self.args[i] = NO_ARGS;
            return;
        }
        let next = self.args_table.len();
        let k = match index.get(&id) {
            Some(&k) => k,
            None if next < MORE_ARGS as usize => {
                self.args_table.push(id);
                index.insert(id, next as u16);
                next as u16
            }
            None => {
                self.args_more.insert(i as u32, id);
                MORE_ARGS
            }
        };
        self.args[i] = k;
    }

    fn end(&self, i: usize) -> i64 {
        self.start[i] + self.dur[i] as i64
    }

    fn summarize(&mut self) {
        self.block_sum.clear();
        self.block_max.clear();
        for b in 0..self.len().div_ceil(BLOCK) {
            let (lo, hi) = (b * BLOCK, ((b + 1) * BLOCK).min(self.len()));
            self.block_sum
                .push(self.dur[lo..hi].iter().map(|&d| d as i64).sum());
            let best = (lo..hi)
                .max_by_key(|&i| (self.dur[i], std::cmp::Reverse(i)))
                .unwrap_or(lo);
            self.block_max.push(best as u32);
        }
    }

    /// Total duration of slices `lo..hi`.
    fn sum(&self, lo: usize, hi: usize) -> i64 {
        let mut s = 0i64;
        let mut i = lo;
        while i < hi {
            if i.is_multiple_of(BLOCK) && i + BLOCK <= hi {
                s += self.block_sum[i / BLOCK];
                i += BLOCK;
            } else {
                s += self.dur[i] as i64;
                i += 1;
            }
        }
        s
    }

    /// The longest slice of `lo..hi` (first of equals).
    fn longest(&self, lo: usize, hi: usize) -> usize {
        let mut best = lo;
        let mut i = lo;
        let better =
            |a: usize, b: usize| self.dur[a] > self.dur[b] || (self.dur[a] == self.dur[b] && a < b);
        while i < hi {
            if i.is_multiple_of(BLOCK) && i + BLOCK <= hi {
                let m = self.block_max[i / BLOCK] as usize;
                if better(m, best) {
                    best = m;
                }
                i += BLOCK;
            } else {
                if better(i, best) {
                    best = i;
                }
                i += 1;
            }
        }
        best
    }
}

/// One slice of a window answer: a single event, or several merged into
/// one pixel bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowSlice {
    /// Start of the first event, ns.
    pub start_ns: i64,
    /// First start to last end, ns.
    pub dur_ns: i64,
    /// Row within the track.
    pub row: u32,
    /// The event's name, or the longest merged event's.
    pub name: u32,
    /// Events merged (1: a single event).
    pub count: u32,
    /// Total duration of the merged events, ns.
    pub busy_ns: i64,
    /// The event's id when `count` is 1, else the longest one's.
    pub event: u32,
}

/// Where an event lies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventRef {
    /// The track.
    pub track: u32,
    /// The row within the track.
    pub row: u32,
    /// Index within the row.
    index: usize,
    /// Index of the row in the index.
    global_row: usize,
}

/// The timeline index of one trace (one rank).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineIndex {
    /// First start over all slices, ns.
    pub start_ns: i64,
    /// Last end, ns.
    pub end_ns: i64,
    /// The tracks, CPU threads first.
    pub tracks: Vec<TrackInfo>,
    /// Steps (ProfilerStep or the engine's).
    pub steps: Vec<Span>,
    /// Layers, per step, where layers were found (device time).
    pub layers: Vec<Span>,
    names: Vec<String>,
    args: Vec<Args>,
    /// Python stacks (name-pool ids, outermost first).
    stacks: Vec<Vec<u32>>,
    rows: Vec<Row>,
    /// Who links to each event ([`linked_to`](Self::linked_to)).
    reverse: ReverseLinks,
}

/// What the analysis hands the index builder.
pub struct Inputs<'a> {
    /// The parsed trace.
    pub trace: &'a Tables,
    /// Per CPU slice: its parent op, or `u32::MAX`.
    pub parent: &'a crate::analysis::links::RowIds,
    /// Per track (by id): its CPU slices (module frames aside) in start
    /// order, longer first among equal starts (the op tree's order; taken
    /// by the build).
    pub threads: Vec<Vec<u32>>,
    /// Per GPU slice: its launch (a CPU slice), or `u32::MAX`.
    pub launch: &'a crate::analysis::links::RowIds,
    /// Steps: (name, start, end).
    pub steps: Vec<(String, i64, i64)>,
    /// Layers: (index, start, end).
    pub layers: Vec<(i64, i64, i64)>,
    /// Python stacks (trace name ids, outermost first)...
    pub stacks: &'a [Vec<u32>],
    /// ...and the stack above each outermost op and graph launch.
    pub stack_of: &'a HashMap<u32, u32>,
}

impl TimelineIndex {
    /// Number of events over every track.
    pub fn events(&self) -> u64 {
        self.tracks.iter().map(|t| t.events).sum()
    }

    /// Bytes the in-memory columns take (the budget is 24 per event).
    pub fn column_bytes(&self) -> usize {
        self.rows
            .iter()
            .map(|r| {
                r.len() * (8 + 4 + 4 + 4 + 2)
                    + r.args_table.len() * 4
                    + r.args_more.len() * 8
                    + r.block_sum.len() * 12
            })
            .sum::<usize>()
    }

    /// Bytes the index takes in memory at most: its columns, and the
    /// reverse links [`linked_to`](Self::linked_to) builds on first use
    /// (what a cache of indexes weighs them by).
    pub fn memory_bytes(&self) -> usize {
        self.column_bytes() + ReverseLinks::bytes_when_built(self.events() as usize)
    }

    /// A name of the pool.
    pub fn name(&self, id: u32) -> &str {
        self.names
            .get((id & ((1 << KIND_SHIFT) - 1)) as usize)
            .map_or("", String::as_str)
    }
}

/// A slice's duration as a row keeps it: clamped to `u32`.
fn clamped_dur(start: i64, end: i64) -> u32 {
    (end - start).clamp(0, u32::MAX as i64) as u32
}

/// The first start and last end of slices (their ends as rows keep them).
struct Bounds {
    first: i64,
    last: i64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl Bounds {
    /// Takes in a slice as a row keeps it.
    fn add(&mut self, start: i64, dur: u32) {
        self.cover(start, start + dur as i64);
    }

    /// Takes in `[first, last]`.
    fn cover(&mut self, first: i64, last: i64) {
        self.first = self.first.min(first);
        self.last = self.last.max(last);
    }
}
