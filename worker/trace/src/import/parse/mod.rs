//! A streaming, hand-written parser for Kineto Chrome-trace JSON.
//!
//! The parser is fed contiguous byte slices and consumes whole JSON values
//! (one event, or one top-level key and its value) at a time. When a value is
//! cut by the end of the slice it stops *before* it and reports how far it got;
//! the caller (see `input::read_trace`) keeps the unconsumed tail and feeds it
//! again in front of the next block. Every step is therefore atomic, no
//! generic JSON tree is ever built, and the text held at any time is bounded
//! by the largest single event (limited by [`Limits::max_value_bytes`]); what
//! grows with the trace is only the columns of kept events.
//!
//! Only the fields the analysis needs are decoded; everything else is skipped
//! structurally. Timestamps are parsed from their decimal text into integer
//! nanoseconds so that 3-decimal epoch microseconds keep their precision.

//!
//! The JSON side only: `lex.rs` reads JSON values in place, `scan.rs` reads
//! one event's fields into spans, and this module walks the document and
//! hands each decoded event to the format-neutral
//! [`TraceBuilder`](super::builder::TraceBuilder), which applies Kineto's
//! rules and fills the columns.

mod lex;
mod scan;

pub(crate) use lex::*;
pub(crate) use scan::*;

use super::builder::{CatClass, Slice, SliceArgs, TraceBuilder};
use super::store::*;
use super::TraceError;

/// Bounds that protect the process from hostile or broken input.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest decompressed JSON accepted, in bytes.
    pub max_json_bytes: u64,
    /// Deepest JSON nesting accepted.
    pub max_depth: usize,
    /// Largest single event or top-level value, in bytes.
    pub max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_json_bytes: 64 << 30,
            max_depth: 64,
            max_value_bytes: 64 << 20,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    TopFirstKey,
    TopKey,
    TopAfterValue,
    EventsFirst,
    EventsNext,
    EventsAfterItem,
    Done,
}

/// Incremental parser state; see the module docs.
pub struct Parser {
    state: State,
    limits: Limits,
    /// Where the decoded events go.
    builder: TraceBuilder,
    saw_events: bool,
    consumed: u64,
    /// Escaped strings, decoded.
    scratch: Vec<u8>,
    /// Which key follows which (see [`KeyGuess`]).
    guess: KeyGuess,
}

impl Parser {
    /// A parser at the start of a document.
    pub fn new(limits: Limits) -> Self {
        Parser {
            state: State::Start,
            limits,
            builder: TraceBuilder::new(),
            saw_events: false,
            consumed: 0,
            scratch: Vec::new(),
            guess: KeyGuess::default(),
        }
    }

    /// Parses as many whole values of `b` as possible and returns how many
    /// bytes were consumed; the rest must be passed again, followed by more
    /// input. With `eof`, the input ends at `b`. `b` is under 4 GiB (the
    /// reader feeds blocks of a few MB).
    pub fn feed(&mut self, b: &[u8], eof: bool) -> Result<usize, TraceError> {
        if b.len() > u32::MAX as usize {
            // Spans are four-byte offsets; `read_trace` feeds blocks.
            return Err(TraceError::TooLarge(
                "more than 4 GiB of JSON fed in one slice".into(),
            ));
        }
        let mut i = 0;
        loop {
            match self.step(b, i) {
                Ok(Some(next)) => i = next,
                Ok(None) => {
                    self.consumed += b.len() as u64;
                    return Ok(b.len());
                }
                Err(Stop::More) => {
                    if eof {
                        return Err(self.truncated());
                    }
                    self.consumed += i as u64;
                    return Ok(i);
                }
                Err(Stop::Bad(msg)) => {
                    let at = self.consumed + i as u64;
                    return Err(TraceError::NotATrace(format!(
                        "{msg} (near byte {at}, after {} events)",
                        self.builder.events()
                    )));
                }
            }
        }
    }

    /// Whether the parser stands between two events of the event array,
    /// after a `,` (where [`commit_scanned`](Self::commit_scanned) may go on).
    pub(crate) fn at_next_event(&self) -> bool {
        self.state == State::EventsNext
    }

    /// Commits the events read ahead in `b` ([`scan_block`]), in
    /// order, as [`feed`](Self::feed) would have. The caller has checked
    /// that the parser stands just before `scanned.start`
    /// ([`at_next_event`](Self::at_next_event), only blanks between).
    /// `blanks` is how many bytes of whitespace lie between the parser and
    /// the first event.
    pub(crate) fn commit_scanned(
        &mut self,
        b: &[u8],
        blanks: usize,
        scanned: &Scanned,
    ) -> Result<(), TraceError> {
        debug_assert!(self.at_next_event());
        let (start, end) = (scanned.start, scanned.end);
        for &(at, ref ev) in &scanned.events {
            if let Err(stop) = self.commit(b, ev) {
                let msg = match stop {
                    Stop::Bad(msg) => *msg,
                    Stop::More => "an event was cut".into(),
                };
                // Where `feed` would say: just after the `,` before the
                // event (the parser's place for the first one).
                let mut after_comma = at;
                while after_comma > start && b[after_comma - 1].is_ascii_whitespace() {
                    after_comma -= 1;
                }
                let at = match after_comma - start {
                    0 => self.consumed,
                    k => self.consumed + (blanks + k) as u64,
                };
                return Err(TraceError::NotATrace(format!(
                    "{msg} (near byte {at}, after {} events)",
                    self.builder.events()
                )));
            }
        }
        self.consumed += (blanks + end - start) as u64;
        self.state = State::EventsAfterItem;
        Ok(())
    }

    fn truncated(&self) -> TraceError {
        let where_ = match self.state {
            State::Start => "before any JSON".to_string(),
            State::EventsFirst | State::EventsNext | State::EventsAfterItem => format!(
                "inside the traceEvents array, after {} events",
                self.builder.events()
            ),
            _ => "before the end of the top-level object".to_string(),
        };
        TraceError::Truncated(format!("the JSON ends {where_}"))
    }

    /// Finishes parsing and returns the trace.
    pub fn finish(self) -> Result<Trace, TraceError> {
        if self.state != State::Done {
            return Err(self.truncated());
        }
        if !self.saw_events {
            return Err(TraceError::NotATrace(
                "the JSON has no traceEvents array: not a Kineto/Chrome trace".into(),
            ));
        }
        if self.builder.events() == 0 {
            return Err(TraceError::NotATrace("the trace has no events".into()));
        }
        Ok(self.builder.finish(self.consumed))
    }

    /// One atomic step from `i`: `Some(next)` to continue, `None` when the
    /// document is complete and only whitespace remains in `b`.
    fn step(&mut self, b: &[u8], i: usize) -> Step<Option<usize>> {
        let i = skip_ws(b, i);
        match self.state {
            State::Start => {
                // A UTF-8 byte order mark is tolerated; a block that ends
                // inside one waits for the rest (the fuzz smoke's `parse`
                // target cut one after its first byte).
                const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
                let rest = &b[i.min(b.len())..];
                if !rest.is_empty() && rest.len() < BOM.len() && BOM.starts_with(rest) {
                    return Err(Stop::More);
                }
                let i = if rest.starts_with(&BOM) {
                    skip_ws(b, i + 3)
                } else {
                    i
                };
                match at(b, i)? {
                    b'{' => self.state = State::TopFirstKey,
                    b'[' => {
                        self.builder.meta().layout_array = true;
                        self.saw_events = true;
                        self.state = State::EventsFirst;
                    }
                    c => {
                        return bad(format!(
                            "the document is not a JSON object or array (starts with {})",
                            show_byte(c)
                        ))
                    }
                }
                Ok(Some(i + 1))
            }
            State::TopFirstKey if at(b, i)? == b'}' => {
                self.state = State::Done;
                Ok(Some(i + 1))
            }
            State::TopFirstKey | State::TopKey => self.top_key(b, i).map(Some),
            State::TopAfterValue => match at(b, i)? {
                b',' => {
                    self.state = State::TopKey;
                    Ok(Some(i + 1))
                }
                b'}' => {
                    self.state = State::Done;
                    Ok(Some(i + 1))
                }
                c => bad(format!(
                    "expected ',' or '}}' after a top-level value, found {}",
                    show_byte(c)
                )),
            },
            State::EventsFirst if at(b, i)? == b']' => {
                self.end_events();
                Ok(Some(i + 1))
            }
            State::EventsFirst | State::EventsNext => {
                if at(b, i)? != b'{' {
                    return bad(format!(
                        "an entry of traceEvents is not an object (found {})",
                        show_byte(b[i])
                    ));
                }
                let mut ev = RawEvent::default();
                let next = scan_event(b, i, self.limits.max_depth, &mut self.guess, &mut ev)?;
                self.commit(b, &ev)?;
                self.state = State::EventsAfterItem;
                Ok(Some(next))
            }
            State::EventsAfterItem => match at(b, i)? {
                b',' => {
                    self.state = State::EventsNext;
                    Ok(Some(i + 1))
                }
                b']' => {
                    self.end_events();
                    Ok(Some(i + 1))
                }
                c => bad(format!(
                    "expected ',' or ']' between events, found {}",
                    show_byte(c)
                )),
            },
            State::Done => {
                if i >= b.len() {
                    Ok(None)
                } else {
                    bad(format!(
                        "unexpected {} after the end of the JSON document",
                        show_byte(b[i])
                    ))
                }
            }
        }
    }

    fn end_events(&mut self) {
        self.state = if self.builder.meta().layout_array {
            State::Done
        } else {
            State::TopAfterValue
        };
    }

    /// A top-level key and its value (or the start of the event array).
    fn top_key(&mut self, b: &[u8], i: usize) -> Step<usize> {
        let (key, next) = scan_string(b, i)?;
        let j = skip_ws(b, next);
        if at(b, j)? != b':' {
            return bad("expected ':' after a top-level key");
        }
        let j = skip_ws(b, j + 1);
        let key = key.bytes(b);
        if key == b"traceEvents" {
            if at(b, j)? != b'[' {
                return bad("traceEvents is not an array");
            }
            if self.saw_events {
                return bad("traceEvents appears twice");
            }
            self.saw_events = true;
            self.state = State::EventsFirst;
            return Ok(j + 1);
        }
        let end = skip_value(b, j, self.limits.max_depth)?;
        let value = &b[j..end];
        let meta = self.builder.meta();
        match key {
            b"schemaVersion" => meta.schema_version = parse_int(value),
            b"baseTimeNanoseconds" => meta.base_time_ns = parse_int(value),
            b"traceName" => meta.trace_name = serde_json::from_slice(value).ok(),
            b"displayTimeUnit" => meta.display_time_unit = serde_json::from_slice(value).ok(),
            b"deviceProperties" => {
                #[derive(serde::Deserialize)]
                struct Dev {
                    #[serde(default)]
                    id: Option<i64>,
                    #[serde(default)]
                    name: Option<String>,
                    #[serde(default, rename = "numSms")]
                    num_sms: Option<i64>,
                    #[serde(default, rename = "totalGlobalMem")]
                    total_global_mem: Option<i64>,
                    #[serde(default, rename = "computeMajor")]
                    compute_major: Option<i64>,
                }
                if let Ok(devs) = serde_json::from_slice::<Vec<Dev>>(value) {
                    meta.devices = devs
                        .into_iter()
                        .enumerate()
                        .map(|(k, d)| DeviceProps {
                            id: d.id.unwrap_or(k as i64),
                            name: d.name.unwrap_or_default(),
                            num_sms: d.num_sms,
                            total_global_mem: d.total_global_mem,
                            compute_major: d.compute_major,
                        })
                        .collect();
                }
            }
            b"distributedInfo" => {
                #[derive(serde::Deserialize)]
                struct Dist {
                    #[serde(default)]
                    backend: Option<String>,
                    #[serde(default)]
                    rank: Option<i64>,
                    #[serde(default)]
                    world_size: Option<i64>,
                }
                if let Ok(d) = serde_json::from_slice::<Dist>(value) {
                    meta.backend = d.backend;
                    meta.rank = d.rank;
                    meta.world_size = d.world_size;
                }
            }
            b"record_shapes" | b"profile_memory" | b"with_stack" | b"with_flops"
            | b"with_modules" => {
                if matches!(value, b"1" | b"true") {
                    meta.options.push(String::from_utf8_lossy(key).into_owned());
                }
            }
            _ => {}
        }
        self.state = State::TopAfterValue;
        Ok(end)
    }

    /// Stores a complete event through the builder: its category first
    /// (counted, classified), then what its phase carries.
    fn commit(&mut self, b: &[u8], ev: &RawEvent) -> Step<()> {
        self.builder.count_event();
        let (cat_sym, class) = match ev.cat {
            Some(s) => {
                let text = text(&mut self.scratch, b, s)?;
                self.builder.category(Some(text))
            }
            None => self.builder.category(None),
        };
        match ev.ph {
            b'X' => self.commit_slice(b, ev, class, cat_sym),
            b's' | b'f' => {
                // Other flows (fwdbwd) are only counted, by category.
                if class == CatClass::LaunchFlow {
                    if let (Some(id), Some(ts)) = (ev.id.get(), ev.ts.get()) {
                        let track = self.track(b, ev.pid, ev.tid)?;
                        self.builder.launch_flow(ev.ph == b's', id, track, ts);
                    }
                }
                Ok(())
            }
            b'i' | b'I' => {
                let a = &ev.args;
                if let (Some(total), Some(ts)) = (a.total_allocated.get(), ev.ts.get()) {
                    let track = self.track(b, ev.pid, ev.tid)?;
                    self.builder.memory(
                        MemoryEvent {
                            ts,
                            track,
                            device: 0,
                            addr: a.addr.get().unwrap_or(0),
                            bytes: a.bytes.get().unwrap_or(0),
                            total_allocated: total,
                            total_reserved: a.total_reserved.get().unwrap_or(-1),
                        },
                        a.device_type.get().unwrap_or(-1),
                        a.device_id.get().unwrap_or(-1),
                    );
                }
                Ok(())
            }
            b'C' => self.commit_counter(b, ev),
            b'M' => self.commit_metadata(b, ev),
            // Metadata (`M`) and other phases are counted, by category, only.
            _ => Ok(()),
        }
    }

    /// A counter event (`ph: "C"`): each numeric key of its `args` is a
    /// sample of the series (process, name, key).
    fn commit_counter(&mut self, b: &[u8], ev: &RawEvent) -> Step<()> {
        let (Some(ts), Some(span)) = (ev.ts.get(), ev.args_span) else {
            return Ok(());
        };
        let name = match ev.name {
            Some(s) => String::from_utf8_lossy(text(&mut self.scratch, b, s)?).into_owned(),
            None => String::new(),
        };
        let track = self.track(b, ev.pid, ev.tid)?;
        let Ok(args) =
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(span.bytes(b))
        else {
            return Ok(());
        };
        for (key, value) in args {
            if let Some(v) = value.as_f64().filter(|v| v.is_finite()) {
                self.builder.counter(track, &name, &key, ts, v);
            }
        }
        Ok(())
    }

    /// A metadata event: a process's name (`process_name`) is kept, for
    /// the counter tracks' labels and devices.
    fn commit_metadata(&mut self, b: &[u8], ev: &RawEvent) -> Step<()> {
        let (Some(name), Some(span)) = (ev.name, ev.args_span) else {
            return Ok(());
        };
        if name.bytes(b) != b"process_name" {
            return Ok(());
        }
        #[derive(serde::Deserialize)]
        struct Args {
            name: String,
        }
        if let Ok(a) = serde_json::from_slice::<Args>(span.bytes(b)) {
            let pid = self.id_value(b, ev.pid)?;
            self.builder.process_name(pid, a.name);
        }
        Ok(())
    }

    fn commit_slice(&mut self, b: &[u8], ev: &RawEvent, class: CatClass, cat_sym: Sym) -> Step<()> {
        let (Some(ts), dur) = (ev.ts.get(), ev.dur.get().unwrap_or(0)) else {
            // A slice without a start cannot be placed; it is counted only.
            return Ok(());
        };
        if self.builder.names_full() {
            return bad("the trace has more than 2 GB of distinct names");
        }
        let name = match ev.name {
            Some(s) => {
                let text = text(&mut self.scratch, b, s)?;
                self.builder.name(text)
            }
            None => 0,
        };
        if !class.keeps_slices() {
            return Ok(());
        }
        let track = self.track(b, ev.pid, ev.tid)?;
        let int = |id: RawId| match id {
            RawId::Int(v) => Some(v),
            _ => None,
        };
        let a = &ev.args;
        // A graph kernel's annotation (its `args.name`), interned.
        let annotation = match (class, a.name) {
            (CatClass::Gpu(_), Some(s)) => {
                let text = text(&mut self.scratch, b, s)?;
                Some(self.builder.name(text))
            }
            _ => None,
        };
        let slice = Slice {
            class,
            cat: cat_sym,
            name,
            ts,
            dur,
            track,
            pid: int(ev.pid),
            tid: int(ev.tid),
            args: SliceArgs {
                correlation: a.correlation.get(),
                external_id: a.external_id.get(),
                device: a.device.get(),
                stream: a.stream.get(),
                grid: a.grid,
                block: a.block,
                input_dims: a.input_dims.map(|s| s.bytes(b)),
                input_type: a.input_type.map(|s| s.bytes(b)),
                bytes: a.bytes.get(),
                annotation,
            },
        };
        self.builder.slice(&slice);
        Ok(())
    }

    /// The track of an event's (pid, tid).
    fn track(&mut self, b: &[u8], pid: RawId, tid: RawId) -> Step<u32> {
        if let (RawId::Int(p), RawId::Int(t)) = (pid, tid) {
            return Ok(self.builder.numeric_track(p, t));
        }
        let track = Track {
            pid: self.id_value(b, pid)?,
            tid: self.id_value(b, tid)?,
        };
        Ok(self.builder.track(track))
    }

    fn id_value(&mut self, b: &[u8], id: RawId) -> Step<TrackId> {
        Ok(match id {
            RawId::Missing => 0,
            RawId::Int(v) => v,
            RawId::Str(s) if !s.escaped => self.builder.text_id(s.bytes(b)),
            RawId::Str(s) => {
                let text = text(&mut self.scratch, b, s)?;
                self.builder.string_id(text)
            }
        })
    }
}

/// A string span's text: in place, or decoded into `scratch` when it holds
/// escapes.
#[inline]
fn text<'a>(scratch: &'a mut Vec<u8>, b: &'a [u8], s: Span) -> Step<&'a [u8]> {
    if s.escaped {
        unescape(s.bytes(b), scratch)?;
        Ok(scratch)
    } else {
        Ok(s.bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whitespace runs of every mix and length end where a byte-by-byte
    /// skip ends them, wherever the slice is cut.
    #[test]
    fn whitespace_runs_skip_alike() {
        let reference = |b: &[u8], mut i: usize| {
            while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
                i += 1;
            }
            i
        };
        let mut seed = 11u64;
        for len in 0..40 {
            for _ in 0..50 {
                let mut doc: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        [b' ', b' ', b' ', b'\n', b'\r', b'\t'][(seed >> 61) as usize % 6]
                    })
                    .collect();
                doc.extend_from_slice(&[b'!', 0x00, 0x21, b' ', 0x0b, 0xa0, b'"', b' ']);
                for cut in 0..=doc.len() {
                    let b = &doc[..cut];
                    for from in 0..=cut.min(3) {
                        assert_eq!(
                            skip_ws_run(b, from),
                            reference(b, from),
                            "{doc:?} cut {cut}"
                        );
                    }
                }
            }
        }
        // Bytes that differ from a blank in one bit, after blanks.
        for c in [0x21u8, 0x0b, 0x00, 0x28, 0x2a, 0xa0, 0x8a, 0x01] {
            let doc = [
                b' ', b'\n', c, b' ', b' ', b' ', b' ', b' ', b' ', b' ', b' ',
            ];
            assert_eq!(skip_ws_run(&doc, 0), 2, "{c:#x}");
        }
    }

    #[test]
    fn times_keep_nanoseconds() {
        assert_eq!(
            parse_time_ns(b"1712195495519695.812"),
            Some(1712195495519695812)
        );
        assert_eq!(
            parse_time_ns(b"1694128201428460"),
            Some(1694128201428460000)
        );
        assert_eq!(parse_time_ns(b"1428625731896.1"), Some(1428625731896100));
        assert_eq!(parse_time_ns(b"0.0005"), Some(1));
        assert_eq!(parse_time_ns(b"-2.5"), Some(-2500));
        assert_eq!(parse_time_ns(b"1.5e3"), Some(1_500_000));
        assert_eq!(parse_time_ns(b"abc"), None);
        assert_eq!(parse_time_ns(b"99999999999999999999"), None);
    }

    /// The word-at-a-time number reader agrees with the general one
    /// (`scan_scalar` then `parse_time_ns` / `parse_int`) on every number
    /// it accepts, at every length of integer and fraction, at every cut.
    #[test]
    fn plain_numbers_read_as_the_general_path() {
        let mut seed = 7u64;
        let mut digits = |n: usize| -> String {
            (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (b'0' + (seed >> 60) as u8 % 10) as char
                })
                .collect()
        };
        let mut cases = vec![];
        for int in 0..=20 {
            for frac in [
                None,
                Some(0),
                Some(1),
                Some(3),
                Some(4),
                Some(7),
                Some(8),
                Some(9),
                Some(12),
            ] {
                for neg in [false, true] {
                    for end in [",", "}", " ", "e3", "x", ".5", "]", "a"] {
                        let mut t = String::new();
                        if neg {
                            t.push('-');
                        }
                        t += &digits(int);
                        if let Some(f) = frac {
                            t.push('.');
                            t += &digits(f);
                        }
                        cases.push((t, end));
                    }
                }
            }
        }
        cases.push(("9999999999999999.9995".into(), ","));
        cases.push(("9223372036854775.808".into(), ","));
        cases.push(("-9223372036854775.808".into(), ","));
        for (num, end) in cases {
            let doc = format!("{num}{end}        ");
            let b = doc.as_bytes();
            for cut in 0..=b.len() {
                let b = &b[..cut];
                if let Some((neg, int, frac, e)) = plain_number(b, 0, true) {
                    let (s, e2) = scan_scalar(b, 0).ok().unwrap();
                    assert_eq!(e, e2, "{doc:?} cut {cut}");
                    let want = parse_time_ns(&b[s..e2]);
                    let got = int
                        .checked_mul(1000)
                        .and_then(|v| v.checked_add(frac))
                        .map(|v| if neg { -v } else { v });
                    assert!(
                        got.is_none() || got == want,
                        "{doc:?} cut {cut}: {got:?} {want:?}"
                    );
                }
                if let Some((v, e)) = plain_int(b, 0) {
                    let (s, e2) = scan_scalar(b, 0).ok().unwrap();
                    assert_eq!(e, e2, "{doc:?} cut {cut}");
                    assert_eq!(Some(v), parse_int(&b[s..e2]), "{doc:?} cut {cut}");
                }
            }
            // Far from the end of the slice the fast path takes every
            // plain number of up to 18 integer digits.
            let int_digits = num.trim_start_matches('-').split('.').next().unwrap().len();
            let plain = (1..=18).contains(&int_digits)
                && !matches!(end, "e3" | "x" | "a")
                && (end != ".5" || !num.contains('.'))
                && !num.ends_with('.');
            assert_eq!(plain_number(b, 0, true).is_some(), plain, "{doc:?}");
        }
    }

    /// Guessed keys read as scanned ones: in a changed order, with blanks
    /// before the colon, keys that extend or escape a known one.
    #[test]
    fn guessed_keys_read_as_scanned_keys() {
        for (k, text) in key::TEXT.iter().enumerate() {
            assert_eq!(key::id(text), k as u8);
        }
        // Keys out of their usual order, near-miss keys, a repeated key,
        // more blanks than last time (after a colon, before a `}`), a
        // blank before a colon, and torch's own indented layout: each
        // read as a token-by-token reading would, at every cut.
        let doc = br#"{"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"External id": 5}},
  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3, "dur": 2, "args": {"External id": 6}},
  {"ph": "X", "name": "c", "cat": "cpu_op", "pid": 1, "tid": 1, "tsx": 99, "ts": 5, "dur" : 2, "args": {"External idx": 7, "External id": 8}},
  {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": 1, "ts": 7, "ts": 9, "dur": 2, "args": {"Externa": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "e", "pid": 1, "tid": 1, "ts": 11, "dur": 2, "args": {"External id": 10}},
  {"ph": "X", "cat": "cpu_op", "name": "f", "pid": 1, "tid": 1, "ts":   13, "dur": 2, "args": {"External id": 11}  } ,
  {"ph": "X", "cat": "cpu_op", "name": "g", "pid": 1, "tid": 1, "ts": 15, "dur": 2, "args": {"External id":12}},
  {
    "ph": "X", "cat": "cpu_op", "name": "h", "pid": 1, "tid": 1,
    "ts": 17, "dur": 2,
    "args": {
      "External id": 13,"Record function id": 0, "Ev Idx": 1
    }
  },
  {
    "ph": "X", "cat": "cpu_op", "name": "i", "pid": 1, "tid": 1,
    "ts": 19, "dur": 2,
    "args": {
      "External id": 14,"Record function id": 0, "Ev Idx": 2
    }
  }
]}"#;
        for cut in 0..doc.len() {
            let mut p = Parser::new(Limits::default());
            let n = p.feed(&doc[..cut], false).unwrap();
            let mut rest = doc[n..cut].to_vec();
            rest.extend_from_slice(&doc[cut..]);
            p.feed(&rest, true).unwrap();
            let t = p.finish().unwrap();
            let names: Vec<&str> = (0..t.cpu.len()).map(|i| t.name(t.cpu.name()[i])).collect();
            assert_eq!(
                names,
                ["a", "b", "c", "d", "e", "f", "g", "h", "i"],
                "cut {cut}"
            );
            let ts = [1000, 3000, 5000, 9000, 11000, 13000, 15000, 17000, 19000];
            assert_eq!(t.cpu.ts().to_vec(), ts, "cut {cut}");
            let ids = [5, 6, 8, NONE, 10, 11, 12, 13, 14];
            assert_eq!(t.ids().cpu_external_id().to_vec(), ids, "cut {cut}");
        }
    }

    #[test]
    fn ints_accept_hex_and_strings() {
        assert_eq!(parse_int(b"0x1f"), Some(31));
        assert_eq!(parse_int(b"-1"), Some(-1));
        assert_eq!(parse_int(b"12.9"), Some(12));
        assert_eq!(parse_int(b"1751410836000000000"), Some(1751410836000000000));
    }

    #[test]
    fn unescapes_strings() {
        let mut out = Vec::new();
        unescape(br#"a\"b\\c\u00e9\ud83d\ude00"#, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\"b\\cé😀");
    }

    #[test]
    fn any_split_point_gives_the_same_trace() {
        let doc = br#"
{"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 10.5, "dur": 3,
   "args": {"External id": 4, "Input Dims": [[2, 3], [2,3], []], "Input type": ["c10::BFloat16", "float", "Scalar"]}},
  {"ph": "X", "cat": "kernel", "name": "k\"1", "pid": 0, "tid": 7, "ts": 12, "dur": 1.25,
   "args": {"correlation": 9, "grid": [1, 2, 3], "block": [4, 5, 6], "stream": "0x7"}}
 ], "baseTimeNanoseconds": 1751410836000000000}"#;
        // And after a UTF-8 byte order mark, cut inside it too.
        let with_bom = [&[0xEF, 0xBB, 0xBF][..], &doc[..]].concat();
        for (doc, cut) in (0..doc.len())
            .map(|c| (&doc[..], c))
            .chain((0..with_bom.len()).map(|c| (&with_bom[..], c)))
        {
            let mut p = Parser::new(Limits::default());
            let n = p.feed(&doc[..cut], false).unwrap();
            let mut rest = doc[n..cut].to_vec();
            rest.extend_from_slice(&doc[cut..]);
            let m = p.feed(&rest, true).unwrap();
            assert_eq!(m, rest.len());
            let t = p.finish().unwrap();
            assert_eq!(t.counters.events, 2, "cut {cut}");
            assert_eq!(t.cpu.ts().to_vec(), vec![10_500]);
            assert_eq!(t.name(t.cpu.shapes(0)), "[[2, 3], [2, 3], []]");
            assert_eq!(t.name(t.gpu.name()[0]), "k\"1");
            assert_eq!(t.gpu.dur().to_vec(), vec![1250]);
            assert_eq!(t.gpu.stream().to_vec(), vec![7]);
            assert_eq!(t.gpu.grid(0), [1, 2, 3]);
            assert_eq!(t.meta.base_time_ns, Some(1751410836000000000));
        }
    }

    /// Launch flows that repeat a stored correlation are dropped; a GPU op
    /// without a correlation still finds its launch through its flow, also
    /// when the flow's start was dropped.
    #[test]
    fn launch_flows_reach_ops_without_a_correlation() {
        let doc = br#"{"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 20, "args": {"External id": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 3, "args": {"correlation": 7}},
  {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 2, "name": "ac2g"},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 6, "dur": 3, "args": {}},
  {"ph": "s", "cat": "ac2g", "id": 8, "pid": 1, "tid": 1, "ts": 6, "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 30, "dur": 5, "args": {}},
  {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 30, "bp": "e", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 40, "dur": 5, "args": {}},
  {"ph": "f", "cat": "ac2g", "id": 8, "pid": 0, "tid": 7, "ts": 40, "bp": "e", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 50, "dur": 5, "args": {"correlation": 7}},
  {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 50, "bp": "e", "name": "ac2g"}
]}"#;
        let mut p = Parser::new(Limits::default());
        p.feed(doc, true).unwrap();
        let t = p.finish().unwrap();
        // Kept: the start without a correlation beside it (8) and the ends
        // at ops without one; dropped: start 7 and the end at kernel c.
        assert_eq!(t.ids().flows().id().to_vec(), vec![8, 7, 8]);
        assert_eq!(t.ids().flows().is_start(), [true, false, false]);
        let links = crate::analysis::links::link(&t);
        assert_eq!(links.launch.to_vec(), vec![1, 2, 1]);
        assert_eq!(links.attribution.by_flow, 2);
        assert_eq!(links.attribution.by_correlation, 1);
    }

    /// The word-at-a-time scan agrees with a byte-by-byte one for quotes
    /// and escapes at every position, and at every cut of the input.
    #[test]
    fn strings_scan_alike_at_every_length_and_cut() {
        fn reference(b: &[u8], i: usize) -> Option<(usize, usize, bool)> {
            let mut j = i + 1;
            let mut escaped = false;
            while j < b.len() {
                match b[j] {
                    b'"' => return Some((i + 1, j, escaped)),
                    b'\\' => {
                        escaped = true;
                        j += 2;
                    }
                    _ => j += 1,
                }
            }
            None
        }
        for len in 0..48 {
            for special in [
                None,
                Some(0),
                Some(7),
                Some(8),
                Some(15),
                Some(31),
                Some(32),
                Some(40),
            ] {
                let mut body: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
                if let Some(p) = special.filter(|&p| p + 1 < len) {
                    body[p] = b'\\';
                    body[p + 1] = b'"';
                }
                let mut doc = b"  \"".to_vec();
                doc.extend_from_slice(&body);
                doc.extend_from_slice(b"\", 1]");
                for cut in 2..=doc.len() {
                    let got = scan_string(&doc[..cut], 2)
                        .ok()
                        .map(|(s, next)| (s.start as usize, s.end as usize, s.escaped, next));
                    let want = reference(&doc[..cut], 2).map(|(a, e, x)| (a, e, x, e + 1));
                    assert_eq!(got, want, "len {len}, escape at {special:?}, cut {cut}");
                }
            }
        }
    }

    /// Nested values skipped 64 bytes at a time end where a byte-by-byte
    /// skip ends them (or stop alike: cut, or too deep), whatever they
    /// hold and wherever the slice is cut: strings with brackets and
    /// escaped quotes inside, a backslash as a block's last byte, deep
    /// nesting past the limit.
    #[test]
    fn nested_values_skip_alike_at_every_cut() {
        fn reference(b: &[u8], i: usize, max_depth: usize) -> Result<usize, Option<String>> {
            let (mut depth, mut j) = (0usize, i);
            loop {
                let c = *b.get(j).ok_or(None)?;
                match c {
                    b'"' => {
                        j = scan_string(b, j).map_err(|_| None)?.1;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > max_depth {
                            return Err(Some(format!(
                                "JSON nested deeper than {max_depth} levels"
                            )));
                        }
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        let pieces: [&[u8]; 12] = [
            b"[128, 128, 1]",
            b"[]",
            b"\"[1, 12, 4005, 128]\"",
            b"\"a \\\" ] }\"",
            b"{\"k\": [1, {\"x\": \"}\"}]}",
            b"\"\\\\\"",
            b"\"c10::BFloat16\"",
            b"\"\"",
            b"0.5",
            b"[[[[[[1]]]]]]",
            b"\"\\\\\\\"]\"",
            b"true",
        ];
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for round in 0..200 {
            let mut doc = b"  [".to_vec();
            for k in 0..next(40) {
                if k > 0 {
                    doc.extend_from_slice(if next(2) == 0 { b", " } else { b"," });
                }
                doc.extend_from_slice(pieces[next(pieces.len())]);
            }
            doc.extend_from_slice(b"], \"next\": 1}");
            let max_depth = [3, 6, 64][round % 3];
            for cut in 3..=doc.len() {
                let got = skip_value(&doc[..cut], 2, max_depth).map_err(|e| match e {
                    Stop::More => None,
                    Stop::Bad(msg) => Some(*msg),
                });
                let want = reference(&doc[..cut], 2, max_depth);
                assert_eq!(
                    got,
                    want,
                    "round {round}, cut {cut}: {}",
                    String::from_utf8_lossy(&doc)
                );
            }
        }
    }

    #[test]
    fn rejects_garbage_clearly() {
        for doc in [
            &b"hello"[..],
            b"{\"a\": 1}",
            b"[1, 2]",
            b"{\"traceEvents\": 5}",
            b"{\"traceEvents\": [{]}",
            b"[]",
            b"{\"traceEvents\": []}",
        ] {
            let mut p = Parser::new(Limits::default());
            let r = p.feed(doc, true).and_then(|_| p.finish().map(|_| 0));
            assert!(r.is_err(), "{}", String::from_utf8_lossy(doc));
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut doc = b"{\"traceEvents\": [{\"args\": {\"x\": ".to_vec();
        doc.extend(std::iter::repeat_n(b'[', 100_000));
        doc.extend(std::iter::repeat_n(b']', 100_000));
        doc.extend_from_slice(b"}}]}");
        let mut p = Parser::new(Limits::default());
        let err = p.feed(&doc, true).err().unwrap();
        assert!(err.to_string().contains("nested deeper"), "{err}");
    }
}
