//! Reading a trace from bytes: detect the encoding, decompress on one thread
//! (which also reads blocks' events ahead while the parser is busy), parse
//! and commit on the calling thread.
//!
//! Decompression runs ahead into large recycled blocks so the parser always
//! works on contiguous slices (parsing from a slice is several times faster
//! than `serde_json::from_reader`-style byte pulls; see PERF-NOTES.md). Each
//! block has free headroom in front, where the parser's unconsumed tail of
//! the previous block (one partial event) is copied, so no block is copied
//! whole. When the parser has two blocks waiting, the decoding thread
//! reads the next block's events itself, from the first place that looks
//! like an event's start (`parse::scan_block`), before handing it over;
//! the parser, on reaching that place, checks that
//! it stands there between two events and commits the events read, or
//! parses the block itself. The trace is the same either way (a test cuts
//! documents into blocks of many sizes); only the time differs.

use super::parse::{scan_block, Limits, Parser, Scanned};
use super::{Trace, TraceError};
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// A gzip writer (re-exported so tools need no compression crate of their own).
pub use flate2::write::GzEncoder;
/// gzip compression level.
pub use flate2::Compression as GzLevel;

/// How the input is compressed (the contract type, with its file suffix).
pub use kinetoscope_types::Encoding;
use kinetoscope_types::{Compression, TraceFormat};

/// Fewest bytes read before deciding what an input is.
pub const HEAD_MIN: usize = 64;
/// Most bytes read to get past leading whitespace (a pretty-printed trace).
pub const HEAD_MAX: usize = 64 << 10;

/// Whether `head` (the first bytes of an input, not yet at its end) is too
/// short to tell what the input is: fewer than [`HEAD_MIN`] bytes, or only
/// whitespace so far (up to [`HEAD_MAX`]). The one rule for every reader of
/// uploads: HTTP, `kinetoscope upload`, and captures.
pub fn head_needs_more(head: &[u8]) -> bool {
    head.len() < HEAD_MIN || (head.len() < HEAD_MAX && head.iter().all(u8::is_ascii_whitespace))
}

/// Reads the head of an input by [`head_needs_more`], then detects its
/// encoding; returns both (the head must be written before the rest).
pub fn read_head<R: Read>(r: &mut R) -> io::Result<(Vec<u8>, Result<Encoding, String>)> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while head_needs_more(&head) {
        let want = if head.len() < HEAD_MIN {
            HEAD_MIN - head.len()
        } else {
            buf.len()
        };
        let n = r.read(&mut buf[..want.min(4096)])?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let encoding = sniff(&head);
    Ok((head, encoding))
}

/// Detects the encoding from the first bytes (at least 4 unless the input is
/// shorter). JSON is recognised by its first non-blank character (`{` or `[`,
/// after an optional UTF-8 byte order mark).
pub fn sniff(head: &[u8]) -> Result<Encoding, String> {
    // Compression by its magic bytes; inside it the format is Kineto JSON
    // (a compressed stream's own first bytes are checked by the parser).
    let json = |compression| Ok(Encoding::of(TraceFormat::KinetoJson, compression));
    if head.starts_with(&[0x1f, 0x8b]) {
        return json(Compression::Gzip);
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return json(Compression::Zstd);
    }
    let body = head.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(head);
    match body.iter().find(|c| !c.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => json(Compression::None),
        None if head.is_empty() => Err("the body is empty".into()),
        None => Err("the body is blank".into()),
        Some(_) => {
            let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
            Err(format!(
                "not JSON, gzip or zstd (first bytes: {})",
                shown.join(" ")
            ))
        }
    }
}

/// Options for [`read_trace`].
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Limits.
    pub limits: Limits,
    /// Incremented with the number of source (compressed) bytes consumed.
    pub progress: Option<Arc<AtomicU64>>,
    /// Set to stop the parse: the decompressed stream fails from then on,
    /// so the parse stops within a block. Failing the source's reads is not
    /// enough: a small upload is all in the decompressor's buffer at once,
    /// and 4 MB of zstd can hold gigabytes of repeated events (a worker
    /// went on parsing for seconds past its deadline under load).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// The decompressed stream, failing once its cancel flag is set.
struct Cancellable<'a> {
    inner: Box<dyn Read + Send + 'a>,
    cancel: Arc<AtomicBool>,
}

impl Read for Cancellable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(io::Error::other("the parse was cancelled"));
        }
        self.inner.read(buf)
    }
}

/// Size of a decompressed block handed to the parser: 1 MB parsed as fast
/// as 4 MB (and 512 KB) and holds 18 MB less.
const BLOCK: usize = 1 << 20;
/// Free space in front of each block for the previous block's partial event
/// (events are a few hundred bytes; a longer tail is joined in a copy). At
/// most six blocks are in flight (one being decoded or handed over,
/// [`QUEUE`] waiting, one parsed): this and [`BLOCK`] are most of the job's
/// fixed memory.
const HEADROOM: usize = 64 << 10;
/// Blocks handed over and not yet taken by the parser, at most: room for
/// the decoding thread to run ahead while it reads some blocks ahead.
const QUEUE: usize = 4;

/// Counts source bytes and remembers whether the source itself failed, so
/// that a network or disk error is not mistaken for a damaged stream.
struct Counting<R> {
    inner: R,
    progress: Option<Arc<AtomicU64>>,
    failed: Arc<AtomicBool>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf).inspect_err(|e| {
            if e.kind() != io::ErrorKind::Interrupted {
                self.failed.store(true, Ordering::Relaxed);
            }
        })?;
        if let Some(p) = &self.progress {
            p.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Reads a trace file from disk.
pub fn read_trace_file(path: &std::path::Path, opts: &ReadOptions) -> Result<Trace, TraceError> {
    let file = std::fs::File::open(path)?;
    read_trace(file, opts)
}

/// Reads and parses a trace from any byte source.
pub fn read_trace<R: Read + Send>(src: R, opts: &ReadOptions) -> Result<Trace, TraceError> {
    crate::phases::mark("start");
    let failed = Arc::new(AtomicBool::new(false));
    let src = Counting {
        inner: src,
        progress: opts.progress.clone(),
        failed: failed.clone(),
    };
    let (encoding, mut decoder) = decoder(src)?;
    if let Some(cancel) = &opts.cancel {
        decoder = Box::new(Cancellable {
            inner: decoder,
            cancel: cancel.clone(),
        });
    }
    parse_stream(decoder, encoding, &opts.limits, &failed, BLOCK, parser_busy)
}

/// The decompressed stream of any byte source, and its encoding: the
/// compression detected from its first bytes and undone (the format's
/// reader, Kineto JSON, the only one, reads what this gives).
pub fn decoder<'a, R: Read + Send + 'a>(
    mut src: R,
) -> Result<(Encoding, Box<dyn Read + Send + 'a>), TraceError> {
    let mut head = vec![0u8; 64 << 10];
    let mut n = 0;
    // At least 64 bytes, and past any leading whitespace.
    while n < 64 || (n < head.len() && head[..n].iter().all(u8::is_ascii_whitespace)) {
        match src.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let encoding = sniff(&head[..n]).map_err(TraceError::NotATrace)?;
    head.truncate(n);
    let chained = io::Cursor::new(head).chain(src);
    let decoder: Box<dyn Read + Send + 'a> = match encoding.compression() {
        Compression::None => Box::new(chained),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
            io::BufReader::with_capacity(1 << 20, chained),
        )),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(chained)
                .map_err(|e| TraceError::Corrupt("zstd", e.to_string()))?,
        ),
    };
    Ok((encoding, decoder))
}

/// Whether a file is written to its end: its compressed stream (if any)
/// ends whole, and its JSON closes the value it opened, with nothing but
/// white space after. A writer that paused mid-file leaves a stream that
/// ends early or a value still open (its events' objects close, its event
/// list does not). Input that does not start a JSON object or array at
/// all is "whole" too: whoever reads it next says what it is. Reads at
/// about the speed of decompression, holding one buffer.
pub fn written_whole<R: Read + Send>(src: R) -> io::Result<bool> {
    let mut r = match decoder(src) {
        Ok((_, r)) => r,
        Err(TraceError::Io(e)) => return Err(e),
        Err(TraceError::NotATrace(_)) => return Ok(true),
        Err(_) => return Ok(false),
    };
    let mut buf = vec![0u8; 1 << 20];
    let (mut depth, mut opened, mut closed) = (0usize, false, false);
    let (mut in_string, mut escaped) = (false, false);
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A damaged or cut compressed stream.
            Err(_) => return Ok(false),
        };
        for &b in &buf[..n] {
            if closed {
                if !b.is_ascii_whitespace() {
                    // Something after the value: not ours to judge.
                    return Ok(true);
                }
                continue;
            }
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    opened = true;
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    closed = depth == 0;
                }
                c if !opened && !c.is_ascii_whitespace() => return Ok(true),
                _ => {}
            }
        }
    }
    Ok(closed || !opened)
}

/// Whether the decoding thread reads a block's events ahead, given the
/// block's number and how many blocks wait for the parser.
type ReadAhead = fn(u64, usize) -> bool;

/// The [`ReadAhead`] of every read: the blocks decoded while the parser has
/// two blocks waiting, so that it never waits on a read-ahead (with one,
/// it sometimes did: 4-8% slower in interleaved rounds).
fn parser_busy(_block: u64, waiting: usize) -> bool {
    waiting >= 2
}

struct Block {
    buf: Vec<u8>,
    len: usize,
    last: bool,
}

fn decode_error(encoding: Encoding, e: io::Error, source_failed: bool) -> TraceError {
    if source_failed {
        return TraceError::Io(e);
    }
    match (encoding.compression(), e.kind()) {
        (Compression::None, _) => TraceError::Io(e),
        (_, io::ErrorKind::UnexpectedEof) => {
            TraceError::Truncated(format!("the {} stream ends early", encoding.as_str()))
        }
        // The source did not fail, so the decoder's error is damage in
        // the compressed stream.
        _ => TraceError::Corrupt(encoding.as_str(), e.to_string()),
    }
}

fn parse_stream(
    mut decoder: Box<dyn Read + Send + '_>,
    encoding: Encoding,
    limits: &Limits,
    source_failed: &AtomicBool,
    block_size: usize,
    read_ahead: ReadAhead,
) -> Result<Trace, TraceError> {
    let max_json = limits.max_json_bytes;
    // Blocks the decoding thread has handed over and the parser has not
    // yet taken.
    let queued = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // One thread decompresses; after each block it reads the block's
        // events ahead itself (`scan_block`) when the parser has two blocks
        // waiting (`parser_busy`), and otherwise hands the block over raw,
        // so the parser never waits while the decoder scans. The parser
        // commits read-ahead events in order once it has checked where they
        // start. The split finds itself (on the bench's traces the decoder
        // reads ahead 40-50% of the blocks from zstd, 15-40% from gzip, a
        // quarter with Python frames). Reading ahead on the decoding thread
        // rather than a third one keeps two threads on two cores and each
        // block in the cache of the core that wrote it: 10-15% faster than
        // a helper thread taking every other block (BENCHMARKS.md, sixth
        // sitting).
        let (block_tx, block_rx) =
            mpsc::sync_channel::<Result<(Block, Option<Scanned>), TraceError>>(QUEUE);
        let (recycle_tx, recycle_rx) = mpsc::channel::<Vec<u8>>();
        let (used_tx, used_rx) = mpsc::channel::<Scanned>();
        let queued = &queued;
        scope.spawn(move || {
            let mut total: u64 = 0;
            for k in 0u64.. {
                let mut buf = recycle_rx
                    .try_recv()
                    .unwrap_or_else(|_| vec![0u8; HEADROOM + block_size]);
                let mut len = 0;
                let mut last = false;
                while len < block_size {
                    match decoder.read(&mut buf[HEADROOM + len..]) {
                        Ok(0) => {
                            last = true;
                            break;
                        }
                        Ok(n) => len += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let failed = source_failed.load(Ordering::Relaxed);
                            let _ = block_tx.send(Err(decode_error(encoding, e, failed)));
                            return;
                        }
                    }
                }
                total += len as u64;
                if total > max_json {
                    let _ = block_tx.send(Err(TraceError::TooLarge(format!(
                        "the trace decompresses to more than {} MB (the limit)",
                        max_json >> 20
                    ))));
                    return;
                }
                let block = Block { buf, len, last };
                let scanned = read_ahead(k, queued.load(Ordering::Acquire)).then(|| {
                    scan_block(
                        &block.buf[..HEADROOM + block.len],
                        HEADROOM,
                        limits,
                        used_rx.try_recv().unwrap_or_default(),
                    )
                });
                queued.fetch_add(1, Ordering::AcqRel);
                if block_tx.send(Ok((block, scanned))).is_err() || last {
                    return;
                }
            }
        });

        let stopped = || TraceError::Io(io::Error::other("decoder stopped"));
        let mut parser = Parser::new(limits.clone());
        let mut carry: Vec<u8> = Vec::new();
        let mut joined: Vec<u8> = Vec::new();
        loop {
            let (Block { mut buf, len, last }, scanned) =
                block_rx.recv().map_err(|_| stopped())??;
            queued.fetch_sub(1, Ordering::AcqRel);
            let end = HEADROOM + len;
            let from = match scanned {
                None => HEADROOM,
                Some(scanned) if scanned.is_empty() => {
                    let _ = used_tx.send(scanned);
                    HEADROOM
                }
                Some(scanned) => {
                    // Parse up to where the helper started: if the parser
                    // then stands just before it, between two events, the
                    // helper's events are the next ones.
                    joined.clear();
                    joined.extend_from_slice(&carry);
                    joined.extend_from_slice(&buf[HEADROOM..scanned.start]);
                    let used = parser.feed(&joined, false)?;
                    let blanks = &joined[used..];
                    carry.clear();
                    let from =
                        if parser.at_next_event() && blanks.iter().all(u8::is_ascii_whitespace) {
                            parser.commit_scanned(&buf, blanks.len(), &scanned)?;
                            scanned.end
                        } else {
                            // The guess was wrong: go on from where the parser is.
                            carry.extend_from_slice(blanks);
                            scanned.start
                        };
                    let _ = used_tx.send(scanned);
                    from
                }
            };
            // The unconsumed tail goes in front of the new bytes, in the
            // block's free space when it fits.
            if carry.len() <= from {
                let start = from - carry.len();
                buf[start..from].copy_from_slice(&carry);
                let slice = &buf[start..end];
                let used = parser.feed(slice, last)?;
                carry.clear();
                carry.extend_from_slice(&slice[used..]);
            } else {
                joined.clear();
                joined.extend_from_slice(&carry);
                joined.extend_from_slice(&buf[from..end]);
                let used = parser.feed(&joined, last)?;
                carry.clear();
                carry.extend_from_slice(&joined[used..]);
            }
            if carry.len() > limits.max_value_bytes {
                return Err(TraceError::TooLarge(format!(
                    "a single event or top-level value is larger than {} MB",
                    limits.max_value_bytes >> 20
                )));
            }
            let _ = recycle_tx.send(buf);
            if last {
                break;
            }
        }
        parser.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_magic_bytes() {
        assert_eq!(sniff(&[0x1f, 0x8b, 8, 0]), Ok(Encoding::Gzip));
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd]), Ok(Encoding::Zstd));
        assert_eq!(sniff(b"\n  {\"a\""), Ok(Encoding::Json));
        assert_eq!(sniff(b"[{"), Ok(Encoding::Json));
        assert!(sniff(b"hello").is_err());
        assert!(sniff(b"").is_err());
    }

    #[test]
    fn whitespace_led_traces_are_read_past_their_blanks() {
        let mut text = vec![b' '; 5000];
        text.extend_from_slice(b"\n{\"traceEvents\": []}");
        let (head, enc) = read_head(&mut &text[..]).unwrap();
        assert_eq!(enc, Ok(Encoding::Json));
        assert!(head.len() > 5000 && text.starts_with(&head));
        let (head, enc) = read_head(&mut &b"{}"[..]).unwrap();
        assert_eq!((head.as_slice(), enc), (&b"{}"[..], Ok(Encoding::Json)));
        assert!(head_needs_more(b"   "));
        assert!(!head_needs_more(&[b'{'; 64]));
    }

    #[test]
    fn reads_all_three_encodings() {
        let json = br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"correlation": 1}}]}"#;
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(json).unwrap();
            e.finish().unwrap()
        };
        let zst = zstd::encode_all(&json[..], 3).unwrap();
        for bytes in [json.to_vec(), gz, zst] {
            let t = read_trace(&bytes[..], &ReadOptions::default()).unwrap();
            assert_eq!(t.gpu.len(), 1);
        }
    }

    /// Blocks read ahead by the decoding thread give the trace that one
    /// parse of the whole document gives, at any block size and whichever
    /// blocks are read ahead (all, none, every other one, or as timing
    /// has it): events that
    /// straddle blocks, strings holding `}, {` (a wrong guess of where an
    /// event starts), escapes, keys after the event array; and the same
    /// error for a bad event wherever it falls.
    #[test]
    fn read_ahead_blocks_parse_as_one_document() {
        let mut json = b"{\"schemaVersion\": 1, \"traceEvents\": [\n".to_vec();
        for i in 0..600 {
            let name = match i % 7 {
                0 => format!("aten::op{i}"),
                1 => format!("weird }}, {{ name {i}"),
                2 => format!("esc \\\" }},{{\\\" {i}"),
                3 => "x".repeat(i % 50),
                _ => format!("k{i}"),
            };
            let (cat, args) = if i % 3 == 0 {
                (
                    "kernel",
                    format!("{{\"correlation\": {i}, \"grid\": [1, 2, 3], \"stream\": 7}}"),
                )
            } else {
                ("cpu_op", format!("{{\"External id\": {i}, \"Input Dims\": [[{i}, 2], []], \"Input type\": [\"float\", \"}}, {{\"]}}"))
            };
            json.extend_from_slice(
                format!("  {{\"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": 1, \"tid\": {}, \"ts\": {}.5, \"dur\": 3, \"args\": {args}}},\n", i % 3, 1000 + i).as_bytes(),
            );
        }
        json.extend_from_slice(b"  {}\n], \"deviceProperties\": [{\"id\": 0, \"name\": \"}, {\"}], \"baseTimeNanoseconds\": 5}");
        let digest = |t: Trace| {
            let a = crate::analyze_stored(t, &Default::default()).unwrap();
            let index = a
                .artifact(kinetoscope_types::ArtifactName::Timeline)
                .unwrap();
            (serde_json::to_string(&a.summary).unwrap(), index.to_vec())
        };
        let mut whole = Parser::new(Limits::default());
        whole.feed(&json, true).unwrap();
        let want = digest(whole.finish().unwrap());
        let no = AtomicBool::new(false);
        let policies: [(&str, ReadAhead); 4] = [
            ("every other block", |k, _| k % 2 == 1),
            ("every block", |_, _| true),
            ("no block", |_, _| false),
            ("as timing has it", parser_busy),
        ];
        let parse = |doc: &[u8], block: usize, policy: ReadAhead| {
            let decoder: Box<dyn Read + Send> = Box::new(io::Cursor::new(doc.to_vec()));
            parse_stream(
                decoder,
                Encoding::Json,
                &Limits::default(),
                &no,
                block,
                policy,
            )
        };
        for block in [13, 64, 100, 333, 1000, 4096, 1 << 20] {
            for (read_ahead, policy) in policies {
                let t = parse(&json, block, policy).unwrap();
                assert!(want == digest(t), "block size {block}, {read_ahead}");
            }
        }
        // A bad escape in a name, late in the document.
        let bad = String::from_utf8(json)
            .unwrap()
            .replacen("k599", "k\\q", 1)
            .into_bytes();
        let mut whole = Parser::new(Limits::default());
        let want = whole.feed(&bad, true).err().unwrap().to_string();
        for block in [64, 1000, 4096] {
            for (read_ahead, policy) in policies {
                let got = parse(&bad, block, policy).err().unwrap().to_string();
                assert_eq!(got, want, "block size {block}, {read_ahead}");
            }
        }
    }

    #[test]
    fn truncated_compressed_input_is_an_error() {
        let mut json = b"{\"traceEvents\": [".to_vec();
        for i in 0..2000 {
            json.extend_from_slice(format!("{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k{i}\", \"pid\": 0, \"tid\": 7, \"ts\": {i}, \"dur\": 1}},").as_bytes());
        }
        json.extend_from_slice(b"{}]}");
        let zst = zstd::encode_all(&json[..], 3).unwrap();
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&json).unwrap();
            e.finish().unwrap()
        };
        for bytes in [json, zst, gz] {
            for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
                let r = read_trace(&bytes[..cut], &ReadOptions::default());
                let err = r.err().expect("must fail");
                assert!(err.is_bad_input(), "{err}");
            }
        }
    }
}
