//! The JSON lexer: strings (with their escapes), numbers, skipped values,
//! Kineto's integer and time spellings, read in place from a byte slice.

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

pub(crate) type Step<T> = Result<T, Stop>;

pub(crate) fn bad<T>(msg: impl Into<String>) -> Step<T> {
    Err(Stop::Bad(Box::new(msg.into())))
}

#[inline(always)]
pub(crate) fn at(b: &[u8], i: usize) -> Step<u8> {
    match b.get(i) {
        Some(&c) => Ok(c),
        None => Err(Stop::More),
    }
}

#[inline(always)]
pub(crate) fn skip_ws(b: &[u8], i: usize) -> usize {
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
pub(crate) fn skip_ws_run(b: &[u8], mut i: usize) -> usize {
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
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
    pub(crate) escaped: bool,
}

impl Span {
    pub(crate) fn new(start: usize, end: usize, escaped: bool) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
            escaped,
        }
    }

    pub(crate) fn bytes<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        &b[self.start as usize..self.end as usize]
    }
}

/// An integer field of an event that may be absent, in eight bytes:
/// `i64::MIN` (which no number the parser reads gives) means absent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaybeInt(pub(crate) i64);

impl MaybeInt {
    pub(crate) const ABSENT: MaybeInt = MaybeInt(i64::MIN);

    pub(crate) fn get(self) -> Option<i64> {
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
pub(crate) const SWAR_ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `w` that is zero (and maybe of bytes above
/// the first zero one: only the lowest flag is exact).
#[inline(always)]
pub(crate) fn zero_byte(w: u64) -> u64 {
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
pub(crate) fn scan_string(b: &[u8], i: usize) -> Step<(Span, usize)> {
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
pub(crate) fn scan_string_long(b: &[u8], i: usize) -> Step<(Span, usize)> {
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

pub(crate) fn show_byte(c: u8) -> String {
    if c.is_ascii_graphic() {
        format!("'{}'", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

/// Decodes JSON string escapes into `out`.
pub(crate) fn unescape(raw: &[u8], out: &mut Vec<u8>) -> Step<()> {
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

pub(crate) fn hex4(raw: &[u8], i: usize) -> Step<u32> {
    let s = raw
        .get(i..i + 4)
        .ok_or_else(|| Stop::Bad(Box::new("bad \\u escape".into())))?;
    let s = std::str::from_utf8(s).map_err(|_| Stop::Bad(Box::new("bad \\u escape".into())))?;
    u32::from_str_radix(s, 16).map_err(|_| Stop::Bad(Box::new("bad \\u escape".into())))
}

/// Span of a number or literal (`true`, `false`, `null`) starting at `i`.
#[inline]
pub(crate) fn scan_scalar(b: &[u8], i: usize) -> Step<(usize, usize)> {
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
pub(crate) fn is_scalar_byte(c: u8) -> bool {
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
pub(crate) fn plain_number(b: &[u8], i: usize, decimals: bool) -> Option<(bool, i64, i64, usize)> {
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
pub(crate) fn plain_int(b: &[u8], i: usize) -> Option<(i64, usize)> {
    plain_number(b, i, false).map(|(neg, v, _, end)| (if neg { -v } else { v }, end))
}

/// Skips one JSON value of any kind, checking bracket balance and depth.
pub(crate) fn skip_value(b: &[u8], i: usize, max_depth: usize) -> Step<usize> {
    match at(b, i)? {
        b'"' => Ok(scan_string(b, i)?.1),
        b'{' | b'[' => skip_nested(b, i, max_depth),
        _ => Ok(scan_scalar(b, i)?.1),
    }
}

/// Follows a JSON value's text byte by byte: which bytes belong to a string.
#[derive(Clone, Copy, Default)]
pub(crate) struct InString {
    on: bool,
    escape: bool,
}

impl InString {
    /// Whether `c`, the next byte, is part of a string (its quotes included).
    #[inline(always)]
    pub(crate) fn step(&mut self, c: u8) -> bool {
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

/// Where [`skip_nested`] stands: how deep, and inside a string or not.
#[derive(Clone, Copy, Default)]
struct Nest {
    depth: usize,
    string: InString,
}

impl Nest {
    /// Reads `b[from..to]` byte by byte; returns the index after the
    /// value's last bracket if it closes there.
    fn bytes(&mut self, b: &[u8], from: usize, to: usize, max_depth: usize) -> Step<Option<usize>> {
        for (k, &c) in b[from..to].iter().enumerate() {
            if self.string.step(c) {
                continue;
            }
            match c {
                b'{' | b'[' => self.open(max_depth)?,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Ok(Some(from + k + 1));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }

    #[inline(always)]
    fn open(&mut self, max_depth: usize) -> Step<()> {
        self.depth += 1;
        if self.depth > max_depth {
            return bad(format!("JSON nested deeper than {max_depth} levels"));
        }
        Ok(())
    }

    /// Reads the 64 bytes at `j` from their masks (no backslash among
    /// them, none pending): the quotes tell which brackets lie inside
    /// strings, and only the others are walked.
    #[inline(always)]
    fn block(&mut self, m: Masks, j: usize, max_depth: usize) -> Step<Option<usize>> {
        // Each bit from an opening quote up to (not including) its closing
        // one: a running XOR of the quotes.
        let mut inside = m.quote;
        for shift in [1, 2, 4, 8, 16, 32] {
            inside ^= inside << shift;
        }
        if self.string.on {
            inside = !inside;
        }
        self.string.on = inside >> 63 == 1;
        let (opens, closes) = (m.open & !inside, m.close & !inside);
        if closes == 0 && self.depth + opens.count_ones() as usize <= max_depth {
            self.depth += opens.count_ones() as usize;
            return Ok(None);
        }
        let mut brackets = opens | closes;
        while brackets != 0 {
            let k = brackets.trailing_zeros();
            brackets &= brackets - 1;
            if opens >> k & 1 == 1 {
                self.open(max_depth)?;
            } else {
                self.depth -= 1;
                if self.depth == 0 {
                    return Ok(Some(j + k as usize + 1));
                }
            }
        }
        Ok(None)
    }
}

/// Where 64 bytes hold each kind of byte [`skip_nested`] stops at, a bit a
/// byte.
#[derive(Clone, Copy)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    /// The masks of `w` (64 bytes), sixteen bytes at a time (SSE2, which
    /// every x86-64 has).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn of(w: &[u8]) -> Masks {
        use safe_arch::*;
        let (quote, backslash) = (
            set_splat_i8_m128i(b'"' as i8),
            set_splat_i8_m128i(b'\\' as i8),
        );
        // `[` and `{` (and `]` and `}`) differ only in the bit 0x20.
        let (case, open, close) = (
            set_splat_i8_m128i(0x20),
            set_splat_i8_m128i(b'{' as i8),
            set_splat_i8_m128i(b'}' as i8),
        );
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for k in 0..4 {
            let v = load_unaligned_m128i(w[16 * k..16 * k + 16].try_into().expect("sixteen bytes"));
            let folded = bitor_m128i(v, case);
            let bits = |x| (move_mask_i8_m128i(x) as u32 as u64) << (16 * k);
            m.quote |= bits(cmp_eq_mask_i8_m128i(v, quote));
            m.backslash |= bits(cmp_eq_mask_i8_m128i(v, backslash));
            m.open |= bits(cmp_eq_mask_i8_m128i(folded, open));
            m.close |= bits(cmp_eq_mask_i8_m128i(folded, close));
        }
        m
    }

    /// The masks of `w` (64 bytes), a byte at a time.
    #[cfg(not(target_arch = "x86_64"))]
    fn of(w: &[u8]) -> Masks {
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (k, &c) in w[..64].iter().enumerate() {
            let bit = 1u64 << k;
            match c {
                b'"' => m.quote |= bit,
                b'\\' => m.backslash |= bit,
                b'[' | b'{' => m.open |= bit,
                b']' | b'}' => m.close |= bit,
                _ => {}
            }
        }
        m
    }
}

/// Skips an array or object at `i` (its `[` or `{`), 64 bytes at a time:
/// Kineto's `Input Dims`, `Input Strides` and `Concrete Inputs` are most of
/// a real capture's bytes, and a byte at a time they cost 8% of the CPU.
/// Blocks with a backslash, and the last bytes of the slice, are read byte
/// by byte ([`Nest::bytes`]): one rule, two speeds (a test holds them
/// alike).
pub(crate) fn skip_nested(b: &[u8], i: usize, max_depth: usize) -> Step<usize> {
    let mut nest = Nest::default();
    let mut j = i;
    while let Some(w) = b.get(j..j + 64) {
        let m = Masks::of(w);
        let end = if m.backslash != 0 || nest.string.escape {
            nest.bytes(b, j, j + 64, max_depth)?
        } else {
            nest.block(m, j, max_depth)?
        };
        if let Some(end) = end {
            return Ok(end);
        }
        j += 64;
    }
    match nest.bytes(b, j, b.len(), max_depth)? {
        Some(end) => Ok(end),
        None => Err(Stop::More),
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
pub(crate) fn parse_int(s: &[u8]) -> Option<i64> {
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
pub(crate) fn int_value(b: &[u8], i: usize) -> Step<(Option<i64>, usize)> {
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
pub(crate) fn dim3_value(b: &[u8], i: usize, max_depth: usize) -> Step<(Option<[u32; 3]>, usize)> {
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
