//! The event scanner: one `traceEvents` entry's keys read by sight into a
//! [`RawEvent`] of spans into the input, and the read-ahead of a block's
//! events on the decoding thread ([`scan_block`]).

use super::*;

/// A pid or tid value as written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum RawId {
    #[default]
    Missing,
    Int(i64),
    Str(Span),
}

#[derive(Default)]
pub(crate) struct RawArgs {
    pub(crate) correlation: MaybeInt,
    pub(crate) external_id: MaybeInt,
    pub(crate) device: MaybeInt,
    pub(crate) stream: MaybeInt,
    pub(crate) grid: Option<[u32; 3]>,
    pub(crate) block: Option<[u32; 3]>,
    /// Where the `Input Dims` and `Input type` values' text lies.
    pub(crate) input_dims: Option<Span>,
    pub(crate) input_type: Option<Span>,
    pub(crate) bytes: MaybeInt,
    pub(crate) total_allocated: MaybeInt,
    pub(crate) total_reserved: MaybeInt,
    pub(crate) addr: MaybeInt,
    pub(crate) device_type: MaybeInt,
    pub(crate) device_id: MaybeInt,
    /// Where an `args.name` lies: a CUDA-graph kernel's annotation, which
    /// torch (2.13 and later, `export_chrome_trace(...,
    /// cuda_graph_annotations=...)`) splices into the kernel's args beside
    /// its `graph node id`.
    pub(crate) name: Option<Span>,
}

impl RawArgs {
    /// The integer field a key of `args` fills, if any.
    pub(crate) fn int_field(&mut self, id: u8) -> Option<&mut MaybeInt> {
        Some(match id {
            key::CORRELATION => &mut self.correlation,
            key::EXTERNAL_ID | key::EXTERNAL_ID_LOWER => &mut self.external_id,
            key::DEVICE => &mut self.device,
            key::STREAM => &mut self.stream,
            key::BYTES | key::BYTES_UPPER => &mut self.bytes,
            key::TOTAL_ALLOCATED => &mut self.total_allocated,
            key::TOTAL_RESERVED => &mut self.total_reserved,
            key::ADDR => &mut self.addr,
            key::DEVICE_TYPE => &mut self.device_type,
            key::DEVICE_ID => &mut self.device_id,
            _ => return None,
        })
    }
}

/// The fields of one event the analysis reads, before it is committed.
#[derive(Default)]
pub(crate) struct RawEvent {
    pub(crate) ph: u8,
    pub(crate) cat: Option<Span>,
    pub(crate) name: Option<Span>,
    pub(crate) pid: RawId,
    pub(crate) tid: RawId,
    pub(crate) ts: MaybeInt,
    pub(crate) dur: MaybeInt,
    pub(crate) id: MaybeInt,
    pub(crate) args: RawArgs,
    /// Where the `args` object's text lies (counters read every key).
    pub(crate) args_span: Option<Span>,
}

/// The events of one block read ahead by the decoding thread, not yet
/// committed: see [`scan_block`] and [`Parser::commit_scanned`].
#[derive(Default)]
pub(crate) struct Scanned {
    /// Where the first event read starts (its `{`).
    pub start: usize,
    /// The index after the last event read.
    pub end: usize,
    /// Each event read, with where it starts.
    pub(crate) events: Vec<(usize, RawEvent)>,
    /// The read-ahead's key guesses, kept from block to block.
    pub(crate) guess: KeyGuess,
}

impl Scanned {
    /// Whether no event was read (the block is then parsed as usual).
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// Reads ahead the events of a block in the middle of the event array, on
/// the decoding thread, while the parser is still before it: from the first
/// place in `b` after `from` that looks like the start of an event (`{`
/// after `}` and `,`), whole events until one is cut by the end of `b` or
/// anything else than `,` follows one. The guess is checked when the parser
/// reaches it ([`Parser::commit_scanned`]'s caller), so a `{` inside a string
/// costs the read-ahead, never a wrong trace.
///
/// `out` is a used `Scanned` whose space is reused (a fresh one per block
/// cost page faults).
pub(crate) fn scan_block(b: &[u8], from: usize, limits: &Limits, mut out: Scanned) -> Scanned {
    out.events.clear();
    let fits = b.len() <= u32::MAX as usize;
    let Some(start) = event_start_after(b, from).filter(|_| fits) else {
        return out;
    };
    (out.start, out.end) = (start, start);
    let mut i = start;
    loop {
        // Read in place: an event is a few hundred bytes, and copying it
        // out of `scan_event` and into the list cost more than its keys.
        out.events.push((i, RawEvent::default()));
        let ev = &mut out.events.last_mut().expect("just pushed").1;
        let Ok(next) = scan_event(b, i, limits.max_depth, &mut out.guess, ev) else {
            out.events.pop();
            break;
        };
        out.end = next;
        let j = skip_ws(b, next);
        match (b.get(j), b.get(skip_ws(b, j + 1))) {
            (Some(b','), Some(b'{')) => i = skip_ws(b, j + 1),
            _ => break,
        }
    }
    out
}

/// The first `{` at or after `from` whose previous non-blank bytes are `}`
/// and `,`: where an event probably starts.
pub(crate) fn event_start_after(b: &[u8], from: usize) -> Option<usize> {
    let before = |mut k: usize| {
        while k > from && matches!(b[k - 1], b' ' | b'\n' | b'\r' | b'\t') {
            k -= 1;
        }
        (k > from).then(|| (k - 1, b[k - 1]))
    };
    memchr::memchr_iter(b'{', b.get(from..)?)
        .map(|k| from + k)
        .find(|&k| match before(k) {
            Some((c, b',')) => matches!(before(c), Some((_, b'}'))),
            _ => false,
        })
}

/// Keys the parser knows by sight: their ids, and their text.
pub(crate) mod key {
    pub const PH: u8 = 0;
    pub const CAT: u8 = 1;
    pub const NAME: u8 = 2;
    pub const PID: u8 = 3;
    pub const TID: u8 = 4;
    pub const TS: u8 = 5;
    pub const DUR: u8 = 6;
    pub const ID: u8 = 7;
    pub const ARGS: u8 = 8;
    pub const BP: u8 = 9;
    pub const S: u8 = 10;
    pub const CORRELATION: u8 = 11;
    pub const EXTERNAL_ID: u8 = 12;
    pub const EXTERNAL_ID_LOWER: u8 = 13;
    pub const DEVICE: u8 = 14;
    pub const STREAM: u8 = 15;
    pub const BYTES: u8 = 16;
    pub const BYTES_UPPER: u8 = 17;
    pub const GRID: u8 = 18;
    pub const BLOCK: u8 = 19;
    pub const INPUT_DIMS: u8 = 20;
    pub const INPUT_DIMS_LOWER: u8 = 21;
    pub const INPUT_TYPE: u8 = 22;
    pub const TOTAL_ALLOCATED: u8 = 23;
    pub const DEVICE_TYPE: u8 = 24;
    pub const DEVICE_ID: u8 = 25;
    pub const RECORD_FUNCTION_ID: u8 = 26;
    pub const CONCRETE_INPUTS: u8 = 27;
    pub const INPUT_STRIDES: u8 = 28;
    pub const EV_IDX: u8 = 29;
    pub const FLOPS: u8 = 30;
    pub const CBID: u8 = 31;
    pub const QUEUED: u8 = 32;
    pub const CONTEXT: u8 = 33;
    pub const REGISTERS: u8 = 34;
    pub const SHARED_MEMORY: u8 = 35;
    pub const BLOCKS_PER_SM: u8 = 36;
    pub const WARPS_PER_SM: u8 = 37;
    pub const TOTAL_RESERVED: u8 = 38;
    pub const ADDR: u8 = 39;
    /// How many keys are known (ids `0..COUNT`).
    pub const COUNT: usize = 40;
    /// Any other key (or an escaped one): its value is skipped.
    pub const OTHER: u8 = COUNT as u8;
    /// Where an event starts: its first key is guessed too.
    pub const OPEN: u8 = COUNT as u8 + 1;
    /// Where an event's `args` start.
    pub const OPEN_ARGS: u8 = COUNT as u8 + 2;
    /// The end of an object (its `}`), where a key was guessed.
    pub const CLOSE: u8 = COUNT as u8 + 3;

    /// The text of each key, by id (a test holds [`id`] to it).
    #[cfg(test)]
    pub const TEXT: [&[u8]; COUNT] = [
        b"ph",
        b"cat",
        b"name",
        b"pid",
        b"tid",
        b"ts",
        b"dur",
        b"id",
        b"args",
        b"bp",
        b"s",
        b"correlation",
        b"External id",
        b"external id",
        b"device",
        b"stream",
        b"bytes",
        b"Bytes",
        b"grid",
        b"block",
        b"Input Dims",
        b"Input dims",
        b"Input type",
        b"Total Allocated",
        b"Device Type",
        b"Device Id",
        b"Record function id",
        b"Concrete Inputs",
        b"Input Strides",
        b"Ev Idx",
        b"flops",
        b"cbid",
        b"queued",
        b"context",
        b"registers per thread",
        b"shared memory",
        b"blocks per SM",
        b"warps per SM",
        b"Total Reserved",
        b"Addr",
    ];

    /// The id of a key's text (as written: an escaped key is none).
    pub fn id(text: &[u8]) -> u8 {
        match text {
            b"ph" => PH,
            b"cat" => CAT,
            b"name" => NAME,
            b"pid" => PID,
            b"tid" => TID,
            b"ts" => TS,
            b"dur" => DUR,
            b"id" => ID,
            b"args" => ARGS,
            b"bp" => BP,
            b"s" => S,
            b"correlation" => CORRELATION,
            b"External id" => EXTERNAL_ID,
            b"external id" => EXTERNAL_ID_LOWER,
            b"device" => DEVICE,
            b"stream" => STREAM,
            b"bytes" => BYTES,
            b"Bytes" => BYTES_UPPER,
            b"grid" => GRID,
            b"block" => BLOCK,
            b"Input Dims" => INPUT_DIMS,
            b"Input dims" => INPUT_DIMS_LOWER,
            b"Input type" => INPUT_TYPE,
            b"Total Allocated" => TOTAL_ALLOCATED,
            b"Device Type" => DEVICE_TYPE,
            b"Device Id" => DEVICE_ID,
            b"Record function id" => RECORD_FUNCTION_ID,
            b"Concrete Inputs" => CONCRETE_INPUTS,
            b"Input Strides" => INPUT_STRIDES,
            b"Ev Idx" => EV_IDX,
            b"flops" => FLOPS,
            b"cbid" => CBID,
            b"queued" => QUEUED,
            b"context" => CONTEXT,
            b"registers per thread" => REGISTERS,
            b"shared memory" => SHARED_MEMORY,
            b"blocks per SM" => BLOCKS_PER_SM,
            b"warps per SM" => WARPS_PER_SM,
            b"Total Reserved" => TOTAL_RESERVED,
            b"Addr" => ADDR,
            _ => OTHER,
        }
    }
}

/// What lies between one value of an object and the next value, as
/// written last time after a given key: the comma, the blanks, the next
/// key with its quotes, its colon and the blanks after it (`, "ts": `,
/// or `,\n    "ts": ` in an indented trace); or the blanks and the `}`
/// that close the object. Up to 32 bytes, in four words and masks, so that
/// the next time it is compared in place without scanning it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Gap {
    words: [u64; 4],
    masks: [u64; 4],
    /// Its length in bytes (0: none seen yet).
    len: u8,
    /// The key it ends with ([`key::CLOSE`]: it closes the object).
    next: u8,
}

impl Gap {
    /// The longest gap kept.
    const MAX: usize = 32;

    fn of(text: &[u8], next: u8) -> Gap {
        let mut padded = [0u8; Self::MAX];
        padded[..text.len()].copy_from_slice(text);
        let mut g = Gap {
            len: text.len() as u8,
            next,
            ..Gap::default()
        };
        for k in 0..4 {
            g.words[k] =
                u64::from_le_bytes(padded[8 * k..8 * k + 8].try_into().expect("eight bytes"));
            let bytes = text.len().saturating_sub(8 * k).min(8);
            g.masks[k] = if bytes == 8 {
                !0
            } else {
                (1u64 << (8 * bytes)) - 1
            };
        }
        g
    }

    /// Whether the bytes at `j` start with this gap.
    #[inline(always)]
    fn at(&self, b: &[u8], j: usize) -> bool {
        let Some(w) = b.get(j..j + Self::MAX) else {
            return false;
        };
        let word =
            |k: usize| u64::from_le_bytes(w[8 * k..8 * k + 8].try_into().expect("eight bytes"));
        self.len != 0
            && ((word(0) ^ self.words[0]) & self.masks[0]
                | (word(1) ^ self.words[1]) & self.masks[1]
                | (word(2) ^ self.words[2]) & self.masks[2]
                | (word(3) ^ self.words[3]) & self.masks[3])
                == 0
    }
}

/// Guesses each key, with what stands before it, from the key before it:
/// Kineto writes the keys of an event in the same order and spacing every
/// time (per category), so the [`Gap`] that followed a key last time is
/// compared in place first, and the bytes are read one token at a time
/// only when it differs. The bytes compared are the very bytes that were
/// read, so a guess that holds reads what the slow path would. One rule
/// for the parser and the read-ahead; each keeps its own guesses.
pub(crate) struct KeyGuess {
    /// By key id (and [`key::OTHER`], [`key::OPEN`], [`key::OPEN_ARGS`]):
    /// the last [`WAYS`] gaps that followed
    /// it, the latest first (an event's `args` start with one key in an op
    /// and another in a kernel).
    gaps: Box<[[Gap; WAYS]; SLOTS]>,
}

impl Default for KeyGuess {
    fn default() -> Self {
        KeyGuess {
            gaps: Box::new([[Gap::default(); WAYS]; SLOTS]),
        }
    }
}

/// Rows of [`KeyGuess`]: every id a key can follow (up to
/// [`key::OPEN_ARGS`]), rounded up to a power of two so that indexing by
/// an id needs no bounds check.
const SLOTS: usize = (key::OPEN_ARGS as usize + 1).next_power_of_two();

/// Gaps kept after each key: Kineto's categories put different keys after
/// the same one (an op's `args` open with `External id`, a kernel's with
/// `queued`, a runtime call's with `cbid`). callgrind on the H200 story's
/// capture: one way missed 412,217 of its 2.3 M keys, two 63,905, four
/// 16,896 (1,263.6 M instructions with two, 1,259.7 M with four).
const WAYS: usize = 4;

/// Which object [`KeyGuess::next`] reads in, for its errors.
#[derive(Clone, Copy)]
pub(crate) enum Within {
    Event,
    Args,
}

impl KeyGuess {
    /// From `j`, where a value of an object ends (or, after
    /// [`key::OPEN`] or [`key::OPEN_ARGS`], where its `{` stands): reads
    /// through the next key, its colon and the blanks after it, or through
    /// the `}` that closes the object. Returns the key's id and where its
    /// value starts, or [`key::CLOSE`] and the index after the `}`.
    #[inline(always)]
    pub(crate) fn next(
        &mut self,
        b: &[u8],
        j: usize,
        prev: u8,
        within: Within,
    ) -> Step<(u8, usize)> {
        for g in &self.gaps[prev as usize % SLOTS] {
            if g.at(b, j) {
                return Ok((g.next, j + g.len as usize));
            }
        }
        self.next_read(b, j, prev, within)
    }

    /// [`next`](Self::next) a token at a time; keeps the gap read.
    #[inline(never)]
    fn next_read(&mut self, b: &[u8], j: usize, prev: u8, within: Within) -> Step<(u8, usize)> {
        let open = prev == key::OPEN || prev == key::OPEN_ARGS;
        let mut k = skip_ws(b, if open { j + 1 } else { j });
        let c = at(b, k)?;
        let (next, end) = if c == b'}' {
            (key::CLOSE, k + 1)
        } else {
            if !open {
                if c != b',' {
                    let within = match within {
                        Within::Event => "an event",
                        Within::Args => "args",
                    };
                    return bad(format!(
                        "expected ',' or '}}' in {within}, found {}",
                        show_byte(c)
                    ));
                }
                k = skip_ws(b, k + 1);
            }
            if at(b, k)? != b'"' {
                return bad(format!("expected a string, found {}", show_byte(b[k])));
            }
            let (text, after) = scan_string(b, k)?;
            let id = if text.escaped {
                key::OTHER
            } else {
                key::id(text.bytes(b))
            };
            let colon = skip_ws(b, after);
            if at(b, colon)? != b':' {
                return bad("expected ':' after a key");
            }
            (id, skip_ws(b, colon + 1))
        };
        // A gap cut by the end of the slice is not kept: its blanks may go on.
        if end - j <= Gap::MAX && end < b.len() {
            let gaps = &mut self.gaps[prev as usize % SLOTS];
            gaps.rotate_right(1);
            gaps[0] = Gap::of(&b[j..end], next);
        }
        Ok((next, end))
    }
}

/// Reads one event object at `i` (its `{`) into `ev` (a default one): the
/// fields the analysis needs; returns the index after it. Reads only the
/// bytes: the parser commits the event, on this thread or after the
/// decoding thread scanned a block ([`scan_block`]).
pub(crate) fn scan_event(
    b: &[u8],
    i: usize,
    max_depth: usize,
    guess: &mut KeyGuess,
    ev: &mut RawEvent,
) -> Step<usize> {
    let mut j = i;
    let mut prev = key::OPEN;
    loop {
        let (id, next) = guess.next(b, j, prev, Within::Event)?;
        if id == key::CLOSE {
            return Ok(next);
        }
        prev = id;
        j = skip_ws(b, next);
        j = match id {
            key::PH => {
                let (s, next) = scan_string(b, j)?;
                ev.ph = s.bytes(b).first().copied().unwrap_or(0);
                next
            }
            key::CAT => {
                let (s, next) = string_or_skip(b, j, max_depth)?;
                ev.cat = s;
                next
            }
            key::NAME => {
                let (s, next) = string_or_skip(b, j, max_depth)?;
                ev.name = s;
                next
            }
            key::PID => {
                let (id, next) = raw_id(b, j)?;
                ev.pid = id;
                next
            }
            key::TID => {
                let (id, next) = raw_id(b, j)?;
                ev.tid = id;
                next
            }
            key::TS => {
                let (v, next) = time_value(b, j)?;
                ev.ts = v.into();
                next
            }
            key::DUR => {
                let (v, next) = time_value(b, j)?;
                ev.dur = v.into();
                next
            }
            key::ID => {
                let (v, next) = int_value(b, j)?;
                ev.id = v.into();
                next
            }
            key::ARGS => {
                let next = scan_args(b, j, &mut ev.args, max_depth, guess)?;
                ev.args_span = Some(Span::new(j, next, false));
                next
            }
            _ => skip_value(b, j, max_depth)?,
        };
    }
}

pub(crate) fn string_or_skip(b: &[u8], j: usize, max_depth: usize) -> Step<(Option<Span>, usize)> {
    if at(b, j)? == b'"' {
        let (s, next) = scan_string(b, j)?;
        Ok((Some(s), next))
    } else {
        Ok((None, skip_value(b, j, max_depth)?))
    }
}

pub(crate) fn scan_args(
    b: &[u8],
    i: usize,
    args: &mut RawArgs,
    max_depth: usize,
    guess: &mut KeyGuess,
) -> Step<usize> {
    if at(b, i)? != b'{' {
        return skip_value(b, i, max_depth);
    }
    let mut j = i;
    let mut prev = key::OPEN_ARGS;
    loop {
        let (id, next) = guess.next(b, j, prev, Within::Args)?;
        if id == key::CLOSE {
            return Ok(next);
        }
        prev = id;
        j = skip_ws(b, next);
        let depth = max_depth.saturating_sub(2);
        j = match id {
            key::GRID => {
                let (v, n) = dim3_value(b, j, depth)?;
                args.grid = v;
                n
            }
            key::BLOCK => {
                let (v, n) = dim3_value(b, j, depth)?;
                args.block = v;
                n
            }
            key::INPUT_DIMS | key::INPUT_DIMS_LOWER => {
                let n = skip_value(b, j, depth)?;
                args.input_dims = Some(Span::new(j, n, false));
                n
            }
            key::INPUT_TYPE => {
                let n = skip_value(b, j, depth)?;
                args.input_type = Some(Span::new(j, n, false));
                n
            }
            key::NAME => {
                let (s, n) = string_or_skip(b, j, depth)?;
                args.name = s;
                n
            }
            _ => match args.int_field(id) {
                Some(field) => {
                    let (v, n) = int_value(b, j)?;
                    *field = v.into();
                    n
                }
                None => skip_value(b, j, depth)?,
            },
        };
    }
}

pub(crate) fn raw_id(b: &[u8], i: usize) -> Step<(RawId, usize)> {
    if let Some((v, end)) = plain_int(b, i) {
        return Ok((RawId::Int(v), end));
    }
    if at(b, i)? == b'"' {
        let (s, next) = scan_string(b, i)?;
        return Ok((RawId::Str(s), next));
    }
    let (s, e) = scan_scalar(b, i)?;
    Ok((parse_int(&b[s..e]).map_or(RawId::Missing, RawId::Int), e))
}

pub(crate) fn time_value(b: &[u8], i: usize) -> Step<(Option<i64>, usize)> {
    if let Some((neg, int, frac, end)) = plain_number(b, i, true) {
        // As `parse_time_ns`: out of range is a bad time, left to it.
        if let Some(ns) = int.checked_mul(1000).and_then(|v| v.checked_add(frac)) {
            return Ok((Some(if neg { -ns } else { ns }), end));
        }
    }
    if at(b, i)? == b'"' {
        let (s, next) = scan_string(b, i)?;
        return Ok((parse_time_ns(s.bytes(b)), next));
    }
    let (s, e) = scan_scalar(b, i)?;
    match parse_time_ns(&b[s..e]) {
        Some(v) => Ok((Some(v), e)),
        None if matches!(b[s], b'n' | b't' | b'f') => Ok((None, e)),
        None => bad(format!(
            "bad time value {}",
            String::from_utf8_lossy(&b[s..e.min(s + 40)])
        )),
    }
}
