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

use super::store::*;
use super::TraceError;
use hashbrown::HashMap;

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

/// Why a parsing step stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The slice ended inside the value: feed more bytes.
    More,
    /// The input is not a valid trace. Boxed: a one-word `Stop` keeps
    /// every `Step<usize>` in two registers on the hot path.
    #[expect(
        clippy::box_collection,
        reason = "a thin pointer, so that Step<usize> is two words"
    )]
    Bad(Box<String>),
}

type Step<T> = Result<T, Stop>;

fn bad<T>(msg: impl Into<String>) -> Step<T> {
    Err(Stop::Bad(Box::new(msg.into())))
}

#[inline(always)]
fn at(b: &[u8], i: usize) -> Step<u8> {
    match b.get(i) {
        Some(&c) => Ok(c),
        None => Err(Stop::More),
    }
}

#[inline(always)]
fn skip_ws(b: &[u8], i: usize) -> usize {
    // Most calls land on a token or on the one space after `,` or `:`.
    match b.get(i) {
        Some(&c) if c > b' ' => i,
        Some(b' ') if b.get(i + 1).is_some_and(|&c| c > b' ') => i + 1,
        _ => skip_ws_run(b, i),
    }
}

/// Skips a run of whitespace: Kineto indents each line, so runs of spaces
/// are counted eight bytes at a time.
#[inline(never)]
fn skip_ws_run(b: &[u8], mut i: usize) -> usize {
    loop {
        match b.get(i) {
            Some(b' ') => match b.get(i..i + 8) {
                Some(w) => {
                    let w = u64::from_le_bytes(w.try_into().expect("eight bytes"));
                    // Leading bytes equal to a space become zero (at least one).
                    i += (w ^ (SWAR_ONES * b' ' as u64)).trailing_zeros() as usize / 8;
                }
                None => i += 1,
            },
            Some(b'\n' | b'\r' | b'\t') => i += 1,
            _ => return i,
        }
    }
}

/// A string's content span in the current slice (slices are under 4 GiB:
/// [`Parser::feed`] refuses longer ones). Four-byte offsets keep the events
/// read ahead small ([`Scanned`]).
#[derive(Clone, Copy, Default, Debug)]
struct Span {
    start: u32,
    end: u32,
    escaped: bool,
}

impl Span {
    fn new(start: usize, end: usize, escaped: bool) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
            escaped,
        }
    }

    fn bytes<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        &b[self.start as usize..self.end as usize]
    }
}

/// An integer field of an event that may be absent, in eight bytes:
/// `i64::MIN` (which no number the parser reads gives) means absent.
#[derive(Clone, Copy, Debug)]
struct MaybeInt(i64);

impl MaybeInt {
    const ABSENT: MaybeInt = MaybeInt(i64::MIN);

    fn get(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }
}

impl Default for MaybeInt {
    fn default() -> Self {
        MaybeInt::ABSENT
    }
}

impl From<Option<i64>> for MaybeInt {
    fn from(v: Option<i64>) -> Self {
        // Clamped by one: a number read as i64::MIN stays present.
        v.map_or(MaybeInt::ABSENT, |v| MaybeInt(v.max(i64::MIN + 1)))
    }
}

/// `0x01` in every byte of a word.
const SWAR_ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `w` that is zero (and maybe of bytes above
/// the first zero one: only the lowest flag is exact).
#[inline(always)]
fn zero_byte(w: u64) -> u64 {
    w.wrapping_sub(SWAR_ONES) & !w & (SWAR_ONES << 7)
}

/// Scans a string starting at its opening quote; returns its content span and
/// the index after the closing quote.
///
/// Inlined where it is called: a string that ends within its first 16
/// bytes without an escape (most keys, categories, dtypes and op names)
/// costs two word loads and a few operations; the rest go to
/// [`scan_string_long`].
#[inline(always)]
fn scan_string(b: &[u8], i: usize) -> Step<(Span, usize)> {
    let start = i + 1;
    if let (Some(b'"'), Some(w)) = (b.get(i), b.get(start..start + 16)) {
        let lo = u64::from_le_bytes(w[..8].try_into().expect("eight bytes"));
        let hi = u64::from_le_bytes(w[8..].try_into().expect("eight bytes"));
        let special = |w: u64| {
            zero_byte(w ^ (SWAR_ONES * b'"' as u64)) | zero_byte(w ^ (SWAR_ONES * b'\\' as u64))
        };
        // The lowest flagged byte is exact (borrows only run upward).
        let (m, at) = match special(lo) {
            0 => (special(hi), start + 8),
            m => (m, start),
        };
        if m != 0 {
            let p = at + (m.trailing_zeros() / 8) as usize;
            if b[p] == b'"' {
                let span = Span::new(start, p, false);
                return Ok((span, p + 1));
            }
        }
    }
    scan_string_long(b, i)
}

/// [`scan_string`] for strings longer than 16 bytes, with escapes, or
/// near the end of the slice.
#[inline(never)]
fn scan_string_long(b: &[u8], i: usize) -> Step<(Span, usize)> {
    if at(b, i)? != b'"' {
        return bad(format!("expected a string, found {}", show_byte(b[i])));
    }
    let start = i + 1;
    // Most strings of a trace are short (keys, categories, dtypes): eight
    // bytes at a time in a word (SWAR) beats memchr's setup; long ones
    // (kernel names) and escapes go on to memchr.
    let mut j = start;
    let short = (start + 32).min(b.len());
    let special = loop {
        if j + 8 <= short {
            let w = u64::from_le_bytes(b[j..j + 8].try_into().expect("eight bytes"));
            let m = zero_byte(w ^ (SWAR_ONES * b'"' as u64))
                | zero_byte(w ^ (SWAR_ONES * b'\\' as u64));
            if m != 0 {
                // The lowest flagged byte is exact (borrows only run upward).
                break Some(j + (m.trailing_zeros() / 8) as usize);
            }
            j += 8;
        } else {
            let k = b[j..short].iter().position(|&c| c == b'"' || c == b'\\');
            break match k {
                Some(k) => Some(j + k),
                None => {
                    j = short;
                    None
                }
            };
        }
    };
    if let Some(p) = special {
        if b[p] == b'"' {
            return Ok((Span::new(start, p, false), p + 1));
        }
        // An escape: memchr below starts at it.
        j = p;
    }
    let mut escaped = false;
    loop {
        match memchr::memchr2(b'"', b'\\', &b[j..]) {
            None => return Err(Stop::More),
            Some(k) => {
                let p = j + k;
                if b[p] == b'"' {
                    return Ok((Span::new(start, p, escaped), p + 1));
                }
                escaped = true;
                if p + 1 >= b.len() {
                    return Err(Stop::More);
                }
                j = p + 2;
            }
        }
    }
}

/// Follows a JSON value's text byte by byte: which bytes belong to a string.
#[derive(Default)]
struct InString {
    on: bool,
    escape: bool,
}

impl InString {
    /// Whether `c`, the next byte, is part of a string (its quotes included).
    fn step(&mut self, c: u8) -> bool {
        if self.on {
            if self.escape {
                self.escape = false;
            } else if c == b'\\' {
                self.escape = true;
            } else if c == b'"' {
                self.on = false;
            }
            true
        } else {
            self.on = c == b'"';
            self.on
        }
    }
}

/// Writes a JSON value's text into `out` in the canonical spacing of
/// [`Parser::intern_compact`]: whitespace outside strings removed, one space
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

/// Whether a JSON value's text is already in [`Parser::intern_compact`]'s
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

fn show_byte(c: u8) -> String {
    if c.is_ascii_graphic() {
        format!("'{}'", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

/// Decodes JSON string escapes into `out`.
fn unescape(raw: &[u8], out: &mut Vec<u8>) -> Step<()> {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *raw
            .get(i + 1)
            .ok_or_else(|| Stop::Bad(Box::new("bad escape".into())))?;
        i += 2;
        let ch = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(raw, i)?;
                i += 4;
                let code = if (0xD800..0xDC00).contains(&hi)
                    && raw.get(i) == Some(&b'\\')
                    && raw.get(i + 1) == Some(&b'u')
                {
                    let lo = hex4(raw, i + 2)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        i += 6;
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    } else {
                        hi
                    }
                } else {
                    hi
                };
                char::from_u32(code).unwrap_or('\u{fffd}')
            }
            other => return bad(format!("bad escape \\{}", other as char)),
        };
        let mut tmp = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
    }
    Ok(())
}

fn hex4(raw: &[u8], i: usize) -> Step<u32> {
    let s = raw
        .get(i..i + 4)
        .ok_or_else(|| Stop::Bad(Box::new("bad \\u escape".into())))?;
    let s = std::str::from_utf8(s).map_err(|_| Stop::Bad(Box::new("bad \\u escape".into())))?;
    u32::from_str_radix(s, 16).map_err(|_| Stop::Bad(Box::new("bad \\u escape".into())))
}

/// Span of a number or literal (`true`, `false`, `null`) starting at `i`.
#[inline]
fn scan_scalar(b: &[u8], i: usize) -> Step<(usize, usize)> {
    let c = at(b, i)?;
    if !(c == b'-' || c.is_ascii_digit() || c == b't' || c == b'f' || c == b'n') {
        return bad(format!("unexpected {}", show_byte(c)));
    }
    let mut j = i + 1;
    while j < b.len()
        && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' | b'a'..=b'z')
    {
        j += 1;
    }
    if j >= b.len() {
        return Err(Stop::More);
    }
    Ok((i, j))
}

/// Whether `c` continues a number or literal (what [`scan_scalar`] takes).
#[inline(always)]
fn is_scalar_byte(c: u8) -> bool {
    matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' | b'a'..=b'z')
}

/// The common case of a number, read in the same pass that finds its end:
/// `-?[0-9]{1,18}` then, with `decimals`, an optional `.` and digits.
/// Returns the sign, the integer part, the first three decimals as
/// nanoseconds of a microsecond (rounded on the fourth) and the index after
/// the number, or
/// `None` for anything else (exponents, hex, a slice that ends inside the
/// number...), which the general path ([`scan_scalar`] then
/// [`parse_time_ns`] or [`parse_int`]) decides: one rule, two speeds.
#[inline(always)]
fn plain_number(b: &[u8], i: usize, decimals: bool) -> Option<(bool, i64, i64, usize)> {
    let neg = b.get(i) == Some(&b'-');
    let start = i + neg as usize;
    let mut j = start;
    let mut int: i64 = 0;
    while let Some(&c) = b.get(j) {
        if !c.is_ascii_digit() {
            break;
        }
        if j - start == 18 {
            // A 19th digit may not fit: the general path decides.
            return None;
        }
        int = int * 10 + (c - b'0') as i64;
        j += 1;
    }
    if j == start {
        return None;
    }
    let mut frac: i64 = 0;
    if decimals && b.get(j) == Some(&b'.') {
        j += 1;
        let first = j;
        let mut n = 0;
        while let Some(&c) = b.get(j) {
            if !c.is_ascii_digit() {
                break;
            }
            if n < 3 {
                frac = frac * 10 + (c - b'0') as i64;
            } else if n == 3 && c >= b'5' {
                frac += 1;
            }
            n += 1;
            j += 1;
        }
        if j == first {
            return None;
        }
        for _ in n..3 {
            frac *= 10;
        }
    }
    if is_scalar_byte(*b.get(j)?) {
        return None;
    }
    Some((neg, int, frac, j))
}

/// A plain decimal integer (see [`plain_number`]).
#[inline(always)]
fn plain_int(b: &[u8], i: usize) -> Option<(i64, usize)> {
    plain_number(b, i, false).map(|(neg, v, _, end)| (if neg { -v } else { v }, end))
}

/// The bytes [`skip_value`] stops at inside an array or object.
static STRUCTURAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t
};

/// Skips one JSON value of any kind, checking bracket balance and depth.
fn skip_value(b: &[u8], i: usize, max_depth: usize) -> Step<usize> {
    match at(b, i)? {
        b'"' => Ok(scan_string(b, i)?.1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                // Bytes that are none of `"`, `[`, `]`, `{`, `}` (numbers,
                // commas, blanks) are passed over in a tight loop.
                while b.get(j).is_some_and(|&c| !STRUCTURAL[c as usize]) {
                    j += 1;
                }
                let c = at(b, j)?;
                match c {
                    b'"' => {
                        j = scan_string(b, j)?.1;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > max_depth {
                            return bad(format!("JSON nested deeper than {max_depth} levels"));
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
        _ => Ok(scan_scalar(b, i)?.1),
    }
}

/// Parses a decimal microsecond value (`1694128201428460`,
/// `1712195495519695.812`, `-3.5`, `1.2e3`) into integer nanoseconds, exactly
/// for up to three decimals (digits past the third are rounded).
pub fn parse_time_ns(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let mut int: i64 = 0;
    let mut i = 0;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int = int
            .checked_mul(10)?
            .checked_add((digits[i] - b'0') as i64)?;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac: i64 = 0;
    let mut round_up = false;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        let mut n = 0;
        let start = i;
        while i < digits.len() && digits[i].is_ascii_digit() {
            if n < 3 {
                frac = frac * 10 + (digits[i] - b'0') as i64;
                n += 1;
            } else if n == 3 {
                round_up = digits[i] >= b'5';
                n += 1;
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        while n < 3 {
            frac *= 10;
            n += 1;
        }
    }
    if i < digits.len() {
        if matches!(digits[i], b'e' | b'E') {
            // Rare: fall back to floating point.
            let text = std::str::from_utf8(s).ok()?;
            let v: f64 = text.parse().ok()?;
            let ns = (v * 1000.0).round();
            return if ns.is_finite() && ns.abs() < 9.0e18 {
                Some(ns as i64)
            } else {
                None
            };
        }
        return None;
    }
    let mut ns = int.checked_mul(1000)?.checked_add(frac)?;
    if round_up {
        ns += 1;
    }
    Some(if neg { -ns } else { ns })
}

/// Parses an integer; a fractional part is truncated, `0x` hex is accepted
/// (AMD writes `"stream": "0x0"`).
fn parse_int(s: &[u8]) -> Option<i64> {
    if let Some(hex) = s.strip_prefix(b"0x") {
        return i64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok();
    }
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    let mut n = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
        n += 1;
    }
    if n == 0 {
        return None;
    }
    if n < digits.len() && matches!(digits[n], b'e' | b'E') {
        let f: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
        return if f.is_finite() && f.abs() < 9.0e18 {
            Some(f as i64)
        } else {
            None
        };
    }
    Some(if neg { -v } else { v })
}

/// An integer written as a JSON number or a string holding one.
fn int_value(b: &[u8], i: usize) -> Step<(Option<i64>, usize)> {
    if let Some((v, end)) = plain_int(b, i) {
        return Ok((Some(v), end));
    }
    if at(b, i)? == b'"' {
        let (span, next) = scan_string(b, i)?;
        return Ok((parse_int(span.bytes(b)), next));
    }
    let (s, e) = scan_scalar(b, i)?;
    Ok((parse_int(&b[s..e]), e))
}

/// `[x, y, z]` of small integers (grid and block).
fn dim3_value(b: &[u8], i: usize, max_depth: usize) -> Step<(Option<[u32; 3]>, usize)> {
    if at(b, i)? != b'[' {
        return Ok((None, skip_value(b, i, max_depth)?));
    }
    let mut out = [0u32; 3];
    let mut j = skip_ws(b, i + 1);
    let mut n = 0;
    loop {
        if at(b, j)? == b']' {
            return Ok((if n == 3 { Some(out) } else { None }, j + 1));
        }
        let (v, next) = int_value(b, j)?;
        if n < 3 {
            out[n] = v.unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
        }
        n += 1;
        j = skip_ws(b, next);
        match at(b, j)? {
            b',' => j = skip_ws(b, j + 1),
            b']' => {}
            c => {
                return bad(format!(
                    "expected ',' or ']' in a list, found {}",
                    show_byte(c)
                ))
            }
        }
    }
}

/// A pid or tid value as written.
#[derive(Clone, Copy, Debug, Default)]
enum RawId {
    #[default]
    Missing,
    Int(i64),
    Str(Span),
}

#[derive(Default)]
struct RawArgs {
    correlation: MaybeInt,
    external_id: MaybeInt,
    device: MaybeInt,
    stream: MaybeInt,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    /// Where the `Input Dims` and `Input type` values' text lies.
    input_dims: Option<Span>,
    input_type: Option<Span>,
    bytes: MaybeInt,
    total_allocated: MaybeInt,
    device_type: MaybeInt,
    device_id: MaybeInt,
}

impl RawArgs {
    /// The integer field a key of `args` fills, if any.
    fn int_field(&mut self, id: u8) -> Option<&mut MaybeInt> {
        Some(match id {
            key::CORRELATION => &mut self.correlation,
            key::EXTERNAL_ID | key::EXTERNAL_ID_LOWER => &mut self.external_id,
            key::DEVICE => &mut self.device,
            key::STREAM => &mut self.stream,
            key::BYTES | key::BYTES_UPPER => &mut self.bytes,
            key::TOTAL_ALLOCATED => &mut self.total_allocated,
            key::DEVICE_TYPE => &mut self.device_type,
            key::DEVICE_ID => &mut self.device_id,
            _ => return None,
        })
    }
}

/// The fields of one event the analysis reads, before it is committed.
#[derive(Default)]
struct RawEvent {
    ph: u8,
    cat: Option<Span>,
    name: Option<Span>,
    pid: RawId,
    tid: RawId,
    ts: MaybeInt,
    dur: MaybeInt,
    id: MaybeInt,
    args: RawArgs,
}

/// How a `cat` value is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CatClass {
    Cpu(CpuKind),
    Gpu(GpuKind),
    Python,
    LaunchFlow,
    /// Known categories the analysis does not need (`Trace`, `fwdbwd`, ...).
    Ignored,
    /// Known, kept in the "other" table (`cuda_sync`, `cuda_profiler_range`).
    KeptKnown,
    /// Not known to this analyzer: kept in the "other" table and reported.
    Unknown,
}

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
        "" | "Trace" | "fwdbwd" | "cpu_instant_event" | "overhead" | "python_function_flow" => {
            CatClass::Ignored
        }
        "cuda_sync" | "cuda_profiler_range" => CatClass::KeptKnown,
        _ => CatClass::Unknown,
    }
}

/// Bounds of stored times, ns: any start plus any duration stays far from
/// `i64` overflow, and so do differences of starts.
const MIN_TS: i64 = -(1 << 60);
const MAX_TS: i64 = 1 << 61;
const MAX_DUR: i64 = 1 << 60;
/// Interned strings are addressed with 32-bit offsets.
const MAX_NAME_BYTES: usize = 2 << 30;

/// Whether the analyzer interprets a `cat` value (or knowingly ignores it).
pub fn is_known_category(cat: &str) -> bool {
    classify_cat(cat) != CatClass::Unknown
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
    trace: Trace,
    track_ids: HashMap<Track, u32>,
    cat_class: HashMap<Sym, CatClass>,
    saw_events: bool,
    consumed: u64,
    scratch: Vec<u8>,
    scratch2: Vec<u8>,
    memory_peaks: HashMap<(i64, i64), i64>,
    /// Shapes and dtypes as written, with their interned canonical text.
    compact: HashMap<Box<[u8]>, Sym>,
    /// The last event's `cat` text (unescaped), its id and class.
    last_cat: (Vec<u8>, Sym, CatClass),
    /// The last numeric (pid, tid) pair and its track.
    last_track: (Track, u32),
    /// Which key follows which (see [`KeyGuess`]).
    guess: KeyGuess,
}

impl Parser {
    /// A parser at the start of a document.
    pub fn new(limits: Limits) -> Self {
        Parser {
            state: State::Start,
            limits,
            trace: Trace::new(),
            track_ids: HashMap::new(),
            cat_class: HashMap::new(),
            saw_events: false,
            consumed: 0,
            scratch: Vec::new(),
            scratch2: Vec::new(),
            memory_peaks: HashMap::new(),
            compact: HashMap::new(),
            // Never equal to a `cat` text: those are quoted strings' contents.
            last_cat: (b"\"".to_vec(), 0, CatClass::Ignored),
            guess: KeyGuess::default(),
            // Not a pair any event has: track ids of numbers are looked up.
            last_track: (
                Track {
                    pid: i64::MIN,
                    tid: i64::MIN,
                },
                0,
            ),
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
                        self.trace.counters.events
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
                    self.trace.counters.events
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
                self.trace.counters.events
            ),
            _ => "before the end of the top-level object".to_string(),
        };
        TraceError::Truncated(format!("the JSON ends {where_}"))
    }

    /// Finishes parsing and returns the trace.
    pub fn finish(mut self) -> Result<Trace, TraceError> {
        if self.state != State::Done {
            return Err(self.truncated());
        }
        if !self.saw_events {
            return Err(TraceError::NotATrace(
                "the JSON has no traceEvents array: not a Kineto/Chrome trace".into(),
            ));
        }
        if self.trace.counters.events == 0 {
            return Err(TraceError::NotATrace("the trace has no events".into()));
        }
        let mut peaks: Vec<(String, i64)> = self
            .memory_peaks
            .iter()
            .map(|(&(ty, id), &v)| {
                let dev = match ty {
                    0 => "cpu".to_string(),
                    1 => format!("cuda:{id}"),
                    6 => format!("hip:{id}"),
                    other => format!("device{other}:{id}"),
                };
                (dev, v)
            })
            .collect();
        peaks.sort();
        self.trace.counters.peak_memory = peaks;
        self.trace.counters.json_bytes = self.consumed;
        Ok(self.trace)
    }

    /// One atomic step from `i`: `Some(next)` to continue, `None` when the
    /// document is complete and only whitespace remains in `b`.
    fn step(&mut self, b: &[u8], i: usize) -> Step<Option<usize>> {
        let i = skip_ws(b, i);
        match self.state {
            State::Start => {
                // A UTF-8 byte order mark is tolerated.
                let i = if b[i.min(b.len())..].starts_with(&[0xEF, 0xBB, 0xBF]) {
                    skip_ws(b, i + 3)
                } else {
                    i
                };
                match at(b, i)? {
                    b'{' => self.state = State::TopFirstKey,
                    b'[' => {
                        self.trace.meta.layout_array = true;
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
        self.state = if self.trace.meta.layout_array {
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
        let meta = &mut self.trace.meta;
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

    /// Interns a string span, decoding escapes when present.
    fn intern_span(&mut self, b: &[u8], s: Span) -> Step<Sym> {
        if s.escaped {
            let mut out = std::mem::take(&mut self.scratch);
            unescape(s.bytes(b), &mut out)?;
            let sym = self.trace.names.intern_bytes(&out);
            self.scratch = out;
            Ok(sym)
        } else {
            Ok(self.trace.names.intern_bytes(s.bytes(b)))
        }
    }

    /// Interns a JSON value (shapes, dtypes) in a canonical spacing:
    /// whitespace outside strings removed, one space after each comma.
    fn intern_compact(&mut self, raw: &[u8]) -> Sym {
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
            compact_into(raw, &mut self.scratch2);
            self.trace.names.intern_bytes(&self.scratch2)
        };
        self.compact.insert(raw.into(), sym);
        sym
    }

    fn id_value(&mut self, b: &[u8], id: RawId) -> Step<TrackId> {
        Ok(match id {
            RawId::Missing => 0,
            RawId::Int(v) => v,
            RawId::Str(s) => {
                let bytes = s.bytes(b);
                if let Some(v) = (!bytes.is_empty() && bytes.iter().all(|c| c.is_ascii_digit()))
                    .then(|| parse_int(bytes))
                    .flatten()
                {
                    v
                } else {
                    STRING_ID_BASE + self.intern_span(b, s)? as i64
                }
            }
        })
    }

    fn track(&mut self, b: &[u8], pid: RawId, tid: RawId) -> Step<u32> {
        // Runs of events share their thread or stream: numeric ids equal to
        // the last event's reuse its track without hashing.
        if let (RawId::Int(p), RawId::Int(t)) = (pid, tid) {
            let (last, id) = self.last_track;
            if last == (Track { pid: p, tid: t }) {
                return Ok(id);
            }
            let id = self.track_slow(b, pid, tid)?;
            self.last_track = (Track { pid: p, tid: t }, id);
            return Ok(id);
        }
        self.track_slow(b, pid, tid)
    }

    fn track_slow(&mut self, b: &[u8], pid: RawId, tid: RawId) -> Step<u32> {
        let track = Track {
            pid: self.id_value(b, pid)?,
            tid: self.id_value(b, tid)?,
        };
        let tracks = &mut self.trace.tracks;
        Ok(*self.track_ids.entry(track).or_insert_with(|| {
            tracks.push(track);
            (tracks.len() - 1) as u32
        }))
    }

    /// Stores a complete event in the tables it belongs to.
    fn commit(&mut self, b: &[u8], ev: &RawEvent) -> Step<()> {
        let counters = &mut self.trace.counters;
        counters.events += 1;
        // Runs of events share their category: the last one's text is
        // compared before any hashing.
        let (cat_sym, class) = match ev.cat {
            Some(s) if !s.escaped && self.last_cat.0 == s.bytes(b) => {
                (self.last_cat.1, self.last_cat.2)
            }
            cat => {
                let cat_sym = match cat {
                    Some(s) => self.intern_span(b, s)?,
                    None => 0,
                };
                let class = match self.cat_class.get(&cat_sym) {
                    Some(&c) => c,
                    None => {
                        let c = classify_cat(self.trace.names.get(cat_sym));
                        self.cat_class.insert(cat_sym, c);
                        c
                    }
                };
                if let Some(s) = cat.filter(|s| !s.escaped) {
                    self.last_cat.0.clear();
                    self.last_cat.0.extend_from_slice(s.bytes(b));
                    (self.last_cat.1, self.last_cat.2) = (cat_sym, class);
                }
                (cat_sym, class)
            }
        };
        *self.trace.counters.by_cat.entry(cat_sym).or_insert(0) += 1;
        match ev.ph {
            b'X' => self.commit_slice(b, ev, class, cat_sym),
            b's' | b'f' => {
                // Other flows (fwdbwd) are only counted, by category.
                if class == CatClass::LaunchFlow {
                    if let (Some(id), Some(ts)) = (ev.id.get(), ev.ts.get()) {
                        let track = self.track(b, ev.pid, ev.tid)?;
                        if self.flow_is_redundant(ev.ph == b's', id, track, ts) {
                            return Ok(());
                        }
                        let flows = &mut self.trace.flows;
                        flows.is_start.push(ev.ph == b's');
                        flows.id.push(id);
                        flows.track.push(track);
                        flows.ts.push(ts);
                    }
                }
                Ok(())
            }
            b'i' | b'I' => {
                if let Some(total) = ev.args.total_allocated.get() {
                    let key = (
                        ev.args.device_type.get().unwrap_or(-1),
                        ev.args.device_id.get().unwrap_or(-1),
                    );
                    let peak = self.memory_peaks.entry(key).or_insert(i64::MIN);
                    *peak = (*peak).max(total);
                }
                Ok(())
            }
            // Metadata (`M`) and other phases are counted, by category, only.
            _ => Ok(()),
        }
    }

    /// Whether a launch flow end says nothing the slice just stored does
    /// not: Kineto writes each flow right after its slice (the start after
    /// the runtime call, the end after the GPU op), with the correlation id
    /// as the flow's id. Such flows are not kept (they were a fifth of the
    /// stored events); the analysis follows flows only for GPU ops without
    /// a correlation, and reaches a dropped start through the runtime call
    /// with that correlation (`links::flow_fallback`).
    fn flow_is_redundant(&self, start: bool, id: i64, track: u32, ts: i64) -> bool {
        if start {
            let c = &self.trace.cpu;
            c.kind.last().is_some_and(|k| k.is_runtime())
                && c.track.last() == Some(track)
                && c.ts.last() == Some(ts)
                && c.correlation.last() == Some(id)
        } else {
            let g = &self.trace.gpu;
            g.track.last() == Some(track)
                && g.ts.last() == Some(ts)
                && g.correlation.last() == Some(id)
        }
    }

    fn commit_slice(&mut self, b: &[u8], ev: &RawEvent, class: CatClass, cat_sym: Sym) -> Step<()> {
        let (Some(ts), dur) = (ev.ts.get(), ev.dur.get().unwrap_or(0)) else {
            // A slice without a start cannot be placed; it is counted only.
            return Ok(());
        };
        // Keep times in a range where start + duration and differences of
        // times cannot overflow (±36 years of nanoseconds around any epoch
        // offset in real traces is far inside it).
        let ts = ts.clamp(MIN_TS, MAX_TS);
        let dur = dur.clamp(0, MAX_DUR);
        if self.trace.names.bytes() > MAX_NAME_BYTES {
            return bad("the trace has more than 2 GB of distinct names");
        }
        let name = match ev.name {
            Some(s) => self.intern_span(b, s)?,
            None => 0,
        };
        match class {
            CatClass::Cpu(kind) => self.push_cpu(b, ev, kind, name, ts, dur),
            CatClass::Python => {
                // Every frame goes to the lean Python table (launch chains
                // reach the model code through it); `nn.Module` frames also
                // go to the CPU table, where layer detection reads them.
                let track = self.track(b, ev.pid, ev.tid)?;
                let py = &mut self.trace.python;
                py.ts.push(ts);
                py.dur.push(dur);
                py.name.push(name);
                py.track.push(track);
                if self.trace.names.get(name).starts_with("nn.Module: ") {
                    self.push_cpu(b, ev, CpuKind::Module, name, ts, dur)
                } else {
                    Ok(())
                }
            }
            CatClass::Gpu(kind) => {
                let track = self.track(b, ev.pid, ev.tid)?;
                let a = &ev.args;
                let device = match (a.device.get(), ev.pid) {
                    (Some(d), _) => d,
                    (None, RawId::Int(p)) => p,
                    _ => 0,
                };
                let stream = match (a.stream.get(), ev.tid) {
                    (Some(s), _) => s,
                    (None, RawId::Int(t)) => t,
                    _ => self.trace.tracks[track as usize].tid,
                };
                let g = &mut self.trace.gpu;
                g.ts.push(ts);
                g.dur.push(dur);
                g.name.push(name);
                g.kind.push(kind);
                g.device.push(device);
                g.stream.push(stream);
                g.correlation.push(a.correlation.get().unwrap_or(NONE));
                g.push_geometry(a.grid.unwrap_or_default(), a.block.unwrap_or_default());
                g.bytes.push(a.bytes.get().unwrap_or(0).max(0));
                g.track.push(track);
                Ok(())
            }
            CatClass::KeptKnown | CatClass::Unknown => {
                let track = self.track(b, ev.pid, ev.tid)?;
                let o = &mut self.trace.other;
                o.cat.push(cat_sym);
                o.ts.push(ts);
                o.dur.push(dur);
                o.name.push(name);
                o.track.push(track);
                Ok(())
            }
            CatClass::LaunchFlow | CatClass::Ignored => Ok(()),
        }
    }

    fn push_cpu(
        &mut self,
        b: &[u8],
        ev: &RawEvent,
        kind: CpuKind,
        name: Sym,
        ts: i64,
        dur: i64,
    ) -> Step<()> {
        let track = self.track(b, ev.pid, ev.tid)?;
        let shapes = match ev.args.input_dims {
            Some(s) => self.intern_compact(s.bytes(b)),
            None => 0,
        };
        let dtypes = match ev.args.input_type {
            Some(s) => self.intern_compact(s.bytes(b)),
            None => 0,
        };
        let c = &mut self.trace.cpu;
        c.ts.push(ts);
        c.dur.push(dur);
        c.name.push(name);
        c.track.push(track);
        c.kind.push(kind);
        c.correlation.push(if kind.is_runtime() {
            ev.args.correlation.get().unwrap_or(NONE)
        } else {
            NONE
        });
        c.external_id
            .push(ev.args.external_id.get().unwrap_or(NONE));
        c.push_inputs(shapes, dtypes);
        Ok(())
    }
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
    events: Vec<(usize, RawEvent)>,
    /// The read-ahead's key guesses, kept from block to block.
    guess: KeyGuess,
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
fn event_start_after(b: &[u8], from: usize) -> Option<usize> {
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
mod key {
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
    /// Any other key (or an escaped one): its value is skipped.
    pub const OTHER: u8 = u8::MAX;
    /// Where an event starts: its first key is guessed too.
    pub const OPEN: u8 = u8::MAX - 1;
    /// Where an event's `args` start.
    pub const OPEN_ARGS: u8 = u8::MAX - 2;

    /// The text of each key, by id.
    pub const TEXT: [&[u8]; 40] = [
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

/// A key as written, quotes and colon included (`"ph":`), in three
/// words and masks, compared in place without scanning it.
#[derive(Clone, Copy)]
struct KeyText {
    len: usize,
    words: [u64; 3],
    masks: [u64; 3],
}

/// [`KeyText`] of every known key, by id.
static KEY_TEXTS: [KeyText; key::TEXT.len()] = {
    let mut out = [KeyText {
        len: 0,
        words: [0; 3],
        masks: [0; 3],
    }; key::TEXT.len()];
    let mut k = 0;
    while k < key::TEXT.len() {
        let text = key::TEXT[k];
        let len = text.len() + 3;
        assert!(len <= 24);
        let mut i = 0;
        while i < len {
            let c = if i == 0 || i == len - 2 {
                b'"'
            } else if i == len - 1 {
                b':'
            } else {
                text[i - 1]
            };
            out[k].words[i / 8] |= (c as u64) << (8 * (i % 8));
            out[k].masks[i / 8] |= 0xff << (8 * (i % 8));
            i += 1;
        }
        out[k].len = len;
        k += 1;
    }
    out
};

/// Guesses each key from the one before it: Kineto writes the keys of an
/// event in the same order every time (per category), so the key that
/// followed a key last time is compared in place first, and the key is
/// scanned and looked up only when the guess is wrong. One rule for the
/// parser and the read-ahead; each keeps its own guesses.
pub(crate) struct KeyGuess {
    /// By key id (and [`key::OPEN`]): the id that followed it last.
    next: [u8; 256],
}

impl Default for KeyGuess {
    fn default() -> Self {
        KeyGuess {
            next: [key::OTHER; 256],
        }
    }
}

impl KeyGuess {
    /// Reads the key at `j` (its opening quote) and the `:` after it:
    /// returns the key's id and the index after the colon.
    #[inline(always)]
    fn key(&mut self, b: &[u8], j: usize, prev: u8) -> Step<(u8, usize)> {
        let guess = self.next[prev as usize];
        if let (Some(t), Some(w)) = (KEY_TEXTS.get(guess as usize), b.get(j..j + 24)) {
            let word =
                |k: usize| u64::from_le_bytes(w[8 * k..8 * k + 8].try_into().expect("eight bytes"));
            if (word(0) ^ t.words[0]) & t.masks[0] == 0
                && (word(1) ^ t.words[1]) & t.masks[1] == 0
                && (word(2) ^ t.words[2]) & t.masks[2] == 0
            {
                return Ok((guess, j + t.len));
            }
        }
        let (text, next) = scan_string(b, j)?;
        let id = if text.escaped {
            key::OTHER
        } else {
            key::id(text.bytes(b))
        };
        self.next[prev as usize] = id;
        let j = skip_ws(b, next);
        if at(b, j)? != b':' {
            return bad("expected ':' after a key");
        }
        Ok((id, j + 1))
    }
}

/// Reads one event object at `i` (its `{`) into `ev` (a default one): the
/// fields the analysis needs; returns the index after it. Reads only the
/// bytes: the parser commits the event, on this thread or after the
/// decoding thread scanned a block ([`scan_block`]).
fn scan_event(
    b: &[u8],
    i: usize,
    max_depth: usize,
    guess: &mut KeyGuess,
    ev: &mut RawEvent,
) -> Step<usize> {
    let mut j = skip_ws(b, i + 1);
    if at(b, j)? == b'}' {
        return Ok(j + 1);
    }
    let mut prev = key::OPEN;
    loop {
        if at(b, j)? != b'"' {
            return bad(format!("expected a string, found {}", show_byte(b[j])));
        }
        let (id, next) = guess.key(b, j, prev)?;
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
            key::ARGS => scan_args(b, j, &mut ev.args, max_depth, guess)?,
            _ => skip_value(b, j, max_depth)?,
        };
        j = skip_ws(b, j);
        match at(b, j)? {
            b',' => j = skip_ws(b, j + 1),
            b'}' => return Ok(j + 1),
            c => {
                return bad(format!(
                    "expected ',' or '}}' in an event, found {}",
                    show_byte(c)
                ))
            }
        }
    }
}

fn string_or_skip(b: &[u8], j: usize, max_depth: usize) -> Step<(Option<Span>, usize)> {
    if at(b, j)? == b'"' {
        let (s, next) = scan_string(b, j)?;
        Ok((Some(s), next))
    } else {
        Ok((None, skip_value(b, j, max_depth)?))
    }
}

fn scan_args(
    b: &[u8],
    i: usize,
    args: &mut RawArgs,
    max_depth: usize,
    guess: &mut KeyGuess,
) -> Step<usize> {
    if at(b, i)? != b'{' {
        return skip_value(b, i, max_depth);
    }
    let mut j = skip_ws(b, i + 1);
    if at(b, j)? == b'}' {
        return Ok(j + 1);
    }
    let mut prev = key::OPEN_ARGS;
    loop {
        if at(b, j)? != b'"' {
            return bad(format!("expected a string, found {}", show_byte(b[j])));
        }
        let (id, next) = guess.key(b, j, prev)?;
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
            _ => match args.int_field(id) {
                Some(field) => {
                    let (v, n) = int_value(b, j)?;
                    *field = v.into();
                    n
                }
                None => skip_value(b, j, depth)?,
            },
        };
        j = skip_ws(b, j);
        match at(b, j)? {
            b',' => j = skip_ws(b, j + 1),
            b'}' => return Ok(j + 1),
            c => {
                return bad(format!(
                    "expected ',' or '}}' in args, found {}",
                    show_byte(c)
                ))
            }
        }
    }
}

fn raw_id(b: &[u8], i: usize) -> Step<(RawId, usize)> {
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

fn time_value(b: &[u8], i: usize) -> Step<(Option<i64>, usize)> {
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
            assert_eq!(KEY_TEXTS[k].len, text.len() + 3);
        }
        let doc = br#"{"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"External id": 5}},
  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3, "dur": 2, "args": {"External id": 6}},
  {"ph": "X", "name": "c", "cat": "cpu_op", "pid": 1, "tid": 1, "tsx": 99, "ts": 5, "dur" : 2, "args": {"External idx": 7, "External id": 8}},
  {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": 1, "ts": 7, "ts": 9, "dur": 2, "args": {"Externa": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "e", "pid": 1, "tid": 1, "ts": 11, "dur": 2, "args": {"External id": 10}}
]}"#;
        let mut p = Parser::new(Limits::default());
        p.feed(doc, true).unwrap();
        let t = p.finish().unwrap();
        let names: Vec<&str> = (0..t.cpu.len()).map(|i| t.name(t.cpu.name[i])).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        assert_eq!(t.cpu.ts.to_vec(), [1000, 3000, 5000, 9000, 11000]);
        assert_eq!(t.cpu.external_id.to_vec(), [5, 6, 8, NONE, 10]);
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
        for cut in 0..doc.len() {
            let mut p = Parser::new(Limits::default());
            let n = p.feed(&doc[..cut], false).unwrap();
            let mut rest = doc[n..cut].to_vec();
            rest.extend_from_slice(&doc[cut..]);
            let m = p.feed(&rest, true).unwrap();
            assert_eq!(m, rest.len());
            let t = p.finish().unwrap();
            assert_eq!(t.counters.events, 2, "cut {cut}");
            assert_eq!(t.cpu.ts.to_vec(), vec![10_500]);
            assert_eq!(t.name(t.cpu.shapes(0)), "[[2, 3], [2, 3], []]");
            assert_eq!(t.name(t.gpu.name[0]), "k\"1");
            assert_eq!(t.gpu.dur.to_vec(), vec![1250]);
            assert_eq!(t.gpu.stream.to_vec(), vec![7]);
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
        assert_eq!(t.flows.id.to_vec(), vec![8, 7, 8]);
        assert_eq!(t.flows.is_start, vec![true, false, false]);
        let links = crate::analysis::links::link(&t);
        assert_eq!(links.launch, vec![1, 2, 1]);
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
            let mut p = Parser::new(Limits::default());
            let sym = p.intern_compact(raw);
            // The copying path's answer for the same text.
            let mut slow = Vec::new();
            compact_into(raw, &mut slow);
            assert_eq!(p.trace.names.get(sym).as_bytes(), &slow[..]);
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
