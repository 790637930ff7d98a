//! Baselines by name: which run is the current baseline of `decode-glm5-tp8`.
//!
//! One row a name; setting a name's baseline (`update_run` with
//! `baseline_of`) replaces the run it named.
//! Rows go with their run (the explicit delete in `delete_run`, and
//! `ON DELETE CASCADE`).

use super::{Db, DbResult};
use sqlx::Row;
use std::collections::HashMap;

/// A name's current baseline as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineRecord {
    /// The name.
    pub name: String,
    /// The run.
    pub run_id: String,
    /// When it became the baseline, Unix ms.
    pub set_at: i64,
}

fn from_row(r: &sqlx::any::AnyRow) -> DbResult<BaselineRecord> {
    Ok(BaselineRecord {
        name: r.try_get("name")?,
        run_id: r.try_get("run_id")?,
        set_at: r.try_get("set_at")?,
    })
}

impl Db {
    /// Forgets a name's baseline (the run stays); false if it had none.
    pub async fn remove_baseline(&self, name: &str) -> DbResult<bool> {
        Ok(sqlx::query("DELETE FROM baselines WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }

    /// A name's current baseline.
    pub async fn baseline(&self, name: &str) -> DbResult<Option<BaselineRecord>> {
        sqlx::query("SELECT name, run_id, set_at FROM baselines WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(from_row)
            .transpose()
    }

    /// Every baseline, by name (at most `limit`).
    pub async fn baselines(&self, limit: i64) -> DbResult<Vec<BaselineRecord>> {
        sqlx::query("SELECT name, run_id, set_at FROM baselines ORDER BY name LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(from_row)
            .collect()
    }

    /// The names each of these runs is the baseline of.
    pub async fn baselines_of(&self, run_ids: &[&str]) -> DbResult<HashMap<String, Vec<String>>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        if run_ids.is_empty() {
            return Ok(out);
        }
        let marks: Vec<String> = (1..=run_ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT name, run_id, set_at FROM baselines WHERE run_id IN ({}) ORDER BY name",
            marks.join(", ")
        );
        let mut q = sqlx::query(&sql).persistent(false);
        for id in run_ids {
            q = q.bind(id.to_string());
        }
        for r in q.fetch_all(&self.pool).await? {
            let b = from_row(&r)?;
            out.entry(b.run_id).or_default().push(b.name);
        }
        Ok(out)
    }
}
