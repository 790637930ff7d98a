//! A per-client cap on concurrent uploads: one client (an IP address)
//! cannot take every upload slot, staging file and disk write at once.
//! Loopback clients are exempt unless asked otherwise: on the embedded
//! default the only client is the user's own machine.

use super::ApiError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The client's address, when the server runs with connection info.
pub fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Uploads in progress per client address.
type Taken = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// Upload slots per client address.
#[derive(Clone, Debug)]
pub struct UploadSlots {
    per_client: usize,
    loopback_too: bool,
    taken: Taken,
}

/// A held slot; dropping it frees the slot.
pub struct UploadSlot {
    slots: Option<(Taken, IpAddr)>,
}

impl UploadSlots {
    /// `per_client` concurrent uploads per address (0: no cap); loopback
    /// addresses are capped only with `loopback_too`.
    pub fn new(per_client: usize, loopback_too: bool) -> UploadSlots {
        UploadSlots {
            per_client,
            loopback_too,
            taken: Arc::default(),
        }
    }

    /// A slot for an upload from `client` (unknown when the server was not
    /// started with connection info: then uncapped), or 429.
    pub fn acquire(&self, client: Option<IpAddr>) -> Result<UploadSlot, ApiError> {
        let Some(ip) = client else {
            return Ok(UploadSlot { slots: None });
        };
        if self.per_client == 0 || (ip.is_loopback() && !self.loopback_too) {
            return Ok(UploadSlot { slots: None });
        }
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        let n = taken.entry(ip).or_default();
        if *n >= self.per_client {
            return Err(ApiError::TooManyRequests(format!(
                "{} uploads from this address are in progress already (the limit is {}); \
                 wait for one to finish",
                n, self.per_client
            )));
        }
        *n += 1;
        Ok(UploadSlot {
            slots: Some((self.taken.clone(), ip)),
        })
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        if let Some((taken, ip)) = self.slots.take() {
            let mut taken = taken.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = taken.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    taken.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cap_each_client_and_free_on_drop() {
        let slots = UploadSlots::new(2, false);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let one = slots.acquire(Some(a)).unwrap();
        let _two = slots.acquire(Some(a)).unwrap();
        assert!(matches!(
            slots.acquire(Some(a)),
            Err(ApiError::TooManyRequests(_))
        ));
        let _other = slots.acquire(Some(b)).unwrap();
        drop(one);
        let _three = slots.acquire(Some(a)).unwrap();
        // Loopback is exempt unless asked; unknown clients are uncapped.
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..5).map(|_| slots.acquire(Some(lo)).unwrap()).collect();
        assert_eq!(held.len(), 5);
        let strict = UploadSlots::new(1, true);
        let _h = strict.acquire(Some(lo)).unwrap();
        assert!(strict.acquire(Some(lo)).is_err());
        assert!(strict.acquire(None).is_ok());
        assert!(UploadSlots::new(0, true).acquire(Some(a)).is_ok());
    }
}

/// A per-client rate limit on writes (uploads, edits, deletes,
/// re-analyses, captures): `governor`'s keyed token bucket, so a burst is
/// allowed and a steady flood is not. Loopback is exempt unless asked, as
/// with [`UploadSlots`].
#[derive(Clone)]
pub struct WriteRate {
    limiter: Option<Arc<governor::DefaultKeyedRateLimiter<IpAddr>>>,
    per_minute: u32,
    loopback_too: bool,
}

impl WriteRate {
    /// `per_minute` writes per client address, in bursts of up to that many
    /// (0: no limit).
    pub fn new(per_minute: u32, loopback_too: bool) -> WriteRate {
        let limiter = std::num::NonZeroU32::new(per_minute)
            .map(|n| Arc::new(governor::RateLimiter::keyed(governor::Quota::per_minute(n))));
        WriteRate {
            limiter,
            per_minute,
            loopback_too,
        }
    }

    /// Counts one write from `client`, or 429 when it is over the rate.
    pub fn check(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        let (Some(limiter), Some(ip)) = (&self.limiter, client) else {
            return Ok(());
        };
        if ip.is_loopback() && !self.loopback_too {
            return Ok(());
        }
        // Forget idle clients now and then, so the table stays small.
        if limiter.len() > 10_000 {
            limiter.retain_recent();
        }
        limiter.check_key(&ip).map_err(|_| {
            ApiError::TooManyRequests(format!(
                "more than {} writes a minute from this address; wait a little",
                self.per_minute
            ))
        })
    }
}

impl std::fmt::Debug for WriteRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteRate")
            .field("per_minute", &self.per_minute)
            .field("loopback_too", &self.loopback_too)
            .finish()
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn writes_over_the_rate_get_429() {
        let rate = WriteRate::new(3, false);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..3 {
            rate.check(Some(a)).unwrap();
        }
        assert!(matches!(
            rate.check(Some(a)),
            Err(ApiError::TooManyRequests(_))
        ));
        rate.check(Some("10.0.0.2".parse().unwrap())).unwrap();
        let lo: IpAddr = "::1".parse().unwrap();
        for _ in 0..10 {
            rate.check(Some(lo)).unwrap();
        }
        let off = WriteRate::new(0, true);
        for _ in 0..10 {
            off.check(Some(a)).unwrap();
        }
    }
}
