//! Queries over a built index: where an event lies, its columns and links,
//! what a window of a track holds, searches, and an event's details.

use super::*;
use crate::analysis::{python, shapes};
use kinetoscope_types::units::{bytes, rate_gbps};
use kinetoscope_types::{
    TimelineDensity, TimelineEvent, TimelineFirst, TimelineRef, TimelineSearch,
};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Most related events listed in an event's details (parents, kernels).
pub const MAX_RELATED: usize = 200;

/// An event's columns as the index keeps them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventColumns<'a> {
    /// What it is.
    pub kind: SliceKind,
    /// Its name.
    pub name: &'a str,
    /// Start, ns.
    pub start_ns: i64,
    /// Duration, ns.
    pub dur_ns: i64,
    /// A GPU op's launch, a CPU slice's parent, or [`NONE`].
    pub link: u32,
    /// Its arguments, if it has any.
    pub args: Option<&'a Args>,
}

/// Per event, the events that link to it (CSR: `targets[offsets[e]..
/// offsets[e + 1]]`, each list in id order). Derived from the rows, so it
/// is built on first use, never stored, and equal whenever the rows are.
#[derive(Default)]
pub(super) struct ReverseLinks(OnceLock<Csr>);

/// The reverse links, laid out.
pub(super) struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl ReverseLinks {
    fn get_or_init(&self, f: impl FnOnce() -> Csr) -> &Csr {
        self.0.get_or_init(f)
    }

    /// Bytes it takes once built: 4 per event and 4 per linked event.
    pub(super) fn bytes_when_built(events: usize) -> usize {
        8 * events + 4
    }

    fn of(rows: &[Row]) -> Csr {
        let events = rows.last().map_or(0, |r| r.first_event as usize + r.len());
        let mut offsets = vec![0u32; events + 1];
        for row in rows {
            for &l in &row.link {
                if (l as usize) < events {
                    offsets[l as usize + 1] += 1;
                }
            }
        }
        for e in 0..events {
            offsets[e + 1] += offsets[e];
        }
        let mut next = offsets.clone();
        let mut targets = vec![0u32; offsets[events] as usize];
        // Rows in event-id order: each list fills in id order.
        for row in rows {
            for (k, &l) in row.link.iter().enumerate() {
                if (l as usize) < events {
                    targets[next[l as usize] as usize] = row.first_event + k as u32;
                    next[l as usize] += 1;
                }
            }
        }
        Csr { offsets, targets }
    }
}

impl Csr {
    fn of_event(&self, event: u32) -> &[u32] {
        let e = event as usize;
        if e + 1 >= self.offsets.len() {
            return &[];
        }
        &self.targets[self.offsets[e] as usize..self.offsets[e + 1] as usize]
    }
}

impl Clone for ReverseLinks {
    /// A clone builds its own when asked.
    fn clone(&self) -> Self {
        ReverseLinks::default()
    }
}

impl PartialEq for ReverseLinks {
    /// Derived from the rows, which the index compares.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for ReverseLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "ReverseLinks(built)"
        } else {
            "ReverseLinks(not built)"
        })
    }
}

impl TimelineIndex {
    /// The Python stack above an event (outermost frame first): the stack
    /// recorded on the nearest slice up its chain (a GPU op's launch, then
    /// the ops around it) that has one.
    pub fn python_of(&self, event: u32) -> Vec<&str> {
        let mut e = event;
        let mut guard = 0;
        while e != NONE && guard < 1000 {
            let Some(r) = self.locate(e) else { break };
            let EventColumns { link, args, .. } = self.event(r);
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

    /// An event's columns.
    pub fn event(&self, r: EventRef) -> EventColumns<'_> {
        let row = &self.rows[r.global_row];
        let i = r.index;
        let packed = row.name[i];
        EventColumns {
            kind: slice_kind((packed >> KIND_SHIFT) as u8),
            name: self.name(packed),
            start_ns: row.start[i],
            dur_ns: row.dur[i] as i64,
            link: row.link[i],
            args: Some(row.args_of(i))
                .filter(|&a| a != NONE)
                .map(|a| &self.args[a as usize]),
        }
    }

    /// The events linked to `event` (its children on the CPU side, or the
    /// GPU ops a launch produced), in id order. From the reverse-link index,
    /// built on the first call (every link once: O(events)), so each call
    /// after is O(answer).
    pub fn linked_to(&self, event: u32) -> Vec<u32> {
        self.reverse
            .get_or_init(|| ReverseLinks::of(&self.rows))
            .of_event(event)
            .to_vec()
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
    /// per track a density over `px` buckets of the whole trace, the
    /// earliest one and the longest one.
    pub fn search(&self, needle: &str, px: u32) -> TimelineSearch {
        let needle = needle.to_lowercase();
        let hit: Vec<bool> = self
            .names
            .iter()
            .map(|n| !needle.is_empty() && n.to_lowercase().contains(&needle))
            .collect();
        let mut total = 0u64;
        let mut first: Option<(u32, i64)> = None;
        // The longest match, the earliest of equals: (event, start, dur).
        let mut longest: Option<(u32, i64, u32)> = None;
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
                        let d = row.dur[k];
                        if longest.is_none_or(|(_, s, ld)| d > ld || (d == ld && row.start[k] < s))
                        {
                            longest = Some((row.first_event + k as u32, row.start[k], d));
                        }
                    }
                }
            }
            if any {
                tracks.push(TimelineDensity {
                    id: tid as u32,
                    density,
                });
            }
        }
        TimelineSearch {
            matches: total,
            tracks,
            first: first.map(|(event, start_ns)| TimelineFirst { event, start_ns }),
            longest: longest.map(|(event, start_ns, _)| TimelineFirst { event, start_ns }),
        }
    }

    /// An event as a reference: its id, name, kind, track and start.
    pub fn reference(&self, event: u32) -> Option<TimelineRef> {
        let r = self.locate(event)?;
        let e = self.event(r);
        Some(TimelineRef {
            event,
            name: e.name.to_string(),
            kind: e.kind,
            track: r.track,
            start_ns: e.start_ns,
        })
    }

    /// An event's details (`GET .../timeline/event/{event}`): its columns
    /// and arguments, its chain upward (a GPU op's launch, then the ops
    /// around it), bytes moved and bandwidth of a copy or cast, the GPU ops
    /// below it (a launch's; an op's launches'), and its Python stack.
    /// `None` for an id the index does not hold.
    pub fn details(&self, event: u32) -> Option<TimelineEvent> {
        let r = self.locate(event)?;
        let e = self.event(r);
        let mut out = TimelineEvent {
            event,
            name: e.name.to_string(),
            kind: e.kind,
            start_ns: e.start_ns,
            dur_ns: e.dur_ns,
            track: r.track,
            row: r.row,
            track_label: self.tracks[r.track as usize].label.clone(),
            ..Default::default()
        };
        let inputs = e.args.and_then(|a| self.describe_args(a, &mut out.args));
        // Upward: a GPU op's launch, then the ops around it.
        let mut up = e.link;
        if e.kind.is_gpu() && e.link != NONE {
            out.launch = self.reference(e.link);
            up = self.locate(e.link).map_or(NONE, |lr| self.event(lr).link);
        }
        while up != NONE && out.parents.len() < MAX_RELATED {
            let Some(pr) = self.locate(up) else { break };
            out.parents.push(self.reference(up).unwrap_or_default());
            up = self.event(pr).link;
        }
        self.copy_bandwidth(&e, event, inputs, &mut out);
        out.python = self
            .python_of(event)
            .into_iter()
            .map(|f| python::short_frame(f).to_string())
            .collect();
        out.kernels = self
            .gpu_ops_below(event, e.kind)
            .into_iter()
            .take(MAX_RELATED)
            .filter_map(|k| self.reference(k))
            .collect();
        Some(out)
    }

    /// Bytes and bandwidth of a copy or cast: the op's inputs, over the GPU
    /// op's duration (or the op's own inputs, on the CPU side).
    fn copy_bandwidth(
        &self,
        e: &EventColumns,
        event: u32,
        inputs: Option<(String, String)>,
        out: &mut TimelineEvent,
    ) {
        let gpu = e.kind.is_gpu();
        let op = if gpu {
            out.parents.first().cloned()
        } else {
            Some(self.reference(event).unwrap_or_default())
        };
        let Some(op) = op else { return };
        let (shapes_text, dtypes_text) = match (inputs, gpu) {
            (Some(i), false) => i,
            _ => self
                .locate(op.event)
                .and_then(|r| self.event(r).args)
                .and_then(|a| self.describe_args(a, &mut BTreeMap::new()))
                .unwrap_or_default(),
        };
        if let Some(b) = shapes::copy_bytes(&op.name, &shapes_text, &dtypes_text) {
            out.args.insert("bytes moved".into(), bytes(b as f64));
            out.bytes_moved = Some(b as f64);
            if gpu && e.dur_ns > 0 {
                let gbps = b as f64 / e.dur_ns as f64;
                out.args.insert("bandwidth".into(), rate_gbps(gbps));
                out.bandwidth_gbps = Some(gbps);
            }
            if let Some((from, to)) = shapes::conversion(&op.name, &dtypes_text) {
                out.args
                    .insert("conversion".into(), format!("{from} -> {to}"));
            }
        }
    }

    /// The GPU ops below an event: a launch's; an op's or annotation's
    /// launches' (through the ops inside it), in id order, at most
    /// [`MAX_RELATED`].
    fn gpu_ops_below(&self, event: u32, kind: SliceKind) -> Vec<u32> {
        let mut below: Vec<u32> = Vec::new();
        match kind {
            SliceKind::Runtime => below = self.linked_to(event),
            SliceKind::Op | SliceKind::Annotation => {
                let mut stack = self.linked_to(event);
                while let Some(e) = stack.pop() {
                    if below.len() >= MAX_RELATED {
                        break;
                    }
                    let Some(er) = self.locate(e) else { continue };
                    let k = self.event(er).kind;
                    let children = self.linked_to(e);
                    if k.is_gpu() {
                        below.push(e);
                    } else {
                        stack.extend(children);
                    }
                }
                below.sort_unstable();
            }
            _ => {}
        }
        below
    }

    /// An event's arguments in words (`Input Dims`, `Input type`, `grid`,
    /// `block`, `bytes`) into `out`; an op's inputs as (shapes, dtypes).
    fn describe_args(
        &self,
        a: &Args,
        out: &mut BTreeMap<String, String>,
    ) -> Option<(String, String)> {
        match a {
            Args::Inputs { shapes, dtypes, .. } => {
                let (s, d) = (
                    self.name(*shapes).to_string(),
                    self.name(*dtypes).to_string(),
                );
                if !s.is_empty() {
                    out.insert("Input Dims".into(), s.clone());
                }
                if !d.is_empty() {
                    out.insert("Input type".into(), d.clone());
                }
                Some((s, d))
            }
            Args::Launch {
                grid,
                block,
                bytes: b,
            } => {
                if *grid != [0; 3] || *block != [0; 3] {
                    out.insert("grid".into(), format!("{grid:?}"));
                    out.insert("block".into(), format!("{block:?}"));
                }
                if *b > 0 {
                    out.insert("bytes".into(), bytes(*b as f64));
                }
                None
            }
        }
    }
}
