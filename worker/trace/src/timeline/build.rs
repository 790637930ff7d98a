//! Building the index: laying a trace's slices out into tracks and rows,
//! into memory or straight into the stored form.

use super::*;

/// Interns strings into the index's name pool.
struct Pool {
    /// Per trace name id, its pool id once used, else [`NONE`] (a lookup a
    /// slice: an array, not a hash map; the trace's names are few).
    ids: Vec<u32>,
    names: Vec<String>,
}

impl Pool {
    fn new(t: &Tables) -> Pool {
        Pool {
            ids: vec![NONE; t.names.len()],
            names: Vec::new(),
        }
    }

    fn id(&mut self, t: &Tables, sym: u32) -> u32 {
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
    fn stack(&mut self, t: &Tables, frames: &[u32], st: u32) -> u32 {
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
    for (k, &id) in ids.iter().enumerate() {
        crate::cancel::point(k);
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
            let key = |i: u32| (cpu.ts().get(i as usize), cpu.dur().get(i as usize));
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
            .filter(|&g| gpu.kind()[g as usize].is_gpu_op())
            .collect();
        // Start, then longer first, then row (the rows are in row order).
        sort_by_start(&mut gpu_order, gpu.ts(), gpu.dur(), |_, _| {
            std::cmp::Ordering::Equal
        });
        for g in gpu_order {
            let key = (
                gpu.device().get(g as usize),
                gpu.stream().get(g as usize),
                gpu.track().get(g as usize),
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
        // The main thread: the CPU thread with the most slices (the one the
        // model runs on); its lane says so.
        let main_thread = cpu_tracks
            .iter()
            .enumerate()
            .max_by_key(|(k, (_, slices))| (slices.len(), std::cmp::Reverse(*k)))
            .map(|(_, (tr, _))| *tr);

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
            for (k, &i) in slices.iter().enumerate() {
                crate::cancel::point(k);
                let p = inp.parent.get(i as usize);
                if p != u32::MAX {
                    slot[i as usize] = slot[p as usize].saturating_add(1);
                }
            }
            let lens = layout(&mut slices, &mut slot, |i| {
                (cpu.ts().get(i), cpu.ts().get(i) + cpu.dur().get(i))
            });
            let drawn = lens.iter().sum::<usize>();
            tracks.push(TrackInfo {
                gpu: false,
                label: if Some(tr) == main_thread {
                    format!("CPU · main thread {tid} (pid {pid})")
                } else {
                    format!("CPU · thread {tid} (pid {pid})")
                },
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
                (gpu.ts().get(g), gpu.ts().get(g) + gpu.dur().get(g))
            });
            let drawn = lens.iter().sum::<usize>();
            tracks.push(TrackInfo {
                gpu: true,
                label: format!("GPU {device} · stream {stream}"),
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
            reverse: ReverseLinks::default(),
        })
    }
}

/// A row's slices as the index stores them, read one column at a time:
/// each column in slice order, names before args, so that laid-out slices
/// intern their names and args in the same order whether the row is
/// collected or written.
pub(super) trait Slices {
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
        (cpu.ts().get(i), cpu.ts().get(i) + cpu.dur().get(i))
    }
    fn name(&mut self, k: usize) -> u32 {
        let (t, i) = (self.inp.trace, self.slice(k));
        let kind = match t.cpu.kind()[i] {
            CpuKind::Annotation => SliceKind::Annotation,
            CpuKind::Op => SliceKind::Op,
            _ => SliceKind::Runtime,
        };
        self.names.pool.id(t, t.cpu.name()[i]) | (kind as u32) << KIND_SHIFT
    }
    fn link(&self, k: usize) -> u32 {
        match self.inp.parent.get(self.slice(k)) {
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
        (gpu.ts().get(g), gpu.ts().get(g) + gpu.dur().get(g))
    }
    fn name(&mut self, k: usize) -> u32 {
        let (t, g) = (self.inp.trace, self.slice(k));
        let kind = match t.gpu.kind()[g] {
            GpuKind::Memcpy => SliceKind::Memcpy,
            GpuKind::Memset => SliceKind::Memset,
            _ => SliceKind::Kernel,
        };
        self.names.pool.id(t, t.gpu.name()[g]) | (kind as u32) << KIND_SHIFT
    }
    fn link(&self, k: usize) -> u32 {
        match self.inp.launch.get(self.slice(k)) {
            u32::MAX => NONE,
            r => self.cpu_event[r as usize],
        }
    }
    fn args(&mut self, k: usize) -> u32 {
        let (gpu, g) = (&self.inp.trace.gpu, self.slice(k));
        let (grid, block, bytes) = (gpu.grid(g), gpu.block(g), gpu.bytes().get(g) as u64);
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
