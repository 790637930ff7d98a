//! `kinetoscope token create|list|revoke`: the tokens' lifecycle. Creating
//! the first token puts the server in `tokens` mode for good; revoking only
//! ever takes access away (the revoked token's row stays, marked).

use crate::config::StoreArgs;
use worker::db::{TokenError, TokenScope};

/// The `--scope` of a new token.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ScopeArg {
    /// List, search and (on a private server) read runs: a viewer.
    Read,
    /// Create runs and captures only: what a CI job needs.
    Upload,
    /// Also edit, delete and re-analyze runs.
    Admin,
}

impl From<ScopeArg> for TokenScope {
    fn from(s: ScopeArg) -> TokenScope {
        match s {
            ScopeArg::Read => TokenScope::Read,
            ScopeArg::Upload => TokenScope::Upload,
            ScopeArg::Admin => TokenScope::Admin,
        }
    }
}

/// Parses a lifetime such as `90d`, `12h` or `30m` into milliseconds.
pub fn parse_lifetime(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("{s:?}: give a number and a unit, e.g. 90d, 12h or 30m"))?;
    let ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        _ => return Err(format!("{s:?}: the unit must be d, h or m")),
    };
    if n == 0 {
        return Err("a token must live longer than that".into());
    }
    n.checked_mul(ms)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Creates a write token, prints it once, stores only its sha256.
pub async fn create(
    name: &str,
    scope: ScopeArg,
    expires_in_ms: Option<i64>,
    store: &StoreArgs,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let name = name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.chars().count() <= 100,
        "the token name must be 1 to 100 characters"
    );
    let (db, _) = crate::open_store(store).await?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
    let token = format!(
        "kst_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    let expires_at = expires_in_ms.map(|ms| worker::db::now_ms().saturating_add(ms));
    let added = db
        .add_token(
            &crate::api::new_id(),
            name,
            &worker::blobs::sha256_hex(token.as_bytes()),
            scope.into(),
            expires_at,
        )
        .await;
    db.close().await;
    match added {
        Ok(()) => {}
        Err(e @ TokenError::NameTaken(_)) => anyhow::bail!("{e}"),
        Err(TokenError::Db(e)) => return Err(e.into()),
    }
    println!("{token}");
    let scope = TokenScope::from(scope).as_str();
    let until = expires_at.map_or("never expires".to_string(), |t| {
        format!("expires {}", time_text(t))
    });
    eprintln!(
        "Token {name:?} created ({scope} scope, {until}). It is shown once. This server is now \
         in tokens mode for good: writes and the run list need `Authorization: Bearer <token>`."
    );
    Ok(())
}

/// Prints every token: name, scope, created, last used, expiry or
/// revocation; never the secret (which is not stored) nor its hash.
pub async fn list(store: &StoreArgs) -> anyhow::Result<()> {
    let (db, _) = crate::open_store(store).await?;
    let tokens = db.list_tokens().await;
    db.close().await;
    let tokens = tokens?;
    if tokens.is_empty() {
        eprintln!(
            "No tokens: unless the server runs with `--auth tokens`, anyone who can reach it \
             may write."
        );
        return Ok(());
    }
    let now = worker::db::now_ms();
    println!(
        "{:<24} {:<7} {:<20} {:<20} EXPIRES",
        "NAME", "SCOPE", "CREATED", "LAST USED"
    );
    for t in tokens {
        let expires = match (t.revoked_at, t.expires_at) {
            (Some(r), _) => format!("revoked {}", time_text(r)),
            (None, None) => "never".to_string(),
            (None, Some(e)) if t.expired(now) => format!("{} (expired)", time_text(e)),
            (None, Some(e)) => time_text(e),
        };
        println!(
            "{:<24} {:<7} {:<20} {:<20} {}",
            t.name,
            t.scope.as_str(),
            time_text(t.created_at),
            t.last_used_at.map_or("never".into(), time_text),
            expires
        );
    }
    Ok(())
}

/// Revokes the live token of this name: it is refused from now on, and its
/// row stays (listed as revoked), so the server never reopens.
pub async fn revoke(name: &str, store: &StoreArgs) -> anyhow::Result<()> {
    let (db, _) = crate::open_store(store).await?;
    let gone = db.revoke_token(name.trim()).await;
    let live = db.list_tokens().await;
    db.close().await;
    anyhow::ensure!(
        gone?,
        "no live token named {name:?} (see `kinetoscope token list`)"
    );
    if live?.iter().any(|t| t.revoked_at.is_none()) {
        eprintln!("Token {name:?} revoked.");
    } else {
        eprintln!(
            "Token {name:?} revoked. It was the last live one: the server stays in tokens mode, \
             so nobody may write until you create a new token."
        );
    }
    Ok(())
}

/// A UTC time to the minute, e.g. `2026-11-30 21:15`.
fn time_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_parse_with_units() {
        assert_eq!(parse_lifetime("90d"), Ok(90 * 86_400_000));
        assert_eq!(parse_lifetime("12h"), Ok(12 * 3_600_000));
        assert_eq!(parse_lifetime("30m"), Ok(30 * 60_000));
        assert!(parse_lifetime("30").is_err());
        assert!(parse_lifetime("d").is_err());
        assert!(parse_lifetime("0d").is_err());
        assert!(parse_lifetime("5y").is_err());
        assert!(parse_lifetime("99999999999999999d").is_err());
    }

    #[test]
    fn times_print_as_utc_dates() {
        assert_eq!(time_text(0), "1970-01-01 00:00");
        // 2026-11-30 21:15:00 UTC.
        assert_eq!(time_text(1_796_073_300_000), "2026-11-30 21:15");
        assert_eq!(time_text(951_782_400_000), "2000-02-29 00:00");
    }
}
