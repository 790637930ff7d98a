//! The format-neutral half of import: a [`TraceBuilder`] takes decoded
//! events (a category, a name, times, ids and the few arguments the
//! analysis reads) and stores them in the columnar [`Trace`], applying
//! Kineto's rules on the way: which categories are CPU ops, runtime calls,
//! GPU ops, Python frames or launch flows; which flows say nothing the
//! slices do not; a GPU op's device and stream; the memory peaks and their
//! device names; the canonical text of input shapes.
//!
//! A reader of a file format (the JSON parser in [`super::parse`]; a
//! Perfetto protobuf reader would be another) decodes its bytes and calls
//! the builder in the order the events come; the builder knows nothing of
//! the format.

use super::parse::InString;
use super::store::*;
use hashbrown::HashMap;

/// How a `cat` value is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatClass {
    /// A CPU-side slice of this kind.
    Cpu(CpuKind),
    /// A GPU op of this kind.
    Gpu(GpuKind),
    /// A Python frame (`with_stack`).
    Python,
    /// A flow from a launch to its GPU op.
    LaunchFlow,
    /// Known categories the analysis does not need (`Trace`, `fwdbwd`, ...).
    Ignored,
    /// Known, kept in the "other" table (`cuda_sync`, `cuda_profiler_range`).
    KeptKnown,
    /// Not known to this analyzer: kept in the "other" table and reported.
    Unknown,
}

impl CatClass {
    /// Whether a slice of this class is stored (and so needs its track).
    pub fn keeps_slices(self) -> bool {
        !matches!(self, CatClass::LaunchFlow | CatClass::Ignored)
    }
}

/// Kineto's categories, across torch versions (`FORMAT.md`).
fn classify_cat(cat: &str) -> CatClass {
    match cat {
        "cpu_op" | "Operator" => CatClass::Cpu(CpuKind::Op),
        "user_annotation" => CatClass::Cpu(CpuKind::Annotation),
        "cuda_runtime" | "Runtime" => CatClass::Cpu(CpuKind::Runtime),
        "cuda_driver" => CatClass::Cpu(CpuKind::Driver),
        "kernel" | "Kernel" => CatClass::Gpu(GpuKind::Kernel),
        "gpu_memcpy" | "Memcpy" => CatClass::Gpu(GpuKind::Memcpy),
        "gpu_memset" | "Memset" => CatClass::Gpu(GpuKind::Memset),
        "gpu_user_annotation" => CatClass::Gpu(GpuKind::Annotation),
        "python_function" => CatClass::Python,
        "ac2g" | "async_cpu_to_gpu" | "async" => CatClass::LaunchFlow,
        "overhead" | "Overhead" => CatClass::Cpu(CpuKind::Overhead),
        "" | "Trace" | "fwdbwd" | "cpu_instant_event" | "python_function_flow" => CatClass::Ignored,
        "cuda_sync" | "cuda_profiler_range" => CatClass::KeptKnown,
        _ => CatClass::Unknown,
    }
}

/// Whether the analyzer interprets a `cat` value (or knowingly ignores it).
pub fn is_known_category(cat: &str) -> bool {
    classify_cat(cat) != CatClass::Unknown
}

/// Bounds of stored times, ns: any start plus any duration stays far from
/// `i64` overflow, and so do differences of starts.
const MIN_TS: i64 = -(1 << 60);
const MAX_TS: i64 = 1 << 61;
const MAX_DUR: i64 = 1 << 60;
/// Interned strings are addressed with 32-bit offsets.
const MAX_NAME_BYTES: usize = 2 << 30;

/// The arguments of a slice the analysis reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct SliceArgs<'a> {
    /// A runtime call's or GPU op's correlation id.
    pub correlation: Option<i64>,
    /// The op a runtime call or GPU op belongs to (`External id`).
    pub external_id: Option<i64>,
    /// A GPU op's device.
    pub device: Option<i64>,
    /// A GPU op's stream.
    pub stream: Option<i64>,
    /// A kernel's grid.
    pub grid: Option<[u32; 3]>,
    /// A kernel's block.
    pub block: Option<[u32; 3]>,
    /// An op's `Input Dims`, as text (any spacing: see
    /// [`TraceBuilder::slice`]).
    pub input_dims: Option<&'a [u8]>,
    /// An op's `Input type`, as text.
    pub input_type: Option<&'a [u8]>,
    /// A copy's or set's bytes.
    pub bytes: Option<i64>,
    /// A CUDA-graph kernel's annotation (`args.name`, which torch splices
    /// in from `torch.cuda.graph_annotations.mark_kernels`), interned.
    pub annotation: Option<Sym>,
}

/// A complete slice (`ph: X`), decoded.
#[derive(Clone, Copy, Debug)]
pub struct Slice<'a> {
    /// Its category's class and interned text ([`TraceBuilder::category`]).
    pub class: CatClass,
    /// The interned category.
    pub cat: Sym,
    /// The interned name ([`TraceBuilder::name`]).
    pub name: Sym,
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Its track ([`TraceBuilder::track`]); read only for classes that
    /// [keep slices](CatClass::keeps_slices).
    pub track: u32,
    /// The pid and tid when they are numbers (a GPU op's device and stream
    /// when its args do not say).
    pub pid: Option<i64>,
    /// See `pid`.
    pub tid: Option<i64>,
    /// Its arguments.
    pub args: SliceArgs<'a>,
}

/// A category seen, kept with its id and class so that the next events of
/// it are told by their text alone: Kineto's events alternate between a
/// few categories (an op, its runtime call, its kernel), and a hash and a
/// lookup an event for them cost 2% of the parse's instructions
/// (callgrind, the H200 story's capture).
struct SeenCat {
    text: Box<[u8]>,
    sym: Sym,
    class: CatClass,
    /// Its events so far.
    events: u64,
}

impl SeenCat {
    /// Categories kept so, at most (the rest are looked up each time):
    /// Kineto writes about a dozen (`cpu_op`, `kernel`, `cuda_runtime`,
    /// `gpu_user_annotation`, ...), and a list longer than this costs
    /// more to search than a lookup.
    const MAX: usize = 16;
}

/// Builds a [`Trace`] from decoded events; see the module docs.
pub struct TraceBuilder {
    trace: Trace,
    track_ids: HashMap<Track, u32>,
    cat_class: HashMap<Sym, CatClass>,
    memory_peaks: HashMap<(i64, i64), (i64, u16)>,
    /// Shapes and dtypes as written, with their interned canonical text.
    compact: HashMap<Box<[u8]>, Sym>,
    scratch: Vec<u8>,
    /// The categories seen, with their ids, classes and events counted
    /// (added to the trace's counts at the end); see [`SeenCat`].
    cats: Vec<SeenCat>,
    /// Where in `cats` the last event's category is.
    last_cat: usize,
    /// The last numeric (pid, tid) pair and its track.
    last_track: (Track, u32),
    /// The track of the threads past [`MAX_TRACKS`], once made.
    lumped_track: Option<u32>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        TraceBuilder::new()
    }
}

impl TraceBuilder {
    /// An empty trace.
    pub fn new() -> TraceBuilder {
        TraceBuilder {
            trace: Trace::new(),
            track_ids: HashMap::new(),
            cat_class: HashMap::new(),
            memory_peaks: HashMap::new(),
            compact: HashMap::new(),
            scratch: Vec::new(),
            cats: Vec::new(),
            last_cat: 0,
            // Not a pair any event has: track ids of numbers are looked up.
            lumped_track: None,
            last_track: (
                Track {
                    pid: i64::MIN,
                    tid: i64::MIN,
                },
                0,
            ),
        }
    }

    /// The file's top-level metadata, for the reader to fill.
    pub fn meta(&mut self) -> &mut TraceMeta {
        &mut self.trace.meta
    }

    /// Events counted so far.
    pub fn events(&self) -> u64 {
        self.trace.counters.events
    }

    /// Counts one event of the file, whatever it is (before it is decoded:
    /// an error in it says how many events came before, this one included).
    #[inline]
    pub fn count_event(&mut self) {
        self.trace.counters.events += 1;
    }

    /// Interns an event's category (`None`: it has none) and classifies it
    /// by Kineto's rules, and counts the event under it. The categories
    /// seen are told by their text (the last event's first) before any
    /// hashing.
    #[inline]
    pub fn category(&mut self, text: Option<&[u8]>) -> (Sym, CatClass) {
        let seen = match text {
            Some(t) => match self.cats.get(self.last_cat).filter(|c| *c.text == *t) {
                Some(_) => Some(self.last_cat),
                None => self.cats.iter().position(|c| *c.text == *t),
            },
            None => None,
        };
        if let Some(k) = seen {
            self.last_cat = k;
            let c = &mut self.cats[k];
            c.events += 1;
            return (c.sym, c.class);
        }
        let sym = text.map_or(0, |t| self.trace.names.intern_bytes(t));
        let class = match self.cat_class.get(&sym) {
            Some(&c) => c,
            None => {
                let c = classify_cat(self.trace.names.get(sym));
                self.cat_class.insert(sym, c);
                c
            }
        };
        match text {
            Some(t) if self.cats.len() < SeenCat::MAX => {
                self.last_cat = self.cats.len();
                self.cats.push(SeenCat {
                    text: t.into(),
                    sym,
                    class,
                    events: 1,
                });
            }
            _ => *self.trace.counters.by_cat.entry(sym).or_insert(0) += 1,
        }
        (sym, class)
    }

    /// Interns a name (or any text).
    #[inline]
    pub fn name(&mut self, text: &[u8]) -> Sym {
        self.trace.names.intern_bytes(text)
    }

    /// The id of a pid or tid written as text: its number when it is all
    /// digits, else an id of its own.
    #[inline]
    pub fn text_id(&mut self, text: &[u8]) -> TrackId {
        if let Some(v) = (!text.is_empty() && text.iter().all(|c| c.is_ascii_digit()))
            .then(|| parse_decimal(text))
            .flatten()
        {
            v
        } else {
            STRING_ID_BASE + self.trace.names.intern_bytes(text) as i64
        }
    }

    /// The id of a pid or tid written as text that is never a number (it
    /// held escapes, say).
    pub fn string_id(&mut self, text: &[u8]) -> TrackId {
        STRING_ID_BASE + self.trace.names.intern_bytes(text) as i64
    }

    /// The track of a (pid, tid) pair written as numbers. Runs of events
    /// share their thread or stream: a pair equal to the last one reuses
    /// its track without hashing.
    #[inline]
    pub fn numeric_track(&mut self, pid: i64, tid: i64) -> u32 {
        let pair = Track { pid, tid };
        let (last, id) = self.last_track;
        if last == pair {
            return id;
        }
        let id = self.track(pair);
        self.last_track = (pair, id);
        id
    }

    /// The track of a (pid, tid) pair, new ones numbered in order of first
    /// sight; past [`MAX_TRACKS`](super::store::MAX_TRACKS), new pairs share
    /// one track.
    #[inline]
    pub fn track(&mut self, track: Track) -> u32 {
        if let Some(&id) = self.track_ids.get(&track) {
            return id;
        }
        if self.trace.tracks.len() >= MAX_TRACKS {
            return self.lumped_track();
        }
        let tracks = &mut self.trace.tracks;
        tracks.push(track);
        let id = (tracks.len() - 1) as u32;
        self.track_ids.insert(track, id);
        id
    }

    /// The one track of every thread past the bound, made on first use.
    #[cold]
    fn lumped_track(&mut self) -> u32 {
        if let Some(id) = self.lumped_track {
            return id;
        }
        let text = STRING_ID_BASE + self.trace.names.intern(LUMPED_TRACK) as i64;
        let lumped = Track {
            pid: text,
            tid: text,
        };
        self.trace.tracks.push(lumped);
        let id = (self.trace.tracks.len() - 1) as u32;
        self.lumped_track = Some(id);
        id
    }

    /// Stores a complete slice in the table its class goes to (nothing for
    /// classes that do not [keep slices](CatClass::keeps_slices)). Times
    /// are clamped to where sums and differences cannot overflow. A reader
    /// checks [`names_full`](Self::names_full) before interning its name.
    #[inline]
    pub fn slice(&mut self, s: &Slice) {
        if self.lumped_track == Some(s.track) {
            self.trace.counters.past_tracks += 1;
        }
        let ts = s.ts.clamp(MIN_TS, MAX_TS);
        let dur = s.dur.clamp(0, MAX_DUR);
        match s.class {
            CatClass::Cpu(kind) => self.push_cpu(s, kind, ts, dur),
            CatClass::Python => {
                // Every frame goes to the lean Python table (launch chains
                // reach the model code through it); `nn.Module` frames also
                // go to the CPU table, where layer detection reads them.
                self.trace.push_python(&PlainRow {
                    ts,
                    dur,
                    name: s.name,
                    track: s.track,
                });
                if self.trace.names.get(s.name).starts_with("nn.Module: ") {
                    self.push_cpu(s, CpuKind::Module, ts, dur);
                }
            }
            CatClass::Gpu(kind) => {
                let a = &s.args;
                let device = match (a.device, s.pid) {
                    (Some(d), _) => d,
                    (None, Some(p)) => p,
                    _ => 0,
                };
                let stream = match (a.stream, s.tid) {
                    (Some(st), _) => st,
                    (None, Some(t)) => t,
                    _ => self.trace.tracks[s.track as usize].tid,
                };
                let row = GpuRow {
                    ts,
                    dur,
                    name: s.name,
                    kind,
                    device,
                    stream,
                    grid: a.grid.unwrap_or_default(),
                    block: a.block.unwrap_or_default(),
                    bytes: a.bytes.unwrap_or(0).max(0),
                    track: s.track,
                    annotation: a.annotation,
                };
                self.trace.push_gpu(&row, a.correlation.unwrap_or(NONE));
            }
            CatClass::KeptKnown | CatClass::Unknown => {
                self.trace.push_other(
                    s.cat,
                    &PlainRow {
                        ts,
                        dur,
                        name: s.name,
                        track: s.track,
                    },
                );
            }
            CatClass::LaunchFlow | CatClass::Ignored => {}
        }
    }

    /// Whether the names outgrew their 32-bit offsets (checked before a
    /// slice's name is interned).
    #[inline]
    pub fn names_full(&self) -> bool {
        self.trace.names.bytes() > MAX_NAME_BYTES
    }

    #[inline]
    fn push_cpu(&mut self, s: &Slice, kind: CpuKind, ts: i64, dur: i64) {
        let shapes = s.args.input_dims.map_or(0, |t| self.inputs(t));
        let dtypes = s.args.input_type.map_or(0, |t| self.inputs(t));
        let row = CpuRow {
            ts,
            dur,
            name: s.name,
            track: s.track,
            kind,
            shapes,
            dtypes,
        };
        let correlation = if kind.is_runtime() {
            s.args.correlation.unwrap_or(NONE)
        } else {
            NONE
        };
        self.trace
            .push_cpu(&row, correlation, s.args.external_id.unwrap_or(NONE));
    }

    /// Interns an op's shapes or dtypes in a canonical spacing: whitespace
    /// outside strings removed, one space after each comma.
    #[inline]
    fn inputs(&mut self, raw: &[u8]) -> Sym {
        // The same few hundred texts repeat on every layer of every step:
        // each is brought to the canonical spacing once.
        if let Some(&sym) = self.compact.get(raw) {
            return sym;
        }
        // Kineto already writes this spacing: then the text is interned as
        // it is, without a copy.
        let sym = if is_compact(raw) {
            self.trace.names.intern_bytes(raw)
        } else {
            compact_into(raw, &mut self.scratch);
            self.trace.names.intern_bytes(&self.scratch)
        };
        // The cache holds each raw text it maps: bounded as the names are.
        if self.compact.len() < super::store::MAX_TEXTS {
            self.compact.insert(raw.into(), sym);
        }
        sym
    }

    /// Stores a launch flow's start (the runtime call's side) or end (the
    /// GPU op's), unless it is redundant.
    #[inline]
    pub fn launch_flow(&mut self, start: bool, id: i64, track: u32, ts: i64) {
        if self.flow_is_redundant(start, id, track, ts) {
            return;
        }
        self.trace.push_flow(&FlowRow {
            is_start: start,
            id,
            track,
            ts,
        });
    }

    /// Whether a launch flow end says nothing the slice just stored does
    /// not: Kineto writes each flow right after its slice (the start after
    /// the runtime call, the end after the GPU op), with the correlation id
    /// as the flow's id. Such flows are not kept (they were a fifth of the
    /// stored events); the analysis follows flows only for GPU ops without
    /// a correlation, and reaches a dropped start through the runtime call
    /// with that correlation (`links::flow_fallback`).
    #[inline]
    fn flow_is_redundant(&self, start: bool, id: i64, track: u32, ts: i64) -> bool {
        let ids = self.trace.ids();
        if start {
            let c = &self.trace.cpu;
            c.kind().last().is_some_and(|k| k.is_runtime())
                && c.track().last() == Some(track)
                && c.ts().last() == Some(ts)
                && ids.cpu_correlation().last() == Some(id)
        } else {
            let g = &self.trace.gpu;
            g.track().last() == Some(track)
                && g.ts().last() == Some(ts)
                && ids.gpu_correlation().last() == Some(id)
        }
    }

    /// A memory event (`[memory]`: an allocation, `bytes` > 0, or a free)
    /// on a device (`Device Type`, `Device Id`, -1 when absent): kept, with
    /// the peak per device.
    #[inline]
    pub fn memory(&mut self, mut ev: MemoryEvent, device_type: i64, device_id: i64) {
        let key = (device_type, device_id);
        let n = self.memory_peaks.len();
        if n >= MAX_MEMORY_DEVICES && !self.memory_peaks.contains_key(&key) {
            self.trace.memory.past_bound += 1;
            return;
        }
        let slot = self.memory_peaks.entry(key).or_insert((i64::MIN, n as u16));
        slot.0 = slot.0.max(ev.total_allocated);
        ev.device = slot.1;
        self.trace.memory.events.push(&ev);
    }

    /// A process's name (`process_name` metadata).
    pub fn process_name(&mut self, pid: TrackId, name: String) {
        self.trace.counter_samples.process_names.insert(pid, name);
    }

    /// One sample of a counter series (`ph: "C"`): the process's track,
    /// the event's name and the `args` key.
    pub fn counter(&mut self, track: u32, name: &str, key: &str, ts: i64, value: f64) {
        let c = &mut self.trace.counter_samples;
        let series = match c.index.get(&SeriesKey(track, name, key)) {
            Some(&k) => k,
            None if c.series.len() >= MAX_COUNTER_SERIES => {
                c.past_bound += 1;
                return;
            }
            None => {
                let k = c.series.len() as u32;
                c.series.push(CounterSeries {
                    track,
                    name: name.to_string(),
                    key: key.to_string(),
                });
                c.index
                    .insert((track, name.to_string(), key.to_string()), k);
                k
            }
        };
        c.samples.push(CounterSample { series, ts, value });
    }

    /// The trace, with the memory peaks named by device and the bytes the
    /// reader read.
    pub fn finish(mut self, json_bytes: u64) -> Trace {
        for c in &self.cats {
            *self.trace.counters.by_cat.entry(c.sym).or_insert(0) += c.events;
        }
        let mut peaks: Vec<(String, i64)> = self
            .memory_peaks
            .iter()
            .map(|(&(ty, id), &(v, _))| (device_name(ty, id), v))
            .collect();
        peaks.sort();
        let mut devices = vec![String::new(); self.memory_peaks.len()];
        for (&(ty, id), &(_, k)) in &self.memory_peaks {
            devices[k as usize] = device_name(ty, id);
        }
        self.trace.memory.devices = devices;
        self.trace.counters.peak_memory = peaks;
        self.trace.counters.json_bytes = json_bytes;
        self.trace
    }
}

/// A memory event's device in words: `cpu`, `cuda:0`, `hip:1`.
fn device_name(device_type: i64, id: i64) -> String {
    match device_type {
        0 => "cpu".to_string(),
        1 => format!("cuda:{id}"),
        6 => format!("hip:{id}"),
        other => format!("device{other}:{id}"),
    }
}

/// Writes a JSON value's text into `out` in the canonical spacing of
/// `TraceBuilder::inputs`: whitespace outside strings removed, one space
/// after each comma.
fn compact_into(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut string = InString::default();
    for &c in raw {
        if string.step(c) {
            out.push(c);
            continue;
        }
        match c {
            b' ' | b'\n' | b'\r' | b'\t' => {}
            b',' => out.extend_from_slice(b", "),
            _ => out.push(c),
        }
    }
}

/// Whether a JSON value's text is already in `TraceBuilder::inputs`'s
/// spacing: no whitespace outside strings but one space after each comma.
fn is_compact(raw: &[u8]) -> bool {
    let mut string = InString::default();
    let mut after_comma = false;
    for &c in raw {
        if after_comma {
            if c != b' ' {
                return false;
            }
            after_comma = false;
            continue;
        }
        if string.step(c) {
            continue;
        }
        match c {
            b' ' | b'\n' | b'\r' | b'\t' => return false,
            b',' => after_comma = true,
            _ => {}
        }
    }
    !after_comma
}

/// The digits of a decimal number as a number, `None` on overflow.
fn parse_decimal(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |v, &c| {
        v.checked_mul(10)?.checked_add((c - b'0') as i64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_values_are_interned_as_written() {
        for (raw, compact) in [
            (&b"[[2, 3], [], [1]]"[..], true),
            (b"[[2,3], []]", false),
            (b"[[2, 3],  []]", false),
            (b"[ [2, 3]]", false),
            (b"[\"a,b\", \"c d\"]", true),
            (b"[\"a\\\", b\", \"c\"]", true),
            (b"[1,\n 2]", false),
        ] {
            assert_eq!(is_compact(raw), compact, "{}", String::from_utf8_lossy(raw));
            let mut b = TraceBuilder::new();
            let sym = b.inputs(raw);
            // The copying path's answer for the same text.
            let mut slow = Vec::new();
            compact_into(raw, &mut slow);
            assert_eq!(b.trace.names.get(sym).as_bytes(), &slow[..]);
        }
    }
}
