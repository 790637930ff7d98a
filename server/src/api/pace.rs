//! The minimum pace of an upload body: a client that trickles bytes (one a
//! second, say) would otherwise hold a connection, a staging file and an
//! upload slot for as long as it likes. The body is read in windows; a
//! window that ends with fewer bytes than the pace asks for ends the upload
//! with 408, whether bytes stopped altogether or only slowed.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How fast an upload body must arrive.
#[derive(Clone, Copy, Debug)]
pub struct UploadPace {
    /// The length of a window.
    pub window: Duration,
    /// The fewest bytes per second, averaged over a window; 0 turns the
    /// check off.
    pub min_bytes_per_sec: u64,
}

impl UploadPace {
    fn min_per_window(&self) -> u64 {
        (self.min_bytes_per_sec as f64 * self.window.as_secs_f64()).ceil() as u64
    }

    /// `body`, ended with an error when it falls below the pace; the flag
    /// says afterwards whether that is why it ended.
    pub fn guard<S, E>(
        self,
        body: S,
    ) -> (
        impl Stream<Item = Result<Bytes, std::io::Error>>,
        Arc<AtomicBool>,
    )
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let tripped = Arc::new(AtomicBool::new(false));
        let flag = tripped.clone();
        let min = self.min_per_window();
        let window = self.window;
        let state = (Box::pin(body), Instant::now() + window, 0u64, false);
        let stream = futures::stream::unfold(state, move |(mut body, mut end, mut got, done)| {
            let flag = flag.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    let next = if min == 0 {
                        Ok(body.next().await)
                    } else {
                        tokio::time::timeout_at(end, body.next()).await
                    };
                    match next {
                        Ok(Some(Ok(chunk))) => {
                            got += chunk.len() as u64;
                            if min > 0 && Instant::now() >= end {
                                if got < min {
                                    break;
                                }
                                (end, got) = (Instant::now() + window, 0);
                            }
                            return Some((Ok(chunk), (body, end, got, false)));
                        }
                        Ok(Some(Err(e))) => {
                            let e = std::io::Error::other(e.to_string());
                            return Some((Err(e), (body, end, got, true)));
                        }
                        Ok(None) => return None,
                        // The window ended while waiting for bytes.
                        Err(_) if got >= min => (end, got) = (Instant::now() + window, 0),
                        Err(_) => break,
                    }
                }
                flag.store(true, Ordering::Relaxed);
                let e = std::io::Error::other(format!(
                    "the body arrived slower than {} bytes/s",
                    self.min_bytes_per_sec
                ));
                Some((Err(e), (body, end, got, true)))
            }
        });
        (stream, tripped)
    }

    /// The 408 for an upload that fell below the pace.
    pub fn error(&self) -> super::ApiError {
        super::ApiError::RequestTimeout(format!(
            "the upload arrived slower than {} bytes per second over {} s; send it again on a \
             faster connection",
            self.min_bytes_per_sec,
            self.window.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(n: usize, size: usize, gap_ms: u64) -> impl Stream<Item = Result<Bytes, String>> {
        futures::stream::iter(0..n).then(move |_| async move {
            tokio::time::sleep(Duration::from_millis(gap_ms)).await;
            Ok(Bytes::from(vec![b'x'; size]))
        })
    }

    async fn drain(s: impl Stream<Item = Result<Bytes, std::io::Error>>) -> (u64, bool) {
        futures::pin_mut!(s);
        let mut n = 0;
        while let Some(c) = s.next().await {
            match c {
                Ok(c) => n += c.len() as u64,
                Err(_) => return (n, true),
            }
        }
        (n, false)
    }

    const PACE: UploadPace = UploadPace {
        window: Duration::from_millis(200),
        min_bytes_per_sec: 1000, // 200 bytes per window
    };

    #[tokio::test(start_paused = true)]
    async fn a_fast_body_passes_whole() {
        let (s, tripped) = PACE.guard(chunks(50, 100, 10));
        assert_eq!(drain(s).await, (5000, false));
        assert!(!tripped.load(Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_off() {
        // 10 bytes every 100 ms: 100 bytes/s, a tenth of the pace.
        let (s, tripped) = PACE.guard(chunks(50, 10, 100));
        let (n, failed) = drain(s).await;
        assert!(failed && n < 100, "{n}");
        assert!(tripped.load(Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_cut_off() {
        let (s, tripped) = PACE.guard(chunks(3, 500, 10).chain(chunks(1, 500, 10_000)));
        assert_eq!(drain(s).await, (1500, true));
        assert!(tripped.load(Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn off_when_zero() {
        let pace = UploadPace {
            min_bytes_per_sec: 0,
            ..PACE
        };
        let (s, tripped) = pace.guard(chunks(5, 1, 1000));
        assert_eq!(drain(s).await, (5, false));
        assert!(!tripped.load(Ordering::Relaxed));
    }
}
