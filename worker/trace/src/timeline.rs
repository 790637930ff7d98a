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

use crate::import::store::{sort_by_start, CpuKind, GpuKind, Trace};
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
    /// A label for people (`thread 38211`, `GPU 0 stream 7`).
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

/// A search's answer: matches, per-track densities `(track, counts)`, and
/// the earliest match `(event, start)`.
pub type SearchResult = (u64, Vec<(u32, Vec<u32>)>, Option<(u32, i64)>);

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
}

/// What the analysis hands the index builder.
pub struct Inputs<'a> {
    /// The parsed trace.
    pub trace: &'a Trace,
    /// Per CPU slice: its parent op, or `u32::MAX`.
    pub parent: &'a [u32],
    /// Per track (by id): its CPU slices (module frames aside) in start
    /// order, longer first among equal starts (the op tree's order; taken
    /// by the build).
    pub threads: Vec<Vec<u32>>,
    /// Per GPU slice: its launch (a CPU slice), or `u32::MAX`.
    pub launch: &'a [u32],
    /// Steps: (name, start, end).
    pub steps: Vec<(String, i64, i64)>,
    /// Layers: (index, start, end).
    pub layers: Vec<(i64, i64, i64)>,
    /// Python stacks (trace name ids, outermost first)...
    pub stacks: &'a [Vec<u32>],
    /// ...and the stack above each outermost op and graph launch.
    pub stack_of: &'a HashMap<u32, u32>,
}

/// Interns strings into the index's name pool.
struct Pool {
    /// Per trace name id, its pool id once used, else [`NONE`] (a lookup a
    /// slice: an array, not a hash map; the trace's names are few).
    ids: Vec<u32>,
    names: Vec<String>,
}

impl Pool {
    fn new(t: &Trace) -> Pool {
        Pool {
            ids: vec![NONE; t.names.len()],
            names: Vec::new(),
        }
    }

    fn id(&mut self, t: &Trace, sym: u32) -> u32 {
        let id = &mut self.ids[sym as usize];
        if *id == NONE {
            *id = self.names.len() as u32;
            self.names.push(t.name(sym).to_string());
        }
        *id
    }
}

/// The index's pools while it is built: names, args and Python stacks, each
/// stored once and referred to by id.
struct Names {
    pool: Pool,
    args: Vec<Args>,
    args_ids: HashMap<Args, u32>,
    stacks: Vec<Vec<u32>>,
    /// Analysis stack id -> index stack id.
    stack_ids: HashMap<u32, u32>,
    /// Per distinct shapes and types pair of the trace, its args-pool id
    /// once seen without a Python stack (most op slices: one lookup instead
    /// of three hashes).
    inputs_args: Vec<Option<u32>>,
}

impl Names {
    fn args_id(&mut self, a: Args) -> u32 {
        let next = self.args.len() as u32;
        *self.args_ids.entry(a.clone()).or_insert_with(|| {
            self.args.push(a);
            next
        })
    }

    /// The index's id of the analysis's Python stack `st` (its frames' trace
    /// name ids in `frames`).
    fn stack(&mut self, t: &Trace, frames: &[u32], st: u32) -> u32 {
        if let Some(&id) = self.stack_ids.get(&st) {
            return id;
        }
        let id = self.stacks.len() as u32;
        let ids = frames.iter().map(|&sym| self.pool.id(t, sym)).collect();
        self.stacks.push(ids);
        self.stack_ids.insert(st, id);
        id
    }
}

/// The most rows one track is laid into. A trace can hold any number of
/// slices overlapping at one moment on one stream (a 4 KB upload can hold
/// 400,000 identical kernels at one `ts`); past this many rows the slices
/// that fit in no row are counted on their track ([`TrackInfo::hidden`]),
/// not drawn. Real traces stay far below it: CPU rows are nesting depths
/// (a few hundred with Python frames) and GPU streams rarely overlap.
pub const MAX_ROWS_PER_TRACK: usize = 4096;

/// Lays a track's slices into rows: each depth's slices go to the first of
/// that depth's rows whose last slice ended by their start, else to a new
/// row while the track has fewer than [`MAX_ROWS_PER_TRACK`] rows, else they
/// are hidden; rows are ordered by depth, then creation. `ids` holds the
/// slices in start order, and `slot[id]` each one's depth; on return, `ids`
/// holds the drawn ones row by row (in start order within each) followed by
/// the hidden ones, `slot[id]` each drawn one's position there ([`NONE`] for
/// a hidden one), and the rows' lengths are returned (their sum is the
/// number drawn). In place: the layout of a thread of millions of slices
/// costs no list of lists, only the placing's scratch (a copy of the list,
/// freed on return).
///
/// O(n log n) however the slices overlap: per depth, rows wait in a heap by
/// the end of their last slice until a slice starts at or after it (starts
/// only grow), then in a heap of free rows by creation, whose first is the
/// first row that fits.
fn layout(ids: &mut [u32], slot: &mut [u32], span: impl Fn(usize) -> (i64, i64)) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    /// One depth's rows: busy ones by the end of their last slice, free ones
    /// by creation; the depth of each row by creation.
    #[derive(Default)]
    struct Depth {
        busy: BinaryHeap<Reverse<(i64, u32)>>,
        free: BinaryHeap<Reverse<u32>>,
        rows: Vec<u32>,
    }
    let mut by_depth: Vec<Depth> = Vec::new();
    let mut created = 0u32;
    for &id in ids.iter() {
        let (start, end) = span(id as usize);
        let d = slot[id as usize] as usize;
        if by_depth.len() <= d {
            by_depth.resize_with(d + 1, Depth::default);
        }
        let rows = &mut by_depth[d];
        // The common case, in place: the depth's one row is free again.
        if rows.free.is_empty() && rows.busy.len() == 1 {
            if let Some(mut only) = rows.busy.peek_mut() {
                let Reverse((last_end, r)) = *only;
                if last_end <= start {
                    *only = Reverse((end, r));
                    slot[id as usize] = r;
                    continue;
                }
            }
        }
        while let Some(&Reverse((last_end, r))) = rows.busy.peek() {
            if last_end > start {
                break;
            }
            rows.busy.pop();
            rows.free.push(Reverse(r));
        }
        let row = match rows.free.pop() {
            Some(Reverse(r)) => r,
            None if (created as usize) < MAX_ROWS_PER_TRACK => {
                rows.rows.push(created);
                created += 1;
                created - 1
            }
            None => {
                slot[id as usize] = NONE;
                continue;
            }
        };
        rows.busy.push(Reverse((end, row)));
        slot[id as usize] = row;
    }
    // Creation order -> depth order.
    let mut order = vec![0u32; created as usize];
    for (k, &c) in by_depth.iter().flat_map(|d| &d.rows).enumerate() {
        order[c as usize] = k as u32;
    }
    drop(by_depth);
    let mut lens = vec![0usize; created as usize];
    let mut hidden = 0usize;
    for &id in ids.iter() {
        match slot[id as usize] {
            NONE => hidden += 1,
            c => {
                let r = order[c as usize];
                slot[id as usize] = r;
                lens[r as usize] += 1;
            }
        }
    }
    // Row by row, start order kept within each row: a counting sort (the
    // rows' lengths are known), one pass where a comparison sort took
    // twenty. (Placing each slice at its position by following cycles needs
    // no scratch, but its random swaps cost more; the scratch is freed
    // before the build's largest moment, its last rows.) Hidden slices go
    // last, in start order.
    let mut at = Vec::with_capacity(lens.len());
    let mut sum = 0;
    for &len in &lens {
        at.push(sum);
        sum += len;
    }
    let mut next_hidden = ids.len() - hidden;
    let mut by_row = vec![0u32; ids.len()];
    for &id in ids.iter() {
        let r = match slot[id as usize] {
            NONE => &mut next_hidden,
            r => &mut at[r as usize],
        };
        by_row[*r] = id;
        *r += 1;
    }
    ids.copy_from_slice(&by_row);
    drop(by_row);
    // Each drawn slice's position.
    for (k, &id) in ids[..sum].iter().enumerate() {
        slot[id as usize] = k as u32;
    }
    lens
}

impl TimelineIndex {
    /// Builds the index of a parsed trace. Pure: no I/O.
    pub fn build(inp: Inputs) -> TimelineIndex {
        let mut rows = Collect(Vec::new());
        let mut ix = Self::build_rows(inp, &mut rows).expect("collecting rows does not fail");
        ix.rows = rows.0;
        ix
    }

    /// Builds the index of a parsed trace straight into its stored form:
    /// the bytes [`write`](Self::write) writes of [`build`](Self::build)'s
    /// index, once decompressed, without holding the rows. Each row is
    /// written column by column from the trace as it is laid out (the
    /// analysis job's peak is here: compressed, a row takes a few bytes a
    /// slice instead of 22). The stored form is then two zstd frames, the
    /// pools, tracks and spans first, the rows after, which a zstd decoder
    /// reads as one stream.
    pub fn build_stored(inp: Inputs) -> io::Result<Vec<u8>> {
        let mut z = zstd::stream::write::Encoder::new(Vec::new(), LEVEL)?;
        // The rows are compressed on a second thread as they are laid out
        // (zstd's own worker): the parse's decompression thread is idle by
        // now, and the compressed bytes are the same whatever the timing.
        z.multithread(1)?;
        // 1 MB jobs: zstd's default (four windows) held 13 MB of buffers.
        z.set_parameter(zstd::stream::raw::CParameter::JobSize(1 << 20))?;
        let (head, n) = {
            let mut rows = Stream {
                w: io::BufWriter::with_capacity(1 << 16, &mut z),
                rows: 0,
            };
            let head = Self::build_rows(inp, &mut rows)?;
            rows.w.flush()?;
            (head, rows.rows)
        };
        let mut stored = z.finish()?;
        let mut z = zstd::stream::write::Encoder::new(Vec::new(), LEVEL)?;
        {
            let mut w = io::BufWriter::with_capacity(1 << 16, &mut z);
            head.write_head(&mut w, n)?;
            w.flush()?;
        }
        // The head goes in front of the rows in place: a second copy of
        // the rows would be the build's largest moment.
        let head = z.finish()?;
        stored.reserve_exact(head.len());
        stored.splice(0..0, head);
        Ok(stored)
    }

    /// Lays out the rows, handing each to `sink` in event-id order, and
    /// returns the rest of the index (no rows).
    fn build_rows(mut inp: Inputs, sink: &mut impl RowSink) -> io::Result<TimelineIndex> {
        let threads = std::mem::take(&mut inp.threads);
        let inp = &inp;
        let mut bounds = Bounds::default();
        let t = inp.trace;
        let cpu = &t.cpu;
        let gpu = &t.gpu;
        let mut names = Names {
            pool: Pool::new(t),
            args: Vec::new(),
            args_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            inputs_args: vec![None; cpu.distinct_inputs()],
        };

        // Slices per track (CPU threads, then GPU streams), in start order:
        // start, then longer first, then row (each list is in row order).
        // Threads come in the op tree's order, which differs only among
        // slices of equal start and duration (annotations, ops, calls):
        // those runs are put back in row order.
        let mut cpu_tracks: Vec<(u32, Vec<u32>)> = Vec::new();
        for (tr, mut slices) in threads.into_iter().enumerate() {
            if slices.is_empty() {
                continue;
            }
            let key = |i: u32| (cpu.ts.get(i as usize), cpu.dur.get(i as usize));
            let mut lo = 0;
            while lo < slices.len() {
                let k = key(slices[lo]);
                let mut hi = lo + 1;
                while hi < slices.len() && key(slices[hi]) == k {
                    hi += 1;
                }
                slices[lo..hi].sort_unstable();
                lo = hi;
            }
            cpu_tracks.push((tr as u32, slices));
        }
        let mut gpu_tracks: Vec<((i64, i64, u32), Vec<u32>)> = Vec::new();
        let mut gpu_track_of: HashMap<(i64, i64, u32), usize> = HashMap::new();
        let mut gpu_order: Vec<u32> = (0..gpu.len() as u32)
            .filter(|&g| gpu.kind[g as usize].is_gpu_op())
            .collect();
        // Start, then longer first, then row (the rows are in row order).
        sort_by_start(&mut gpu_order, &gpu.ts, &gpu.dur, |_, _| {
            std::cmp::Ordering::Equal
        });
        for g in gpu_order {
            let key = (
                gpu.device.get(g as usize),
                gpu.stream.get(g as usize),
                gpu.track.get(g as usize),
            );
            let k = *gpu_track_of.entry(key).or_insert_with(|| {
                gpu_tracks.push((key, Vec::new()));
                gpu_tracks.len() - 1
            });
            gpu_tracks[k].1.push(g);
        }
        cpu_tracks.sort_by_key(|(tr, _)| {
            let track = &t.tracks[*tr as usize];
            (track.pid, track.tid)
        });
        gpu_tracks.sort_by_key(|(key, _)| (key.0, key.1, key.2));

        // Rows, track by track, row by row (the event ids): CPU slices by
        // depth, each depth split where slices overlap; GPU ops greedily
        // into the first row they fit. Each row is handed to the sink as a
        // reader over the trace, and each track's slice list is freed once
        // its rows are handed over.
        let mut tracks: Vec<TrackInfo> = Vec::new();
        let mut n_rows = 0u32;
        let mut next_event = 0u32;
        // Per CPU slice, one number that changes meaning as its thread is
        // laid out: its depth, then its row, then its event id (what links
        // to it read). One array for the three: this is the job's peak.
        let mut slot = vec![0u32; cpu.len()];
        for (tr, mut slices) in cpu_tracks {
            let track = &t.tracks[tr as usize];
            let (pid, tid) = (t.track_id_text(track.pid), t.track_id_text(track.tid));
            // Depths: a parent is on its children's thread and comes before
            // them in start order.
            for &i in slices.iter() {
                let p = inp.parent[i as usize];
                if p != u32::MAX {
                    slot[i as usize] = slot[p as usize].saturating_add(1);
                }
            }
            let lens = layout(&mut slices, &mut slot, |i| {
                (cpu.ts.get(i), cpu.ts.get(i) + cpu.dur.get(i))
            });
            let drawn = lens.iter().sum::<usize>();
            tracks.push(TrackInfo {
                gpu: false,
                label: format!("thread {tid} (pid {pid})"),
                pid,
                tid,
                device: None,
                stream: None,
                first_row: n_rows,
                rows: lens.len() as u32,
                events: drawn as u64,
                hidden: (slices.len() - drawn) as u64,
            });
            n_rows += lens.len() as u32;
            let track = tracks.len() as u32 - 1;
            // The track's event ids first: a parent may lie in a later row
            // than a child (equal start and duration), so every link is
            // known when a row is handed over.
            for &i in &slices[..drawn] {
                slot[i as usize] += next_event;
            }
            let mut rows = Rows::<Cpu>::new(inp, &slot, &mut names, &mut next_event, &mut bounds);
            rows.hand_over(sink, track, &slices, lens)?;
        }
        let cpu_event = slot;
        // Per GPU op, its position while its stream is laid out (depth 0
        // first).
        let mut gpu_slot = vec![0u32; gpu.len()];
        for ((device, stream, tr), mut ops) in gpu_tracks {
            let track = &t.tracks[tr as usize];
            let lens = layout(&mut ops, &mut gpu_slot, |g| {
                (gpu.ts.get(g), gpu.ts.get(g) + gpu.dur.get(g))
            });
            let drawn = lens.iter().sum::<usize>();
            tracks.push(TrackInfo {
                gpu: true,
                label: format!("GPU {device} stream {stream}"),
                pid: t.track_id_text(track.pid),
                tid: t.track_id_text(track.tid),
                device: Some(device),
                stream: Some(stream),
                first_row: n_rows,
                rows: lens.len() as u32,
                events: drawn as u64,
                hidden: (ops.len() - drawn) as u64,
            });
            n_rows += lens.len() as u32;
            let track = tracks.len() as u32 - 1;
            let mut rows =
                Rows::<Gpu>::new(inp, &cpu_event, &mut names, &mut next_event, &mut bounds);
            rows.hand_over(sink, track, &ops, lens)?;
        }
        let Names {
            pool, args, stacks, ..
        } = names;
        let (mut lo, mut hi) = (bounds.first, bounds.last);
        if lo > hi {
            (lo, hi) = (0, 0);
        }
        // The end is exclusive: an event of zero duration at the very end
        // is still inside [start_ns, end_ns).
        let hi = hi + 1;
        Ok(TimelineIndex {
            start_ns: lo,
            end_ns: hi,
            tracks,
            steps: inp
                .steps
                .iter()
                .map(|(name, s, e)| Span {
                    name: name.clone(),
                    index: 0,
                    start_ns: *s,
                    end_ns: *e,
                })
                .collect(),
            layers: inp
                .layers
                .iter()
                .map(|&(index, s, e)| Span {
                    name: index.to_string(),
                    index,
                    start_ns: s,
                    end_ns: e,
                })
                .collect(),
            names: pool.names,
            args,
            stacks,
            rows: Vec::new(),
        })
    }

    /// The Python stack above an event (outermost frame first): the stack
    /// recorded on the nearest slice up its chain (a GPU op's launch, then
    /// the ops around it) that has one.
    pub fn python_of(&self, event: u32) -> Vec<&str> {
        let mut e = event;
        let mut guard = 0;
        while e != NONE && guard < 1000 {
            let Some(r) = self.locate(e) else { break };
            let (_, _, _, _, link, args) = self.event(r);
            if let Some(Args::Inputs { python, .. }) = args {
                if *python != NONE {
                    return self.stacks[*python as usize]
                        .iter()
                        .map(|&n| self.name(n))
                        .collect();
                }
            }
            e = link;
            guard += 1;
        }
        Vec::new()
    }

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

    /// A name of the pool.
    pub fn name(&self, id: u32) -> &str {
        self.names
            .get((id & ((1 << KIND_SHIFT) - 1)) as usize)
            .map_or("", String::as_str)
    }

    /// Where an event lies, if the id is valid.
    pub fn locate(&self, event: u32) -> Option<EventRef> {
        let k = self.rows.partition_point(|r| r.first_event <= event);
        let global_row = k.checked_sub(1)?;
        let row = &self.rows[global_row];
        let index = (event - row.first_event) as usize;
        (index < row.len()).then(|| EventRef {
            track: row.track,
            row: global_row as u32 - self.tracks[row.track as usize].first_row,
            index,
            global_row,
        })
    }

    /// An event's columns: (kind, name, start, duration, link, args).
    pub fn event(&self, r: EventRef) -> (SliceKind, &str, i64, i64, u32, Option<&Args>) {
        let row = &self.rows[r.global_row];
        let i = r.index;
        let packed = row.name[i];
        (
            slice_kind((packed >> KIND_SHIFT) as u8),
            self.name(packed),
            row.start[i],
            row.dur[i] as i64,
            row.link[i],
            Some(row.args_of(i))
                .filter(|&a| a != NONE)
                .map(|a| &self.args[a as usize]),
        )
    }

    /// The events linked to `event` (its children on the CPU side, or the
    /// GPU ops a launch produced), in id order.
    pub fn linked_to(&self, event: u32) -> Vec<u32> {
        let mut out = Vec::new();
        for row in &self.rows {
            for (k, &l) in row.link.iter().enumerate() {
                if l == event {
                    out.push(row.first_event + k as u32);
                }
            }
        }
        out
    }

    /// What is in each pixel bucket of `[start, end)` split in `px`, per row
    /// of a track: single events, or merged blocks with their count, busy
    /// time and longest event. Every event of the track that intersects the
    /// window is in exactly one slice.
    pub fn window(&self, track: u32, start: i64, end: i64, px: u32) -> Vec<WindowSlice> {
        let mut out = Vec::new();
        let Some(info) = self.tracks.get(track as usize) else {
            return out;
        };
        // Differences in i128: `end - start` overflows i64 for a window as
        // wide as the clock (found by API fuzzing: -2^62 to 2^62), and
        // times go to f64 only as differences (epoch-ns clocks pass 2^53).
        let span = |a: i64, b: i64| (b as i128 - a as i128) as f64;
        let width = (span(start, end) / px.max(1) as f64).max(1.0);
        let bucket = |ts: i64| -> i64 { (span(start, ts.max(start)) / width).floor() as i64 };
        for r in 0..info.rows {
            let row = &self.rows[(info.first_row + r) as usize];
            let n = row.len();
            // The first event that ends after the window starts (rows do
            // not overlap, so ends are sorted too).
            let mut i = row.start.partition_point(|&s| s < start);
            while i > 0 && row.end(i - 1) > start {
                i -= 1;
            }
            while i < n && row.start[i] < end {
                let b = bucket(row.start[i]);
                let b_end = start.saturating_add(((b + 1) as f64 * width).ceil() as i64);
                // Every event that starts in this bucket.
                let k = i + row.start[i..].partition_point(|&s| s < b_end.min(end));
                let k = k.max(i + 1);
                if k - i == 1 {
                    out.push(WindowSlice {
                        start_ns: row.start[i],
                        dur_ns: row.dur[i] as i64,
                        row: r,
                        name: row.name[i] & ((1 << KIND_SHIFT) - 1),
                        count: 1,
                        busy_ns: row.dur[i] as i64,
                        event: row.first_event + i as u32,
                    });
                } else {
                    let last_end = (i..k).map(|j| row.end(j)).max().unwrap_or(row.start[i]);
                    let longest = row.longest(i, k);
                    out.push(WindowSlice {
                        start_ns: row.start[i],
                        dur_ns: last_end - row.start[i],
                        row: r,
                        name: row.name[longest] & ((1 << KIND_SHIFT) - 1),
                        count: (k - i) as u32,
                        busy_ns: row.sum(i, k),
                        event: row.first_event + longest as u32,
                    });
                }
                i = k;
            }
        }
        out
    }

    /// Events whose name contains `needle` (case-insensitive): their count,
    /// per track a density over `px` buckets of the whole trace, and the
    /// earliest one.
    pub fn search(&self, needle: &str, px: u32) -> SearchResult {
        let needle = needle.to_lowercase();
        let hit: Vec<bool> = self
            .names
            .iter()
            .map(|n| !needle.is_empty() && n.to_lowercase().contains(&needle))
            .collect();
        let mut total = 0u64;
        let mut first: Option<(u32, i64)> = None;
        let mut tracks = Vec::new();
        let span = (self.end_ns - self.start_ns).max(1) as f64;
        let px = px.max(1);
        for (tid, info) in self.tracks.iter().enumerate() {
            let mut density = vec![0u32; px as usize];
            let mut any = false;
            for r in info.first_row..info.first_row + info.rows {
                let row = &self.rows[r as usize];
                for (k, &packed) in row.name.iter().enumerate() {
                    if hit[(packed & ((1 << KIND_SHIFT) - 1)) as usize] {
                        any = true;
                        total += 1;
                        let b =
                            (((row.start[k] - self.start_ns) as f64 / span) * px as f64) as usize;
                        density[b.min(px as usize - 1)] += 1;
                        if first.is_none_or(|(_, s)| row.start[k] < s) {
                            first = Some((row.first_event + k as u32, row.start[k]));
                        }
                    }
                }
            }
            if any {
                tracks.push((tid as u32, density));
            }
        }
        (total, tracks, first)
    }

    // ------------------------------------------------------------ storage

    /// Writes the index (zstd-compressed binary columns).
    pub fn write<W: Write>(&self, out: W) -> io::Result<()> {
        let mut z = zstd::stream::write::Encoder::new(out, LEVEL)?;
        // Values are written one by one: a buffer in front of the encoder
        // makes each a copy rather than a call into zstd.
        let mut buffered = io::BufWriter::with_capacity(1 << 16, &mut z);
        self.write_head(&mut buffered, self.rows.len() as u32)?;
        for r in &self.rows {
            write_row(&mut buffered, r.track, r.first_event, &mut &*r)?;
        }
        buffered.flush()?;
        drop(buffered);
        z.finish()?.flush()
    }

    /// Everything but the rows, then the number of rows to follow.
    fn write_head(&self, w: &mut impl Write, rows: u32) -> io::Result<()> {
        put_u32(w, FORMAT)?;
        put_i64(w, self.start_ns)?;
        put_i64(w, self.end_ns)?;
        put_u32(w, self.names.len() as u32)?;
        for n in &self.names {
            put_str(w, n)?;
        }
        put_u32(w, self.args.len() as u32)?;
        for a in &self.args {
            match a {
                Args::Inputs {
                    shapes,
                    dtypes,
                    python,
                } => {
                    w.write_all(&[0])?;
                    put_u32(w, *shapes)?;
                    put_u32(w, *dtypes)?;
                    put_u32(w, *python)?;
                }
                Args::Launch { grid, block, bytes } => {
                    w.write_all(&[1])?;
                    for v in grid.iter().chain(block) {
                        put_u32(w, *v)?;
                    }
                    put_i64(w, *bytes as i64)?;
                }
            }
        }
        put_u32(w, self.stacks.len() as u32)?;
        for st in &self.stacks {
            put_u32(w, st.len() as u32)?;
            for &n in st {
                put_u32(w, n)?;
            }
        }
        put_u32(w, self.tracks.len() as u32)?;
        for t in &self.tracks {
            w.write_all(&[t.gpu as u8])?;
            put_str(w, &t.label)?;
            put_str(w, &t.pid)?;
            put_str(w, &t.tid)?;
            put_i64(w, t.device.unwrap_or(i64::MIN))?;
            put_i64(w, t.stream.unwrap_or(i64::MIN))?;
            put_u32(w, t.first_row)?;
            put_u32(w, t.rows)?;
            put_i64(w, t.events as i64)?;
            put_i64(w, t.hidden as i64)?;
        }
        for spans in [&self.steps, &self.layers] {
            put_u32(w, spans.len() as u32)?;
            for s in spans {
                put_str(w, &s.name)?;
                put_i64(w, s.index)?;
                put_i64(w, s.start_ns)?;
                put_i64(w, s.end_ns)?;
            }
        }
        put_u32(w, rows)
    }

    /// Reads an index written by [`write`](Self::write).
    pub fn read<R: Read>(input: R) -> io::Result<TimelineIndex> {
        // Values are read one by one: a buffer behind the decoder makes each
        // a copy rather than a call into zstd.
        let mut z = io::BufReader::with_capacity(1 << 16, zstd::stream::read::Decoder::new(input)?);
        let r = &mut z;
        let format = get_u32(r)?;
        if format != FORMAT && format != 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unknown timeline index format",
            ));
        }
        let start_ns = get_i64(r)?;
        let end_ns = get_i64(r)?;
        let n = get_len(r)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(get_str(r)?);
        }
        let n = get_len(r)?;
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let mut tag = [0u8];
            r.read_exact(&mut tag)?;
            args.push(if tag[0] == 0 {
                Args::Inputs {
                    shapes: get_u32(r)?,
                    dtypes: get_u32(r)?,
                    python: get_u32(r)?,
                }
            } else {
                let mut v = [0u32; 6];
                for x in v.iter_mut() {
                    *x = get_u32(r)?;
                }
                Args::Launch {
                    grid: [v[0], v[1], v[2]],
                    block: [v[3], v[4], v[5]],
                    bytes: get_i64(r)? as u64,
                }
            });
        }
        let n = get_len(r)?;
        let mut stacks = Vec::with_capacity(n);
        for _ in 0..n {
            let k = get_len(r)?;
            let mut st = Vec::with_capacity(k);
            for _ in 0..k {
                st.push(get_u32(r)?);
            }
            stacks.push(st);
        }
        let n = get_len(r)?;
        let mut tracks = Vec::with_capacity(n);
        for _ in 0..n {
            let mut gpu = [0u8];
            r.read_exact(&mut gpu)?;
            let label = get_str(r)?;
            let pid = get_str(r)?;
            let tid = get_str(r)?;
            let device = Some(get_i64(r)?).filter(|&d| d != i64::MIN);
            let stream = Some(get_i64(r)?).filter(|&d| d != i64::MIN);
            tracks.push(TrackInfo {
                gpu: gpu[0] != 0,
                label,
                pid,
                tid,
                device,
                stream,
                first_row: get_u32(r)?,
                rows: get_u32(r)?,
                events: get_i64(r)? as u64,
                // Format 2 had no row cap: nothing was hidden.
                hidden: if format >= 3 { get_i64(r)? as u64 } else { 0 },
            });
        }
        let mut spans = [Vec::new(), Vec::new()];
        for s in spans.iter_mut() {
            let n = get_len(r)?;
            for _ in 0..n {
                s.push(Span {
                    name: get_str(r)?,
                    index: get_i64(r)?,
                    start_ns: get_i64(r)?,
                    end_ns: get_i64(r)?,
                });
            }
        }
        let [steps, layers] = spans;
        let n = get_len(r)?;
        let mut rows = Vec::with_capacity(n);
        for _ in 0..n {
            let mut row = Row {
                track: get_u32(r)?,
                first_event: get_u32(r)?,
                ..Default::default()
            };
            let len = get_len(r)?;
            let mut prev = 0i64;
            row.start.reserve_exact(len);
            for _ in 0..len {
                prev += get_i64(r)?;
                row.start.push(prev);
            }
            for col in [&mut row.dur, &mut row.name, &mut row.link] {
                col.reserve_exact(len);
                for _ in 0..len {
                    col.push(get_u32(r)?);
                }
            }
            row.args = vec![NO_ARGS; len];
            let mut row_args: HashMap<u32, u16> = HashMap::new();
            for i in 0..len {
                let a = get_u32(r)?;
                if a != NONE && a as usize >= args.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "damaged timeline index",
                    ));
                }
                row.set_args(i, a, &mut row_args);
            }
            row.summarize();
            rows.push(row);
        }
        Ok(TimelineIndex {
            start_ns,
            end_ns,
            tracks,
            steps,
            layers,
            names,
            args,
            stacks,
            rows,
        })
    }
}

/// A row's slices as the index stores them, read one column at a time:
/// each column in slice order, names before args, so that laid-out slices
/// intern their names and args in the same order whether the row is
/// collected or written.
trait Slices {
    fn len(&self) -> usize;
    /// Start and end, ns.
    fn span(&self, k: usize) -> (i64, i64);
    /// Name-pool id and kind, packed (interning the name).
    fn name(&mut self, k: usize) -> u32;
    /// The linked event, or [`NONE`].
    fn link(&self, k: usize) -> u32;
    /// Args-pool id, or [`NONE`] (interning the args).
    fn args(&mut self, k: usize) -> u32;
}

/// A built row, as it is written.
impl Slices for &Row {
    fn len(&self) -> usize {
        Row::len(self)
    }
    fn span(&self, k: usize) -> (i64, i64) {
        (self.start[k], self.end(k))
    }
    fn name(&mut self, k: usize) -> u32 {
        self.name[k]
    }
    fn link(&self, k: usize) -> u32 {
        self.link[k]
    }
    fn args(&mut self, k: usize) -> u32 {
        self.args_of(k)
    }
}

/// The slices of one laid-out row: of a CPU thread ([`Cpu`]) or of a GPU
/// stream ([`Gpu`]), read from the trace.
struct Laid<'a, 'i, Side> {
    inp: &'a Inputs<'i>,
    /// The row's slices (CPU slices or GPU ops, by their table's index).
    row: &'a [u32],
    /// Per CPU slice, its event id.
    cpu_event: &'a [u32],
    names: &'a mut Names,
    side: std::marker::PhantomData<Side>,
}

/// A row of a CPU thread.
struct Cpu;
/// A row of a GPU stream.
struct Gpu;

/// A track's rows on their way to the sink: what each row's reader needs,
/// and where the event ids and the index's bounds stand.
struct Rows<'a, 'i, Side> {
    inp: &'a Inputs<'i>,
    cpu_event: &'a [u32],
    names: &'a mut Names,
    next_event: &'a mut u32,
    bounds: &'a mut Bounds,
    side: std::marker::PhantomData<Side>,
}

impl<'a, 'i, Side> Rows<'a, 'i, Side>
where
    for<'r> Laid<'r, 'i, Side>: Slices,
{
    fn new(
        inp: &'a Inputs<'i>,
        cpu_event: &'a [u32],
        names: &'a mut Names,
        next_event: &'a mut u32,
        bounds: &'a mut Bounds,
    ) -> Self {
        Rows {
            inp,
            cpu_event,
            names,
            next_event,
            bounds,
            side: std::marker::PhantomData,
        }
    }

    /// Hands a laid-out track's rows to `sink`: `ids` row by row, the
    /// rows' lengths in `lens` ([`layout`]'s answer).
    fn hand_over(
        &mut self,
        sink: &mut impl RowSink,
        track: u32,
        ids: &[u32],
        lens: Vec<usize>,
    ) -> io::Result<()> {
        let mut rest = ids;
        for len in lens {
            let (row, after) = rest.split_at(len);
            rest = after;
            let mut row = Laid {
                inp: self.inp,
                row,
                cpu_event: self.cpu_event,
                names: &mut *self.names,
                side: std::marker::PhantomData::<Side>,
            };
            let (first, last) = sink.row(track, *self.next_event, &mut row)?;
            self.bounds.cover(first, last);
            *self.next_event += len as u32;
        }
        Ok(())
    }
}

impl<Side> Laid<'_, '_, Side> {
    /// The k-th slice's index in its table.
    fn slice(&self, k: usize) -> usize {
        self.row[k] as usize
    }
}

impl Slices for Laid<'_, '_, Cpu> {
    fn len(&self) -> usize {
        self.row.len()
    }
    fn span(&self, k: usize) -> (i64, i64) {
        let (cpu, i) = (&self.inp.trace.cpu, self.slice(k));
        (cpu.ts.get(i), cpu.ts.get(i) + cpu.dur.get(i))
    }
    fn name(&mut self, k: usize) -> u32 {
        let (t, i) = (self.inp.trace, self.slice(k));
        let kind = match t.cpu.kind[i] {
            CpuKind::Annotation => SliceKind::Annotation,
            CpuKind::Op => SliceKind::Op,
            _ => SliceKind::Runtime,
        };
        self.names.pool.id(t, t.cpu.name[i]) | (kind as u32) << KIND_SHIFT
    }
    fn link(&self, k: usize) -> u32 {
        match self.inp.parent[self.slice(k)] {
            u32::MAX => NONE,
            p => self.cpu_event[p as usize],
        }
    }
    fn args(&mut self, k: usize) -> u32 {
        let (t, i, inp) = (self.inp.trace, self.slice(k), self.inp);
        let names = &mut *self.names;
        let python = match inp.stack_of.get(&(i as u32)) {
            Some(&st) if st != 0 => names.stack(t, &inp.stacks[st as usize], st),
            _ => NONE,
        };
        let pair = t.cpu.inputs_id(i) as usize;
        if python == NONE {
            if let Some(a) = names.inputs_args[pair] {
                return a;
            }
        }
        let (shapes, dtypes) = (t.cpu.shapes(i), t.cpu.dtypes(i));
        let a = if shapes == 0 && dtypes == 0 && python == NONE {
            NONE
        } else {
            let (shapes, dtypes) = (names.pool.id(t, shapes), names.pool.id(t, dtypes));
            names.args_id(Args::Inputs {
                shapes,
                dtypes,
                python,
            })
        };
        if python == NONE {
            names.inputs_args[pair] = Some(a);
        }
        a
    }
}

impl Slices for Laid<'_, '_, Gpu> {
    fn len(&self) -> usize {
        self.row.len()
    }
    fn span(&self, k: usize) -> (i64, i64) {
        let (gpu, g) = (&self.inp.trace.gpu, self.slice(k));
        (gpu.ts.get(g), gpu.ts.get(g) + gpu.dur.get(g))
    }
    fn name(&mut self, k: usize) -> u32 {
        let (t, g) = (self.inp.trace, self.slice(k));
        let kind = match t.gpu.kind[g] {
            GpuKind::Memcpy => SliceKind::Memcpy,
            GpuKind::Memset => SliceKind::Memset,
            _ => SliceKind::Kernel,
        };
        self.names.pool.id(t, t.gpu.name[g]) | (kind as u32) << KIND_SHIFT
    }
    fn link(&self, k: usize) -> u32 {
        match self.inp.launch[self.slice(k)] {
            u32::MAX => NONE,
            r => self.cpu_event[r as usize],
        }
    }
    fn args(&mut self, k: usize) -> u32 {
        let (gpu, g) = (&self.inp.trace.gpu, self.slice(k));
        let (grid, block, bytes) = (gpu.grid(g), gpu.block(g), gpu.bytes.get(g) as u64);
        if grid == [0; 3] && block == [0; 3] && bytes == 0 {
            return NONE;
        }
        self.names.args_id(Args::Launch { grid, block, bytes })
    }
}

/// Where laid-out rows go.
trait RowSink {
    /// Takes the next row (its slices read column by column, once);
    /// returns its first start and last end, as the row keeps them.
    fn row(&mut self, track: u32, first_event: u32, s: &mut impl Slices) -> io::Result<(i64, i64)>;
}

/// Rows collected: the in-memory index.
struct Collect(Vec<Row>);

impl RowSink for Collect {
    fn row(&mut self, track: u32, first_event: u32, s: &mut impl Slices) -> io::Result<(i64, i64)> {
        let n = s.len();
        let mut row = Row::with_capacity(track, first_event, n);
        let mut bounds = Bounds::default();
        for k in 0..n {
            let (start, end) = s.span(k);
            let dur = clamped_dur(start, end);
            row.start.push(start);
            row.dur.push(dur);
            bounds.add(start, dur);
        }
        for k in 0..n {
            row.name.push(s.name(k));
        }
        for k in 0..n {
            row.link.push(s.link(k));
        }
        row.args.resize(n, NO_ARGS);
        let mut row_args: HashMap<u32, u16> = HashMap::new();
        for k in 0..n {
            let a = s.args(k);
            row.set_args(k, a, &mut row_args);
        }
        row.summarize();
        self.0.push(row);
        Ok((bounds.first, bounds.last))
    }
}

/// Rows written as they come: the stored index.
struct Stream<W: Write> {
    w: W,
    rows: u32,
}

impl<W: Write> RowSink for Stream<W> {
    fn row(&mut self, track: u32, first_event: u32, s: &mut impl Slices) -> io::Result<(i64, i64)> {
        self.rows += 1;
        write_row(&mut self.w, track, first_event, s)
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

/// One row as stored; returns its first start and last end.
fn write_row(
    w: &mut impl Write,
    track: u32,
    first_event: u32,
    s: &mut impl Slices,
) -> io::Result<(i64, i64)> {
    let n = s.len();
    put_u32(w, track)?;
    put_u32(w, first_event)?;
    put_u32(w, n as u32)?;
    // Starts as deltas: small numbers compress well.
    let mut prev = 0i64;
    for k in 0..n {
        let start = s.span(k).0;
        put_i64(w, start - prev)?;
        prev = start;
    }
    let mut bounds = Bounds::default();
    for k in 0..n {
        let (start, end) = s.span(k);
        let dur = clamped_dur(start, end);
        put_u32(w, dur)?;
        bounds.add(start, dur);
    }
    for k in 0..n {
        put_u32(w, s.name(k))?;
    }
    for k in 0..n {
        put_u32(w, s.link(k))?;
    }
    for k in 0..n {
        put_u32(w, s.args(k))?;
    }
    Ok((bounds.first, bounds.last))
}

fn put_u32<W: Write>(w: &mut W, v: u32) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}
fn put_i64<W: Write>(w: &mut W, v: i64) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}
fn put_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    put_u32(w, s.len() as u32)?;
    w.write_all(s.as_bytes())
}
fn get_u32<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}
fn get_i64<R: Read>(r: &mut R) -> io::Result<i64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(i64::from_le_bytes(b))
}
/// A count, bounded so a damaged index cannot ask for absurd allocations.
fn get_len<R: Read>(r: &mut R) -> io::Result<usize> {
    let n = get_u32(r)? as usize;
    if n > 1 << 28 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "damaged timeline index",
        ));
    }
    Ok(n)
}
fn get_str<R: Read>(r: &mut R) -> io::Result<String> {
    let n = get_len(r)?;
    let mut b = vec![0u8; n];
    r.read_exact(&mut b)?;
    String::from_utf8(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "damaged timeline index"))
}

/// An anchor's name, and where it lies in run a and in run b, (start, end) ns.
pub type Alignment = (String, (i64, i64), (i64, i64));

/// Where two runs line up on the timeline: an anchor (a step, or a layer of
/// the median step) in each index, as (start, end) ns, or why not.
pub fn align(
    a: &TimelineIndex,
    b: &TimelineIndex,
    anchor: Option<&str>,
) -> Result<Alignment, String> {
    // The step whose duration is the median of the run's steps.
    fn median_step(ix: &TimelineIndex) -> Option<usize> {
        kinetoscope_types::stats::median_index(ix.steps.len(), |k| {
            ix.steps[k].end_ns - ix.steps[k].start_ns
        })
    }
    fn span(ix: &TimelineIndex, what: &str, n: i64) -> Result<(i64, i64), String> {
        if ix.steps.is_empty() {
            return Err("a run has no steps to align on".into());
        }
        match what {
            "step" => {
                let k = usize::try_from(n)
                    .ok()
                    .filter(|&k| k < ix.steps.len())
                    .ok_or_else(|| {
                        format!(
                            "no step {n}: a run has {} steps (0 to {})",
                            ix.steps.len(),
                            ix.steps.len() - 1
                        )
                    })?;
                Ok((ix.steps[k].start_ns, ix.steps[k].end_ns))
            }
            _ => {
                let m = median_step(ix).ok_or("a run has no steps")?;
                // Layers are device-side: the first layer L that starts
                // after the median step does.
                let s = ix.steps[m].start_ns;
                ix.layers
                    .iter()
                    .filter(|l| l.start_ns >= s)
                    .find(|l| l.index == n)
                    .map(|l| (l.start_ns, l.end_ns))
                    .ok_or_else(|| format!("no layer {n} in the median step"))
            }
        }
    }
    let parsed = match anchor.filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => {
            let (what, n) = text
                .split_once(':')
                .ok_or_else(|| format!("anchor must be step:N or layer:L, not {text:?}"))?;
            if !matches!(what, "step" | "layer") {
                return Err(format!("anchor must be step:N or layer:L, not {text:?}"));
            }
            let n: i64 = n
                .parse()
                .map_err(|_| format!("anchor must be step:N or layer:L, not {text:?}"))?;
            Some((what, n))
        }
    };
    match parsed {
        None => {
            let (ma, mb) = (
                median_step(a).ok_or("run a has no steps to align on")?,
                median_step(b).ok_or("run b has no steps to align on")?,
            );
            Ok((
                "median step".into(),
                (a.steps[ma].start_ns, a.steps[ma].end_ns),
                (b.steps[mb].start_ns, b.steps[mb].end_ns),
            ))
        }
        Some((what, n)) => Ok((format!("{what}:{n}"), span(a, what, n)?, span(b, what, n)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-fit layout as it was written before the heaps: each
    /// depth's slices to the first of that depth's rows (by creation) whose
    /// last slice ended by their start. Quadratic, and the reference.
    fn first_fit(spans: &[(i64, i64)], depth: &[u32]) -> Vec<u32> {
        let mut by_depth: Vec<Vec<(u32, i64)>> = Vec::new();
        let mut created = 0u32;
        let mut row_of = vec![0u32; spans.len()];
        for (i, &(start, end)) in spans.iter().enumerate() {
            let d = depth[i] as usize;
            if by_depth.len() <= d {
                by_depth.resize_with(d + 1, Vec::new);
            }
            let rows = &mut by_depth[d];
            row_of[i] = match rows.iter_mut().find(|(_, last)| *last <= start) {
                Some(r) => {
                    r.1 = end;
                    r.0
                }
                None => {
                    rows.push((created, end));
                    created += 1;
                    created - 1
                }
            };
        }
        // Creation order -> depth order, as `layout` numbers rows.
        let mut order = vec![0u32; created as usize];
        for (k, &(c, _)) in by_depth.iter().flatten().enumerate() {
            order[c as usize] = k as u32;
        }
        row_of.iter().map(|&c| order[c as usize]).collect()
    }

    #[test]
    fn the_heap_layout_places_every_slice_where_first_fit_did() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for round in 0..300 {
            let n = 1 + next(400) as usize;
            let depths = 1 + next(4) as u32;
            let mut spans: Vec<(i64, i64)> = (0..n)
                .map(|_| {
                    let start = next(if round % 3 == 0 { 5 } else { 2_000 }) as i64;
                    (start, start + next(60) as i64)
                })
                .collect();
            spans.sort_by_key(|s| s.0);
            let depth: Vec<u32> = (0..n).map(|_| next(depths as u64) as u32).collect();
            let want = first_fit(&spans, &depth);
            let mut ids: Vec<u32> = (0..n as u32).collect();
            let mut slot = depth.clone();
            let lens = layout(&mut ids, &mut slot, |i| spans[i]);
            assert_eq!(
                lens.iter().sum::<usize>(),
                n,
                "round {round}: nothing hidden"
            );
            // Row of each slice from the layout's row-by-row order.
            let mut got = vec![0u32; n];
            let mut k = 0;
            for (r, &len) in lens.iter().enumerate() {
                for &id in &ids[k..k + len] {
                    got[id as usize] = r as u32;
                }
                k += len;
            }
            assert_eq!(got, want, "round {round}");
            for (k, &id) in ids.iter().enumerate() {
                assert_eq!(slot[id as usize], k as u32);
            }
        }
    }
}
