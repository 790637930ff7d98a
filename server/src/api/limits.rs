//! A per-client cap on concurrent uploads: one client (an IP address)
//! cannot take every upload slot, staging file and disk write at once.
//! Loopback clients are exempt unless asked otherwise: on the embedded
//! default the only client is the user's own machine.

use super::ApiError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The client's address as the per-client limits key it: the one a
/// trusted proxy forwarded for (see [`Client`]), else the peer's, when the
/// server runs with connection info.
pub fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    if let Some(Client(ip)) = extensions.get::<Client>() {
        return Some(*ip);
    }
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The client a trusted proxy forwarded a request for, put in the
/// request's extensions by `auth::same_site`.
#[derive(Clone, Copy, Debug)]
pub struct Client(pub IpAddr);

/// Address ranges whose `X-Forwarded-For` is believed (`--trusted-proxy`):
/// behind a load balancer every request comes from its address, and the
/// per-client limits would put every client under one cap.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl TrustedProxies {
    /// Parses `10.0.0.0/8,192.168.1.7` (an address alone is one host).
    pub fn parse(specs: &[String]) -> Result<TrustedProxies, String> {
        let mut out = Vec::new();
        for spec in specs.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            let (addr, bits) = spec.split_once('/').unwrap_or((spec, ""));
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("{spec:?} is not an address or a range (10.0.0.0/8)"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits = if bits.is_empty() {
                max
            } else {
                bits.parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("{spec:?}: the prefix must be 0 to {max}"))?
            };
            out.push((ip, bits));
        }
        Ok(TrustedProxies(out))
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let to_bits = |ip: IpAddr| match ip {
            IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, true),
            IpAddr::V6(v) => (u128::from(v), false),
        };
        // An IPv4 address sits in the top 32 bits, so a prefix counts
        // from the top for both families.
        let (x, v4) = to_bits(ip);
        self.0.iter().any(|&(net, bits)| {
            let (n, net_v4) = to_bits(net);
            let bits = bits as u32;
            net_v4 == v4 && (bits == 0 || (x ^ n) >> (128 - bits) == 0)
        })
    }

    /// The client a request from `peer` is for: `peer` itself, unless it is
    /// a trusted proxy, then the nearest address in `X-Forwarded-For` that
    /// is not (the ones before it could be written by anyone).
    pub fn client(&self, peer: IpAddr, headers: &axum::http::HeaderMap) -> IpAddr {
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for value in headers.get_all("x-forwarded-for").iter().rev() {
            let Ok(text) = value.to_str() else {
                return client;
            };
            for hop in text.rsplit(',') {
                match hop.trim().parse::<IpAddr>() {
                    Ok(ip) => {
                        client = ip;
                        if !self.trusts(ip) {
                            return ip;
                        }
                    }
                    Err(_) => return client,
                }
            }
        }
        client
    }
}

/// The client's address as an extractor (none when the server runs
/// without connection info, as in-process tests do).
pub struct ClientIp(pub Option<IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(ClientIp(client_ip(&parts.extensions)))
    }
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
    fn forwarded_clients_are_believed_only_from_trusted_proxies() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8".into(), "fd00::1".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(proxies.trusts(ip("10.2.3.4")));
        assert!(!proxies.trusts(ip("11.0.0.1")));
        assert!(proxies.trusts(ip("fd00::1")));
        assert!(!proxies.trusts(ip("fd00::2")));
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            "6.6.6.6, 1.2.3.4, 10.0.0.9".parse().unwrap(),
        );
        assert_eq!(proxies.client(ip("10.0.0.1"), &h), ip("1.2.3.4"));
        // From anyone else the header is ignored.
        assert_eq!(proxies.client(ip("5.5.5.5"), &h), ip("5.5.5.5"));
        // No proxies configured: the peer.
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.1"), &h),
            ip("10.0.0.1")
        );
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["nope".into()]).is_err());
    }

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
