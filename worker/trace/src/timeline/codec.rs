//! The stored form: zstd-compressed binary columns, the pools, tracks and
//! spans first, then the rows.

use super::*;

impl TimelineIndex {
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
    pub(super) fn write_head(&self, w: &mut impl Write, rows: u32) -> io::Result<()> {
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
            reverse: ReverseLinks::default(),
        })
    }
}

/// One row as stored; returns its first start and last end.
pub(super) fn write_row(
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
