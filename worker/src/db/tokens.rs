//! API tokens: only their sha256 is stored; a revoked token keeps its row
//! (a store that ever had a token stays in tokens mode).

use super::{now_ms, Db, DbError, DbResult, TokenScope};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A stored token (its secret is never stored, only its sha256).
#[derive(Clone, Debug)]
pub struct Token {
    /// The name it was created under; unique.
    pub name: String,
    /// sha256 hex of the secret.
    pub hash: String,
    /// What it may do.
    pub scope: TokenScope,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// When it stops being accepted, ms since the epoch.
    pub expires_at: Option<i64>,
    /// When a request last presented it, ms since the epoch.
    pub last_used_at: Option<i64>,
    /// When it was revoked, ms since the epoch: a revoked token is never
    /// accepted again.
    pub revoked_at: Option<i64>,
}

impl Token {
    /// Whether it is past its expiry at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now_ms)
    }
}

/// Why a token could not be created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A token of this name exists already.
    #[error("a token named {0:?} exists already (revoke it first)")]
    NameTaken(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

fn token_of(row: &AnyRow) -> DbResult<Token> {
    let scope: String = row.try_get("scope")?;
    Ok(Token {
        name: row.try_get("name")?,
        hash: row.try_get("hash")?,
        scope: scope
            .parse::<TokenScope>()
            .map_err(|e| DbError::Decode(e.into()))?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        last_used_at: row.try_get("last_used_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

impl Db {
    /// Stores a token's hash under a name, with its scope and optional
    /// expiry (ms since the epoch). Fails with [`TokenError::NameTaken`]
    /// when a live (unrevoked) token of that name exists: names are how
    /// tokens are revoked.
    pub async fn add_token(
        &self,
        id: &str,
        name: &str,
        hash: &str,
        scope: TokenScope,
        expires_at: Option<i64>,
    ) -> Result<(), TokenError> {
        // One statement, not a read then a write in a transaction: SQLite
        // cannot upgrade a reader to a writer after a concurrent write (a
        // running server's worker), and fails at once instead of waiting.
        let added = sqlx::query(
            "INSERT INTO tokens (id, name, hash, created_at, scope, expires_at) \
             SELECT $1, $2, $3, $4, $5, $6 \
             WHERE NOT EXISTS (SELECT 1 FROM tokens WHERE name = $2 AND revoked_at IS NULL)",
        )
        .bind(id)
        .bind(name)
        .bind(hash)
        .bind(now_ms())
        .bind(scope.as_str())
        .bind(expires_at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if added == 0 {
            return Err(TokenError::NameTaken(name.to_string()));
        }
        Ok(())
    }

    /// Whether any token was ever created (then writes need one). Expired
    /// and revoked tokens count: a server that had tokens stays protected
    /// when they lapse or are revoked, so revoking only takes access away.
    pub async fn tokens_exist(&self) -> DbResult<bool> {
        Ok(sqlx::query("SELECT id FROM tokens LIMIT 1")
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// The token with this hash, if any (revoked ones too: the caller
    /// refuses them), and records that it was used. The use is written at
    /// most once a minute a token: on a private server every read presents
    /// one, and a write per read would queue reads behind SQLite's one
    /// writer.
    pub async fn use_token(&self, hash: &str) -> DbResult<Option<Token>> {
        let row = sqlx::query(
            "SELECT name, hash, scope, created_at, expires_at, last_used_at, revoked_at \
             FROM tokens WHERE hash = $1",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let token = token_of(&row)?;
        let now = now_ms();
        if token.revoked_at.is_none() && token.last_used_at.is_none_or(|t| t < now - 60_000) {
            sqlx::query("UPDATE tokens SET last_used_at = $1 WHERE hash = $2")
                .bind(now)
                .bind(hash)
                .execute(&self.pool)
                .await?;
        }
        Ok(Some(token))
    }

    /// Every token, revoked ones included, oldest first (their hashes
    /// included; callers showing them to people leave the hash out).
    pub async fn list_tokens(&self) -> DbResult<Vec<Token>> {
        let rows = sqlx::query(
            "SELECT name, hash, scope, created_at, expires_at, last_used_at, revoked_at \
             FROM tokens ORDER BY created_at, name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_of).collect()
    }

    /// Marks the live token of this name revoked (its row stays, so the
    /// server stays protected and `token list` shows it); whether there was
    /// one.
    pub async fn revoke_token(&self, name: &str) -> DbResult<bool> {
        Ok(
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
                .bind(now_ms())
                .bind(name)
                .execute(&self.pool)
                .await?
                .rows_affected()
                > 0,
        )
    }
}
