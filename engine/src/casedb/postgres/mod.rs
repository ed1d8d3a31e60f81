//! The case database on PostgreSQL: a private cluster in the database
//! channel directory (the default) or an existing server (`--db-url`), its
//! settings, and the accounting of its I/O.

pub mod accounting;
pub mod cluster;

use crate::casedb::DbError;
use crate::casedb::conn::pg_error;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Server settings that decide a private cluster's I/O, with the values
/// caseload starts it with unless told otherwise: PostgreSQL 15's own
/// defaults (`postgresql.conf.sample`), written out so that a run records
/// them whatever the distribution's configuration says.
pub const DEFAULT_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
    ("wal_level", "replica"),
    ("shared_buffers", "128MB"),
    ("wal_buffers", "-1"),
    ("checkpoint_timeout", "5min"),
    ("checkpoint_completion_target", "0.9"),
    ("max_wal_size", "1GB"),
    ("min_wal_size", "80MB"),
    ("autovacuum", "on"),
    ("work_mem", "4MB"),
    ("maintenance_work_mem", "64MB"),
    ("effective_cache_size", "4GB"),
];

/// Settings caseload needs for its accounting (not I/O choices).
const ACCOUNTING_SETTINGS: &[(&str, &str)] = &[
    ("track_io_timing", "on"),
    ("track_wal_io_timing", "on"),
    ("log_checkpoints", "on"),
    ("logging_collector", "off"),
    ("log_destination", "stderr"),
];

/// Settings that `--pg-setting` may not change: caseload's accounting and
/// connection set-up rely on them.
const FIXED: &[&str] = &[
    "track_io_timing",
    "track_wal_io_timing",
    "log_checkpoints",
    "logging_collector",
    "log_destination",
    "listen_addresses",
    "unix_socket_directories",
    "port",
    "data_directory",
];

/// How to run PostgreSQL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgOptions {
    /// An existing server (`postgres://...`) instead of a private cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Settings that differ from [`DEFAULT_SETTINGS`] (private cluster).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// The account a private cluster runs as when caseload is root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

impl PgOptions {
    /// Check a `NAME=VALUE` setting and add it.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("--pg-setting `{assignment}`: expected NAME=VALUE"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
        {
            return Err(format!(
                "--pg-setting `{assignment}`: `{name}` is not a PostgreSQL setting name"
            ));
        }
        if FIXED.contains(&name) {
            return Err(format!(
                "--pg-setting `{assignment}`: caseload sets `{name}` itself (its accounting and connections depend on it)"
            ));
        }
        if value.contains(['\n', '\0']) {
            return Err(format!(
                "--pg-setting `{assignment}`: the value holds a line break or NUL"
            ));
        }
        self.settings.insert(name.to_string(), value.to_string());
        Ok(())
    }

    /// Every setting a private cluster starts with, in a stable order.
    pub fn server_settings(&self) -> Vec<(String, String)> {
        let mut all: BTreeMap<String, String> = DEFAULT_SETTINGS
            .iter()
            .chain(ACCOUNTING_SETTINGS)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (k, v) in &self.settings {
            all.insert(k.clone(), v.clone());
        }
        all.into_iter().collect()
    }
}

/// A URL with its password removed, for reports.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((auth, host)) => {
            let user = auth.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
}

/// Connect to the server a URL names.
pub fn connect_url(url: &str) -> Result<postgres::Client, DbError> {
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
        DbError::Cluster(format!(
            "--db-url `{}` is not a PostgreSQL URL: {e}",
            redact_url(url)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    config.application_name("caseload");
    config.connect(postgres::NoTls).map_err(|e| {
        let inner = pg_error(&e, "connect");
        DbError::Cluster(format!(
            "cannot reach the PostgreSQL server at `{}`: {inner}",
            redact_url(url)
        ))
    })
}

/// The names of the case schema's tables, children first (for dropping),
/// and those a profile adds on PostgreSQL (ftk4's).
pub const TABLES: &[&str] = &[
    // A planned case's queue (casedb/queue.rs).
    "work_units",
    "work_ranges",
    "work_parts",
    "work_plan",
    "work_workers",
    "ftk_item_properties",
    "ftk_items",
    "ftk_property_names",
    "ftk_case_info",
    "channel_figures",
    "stage_runs",
    "processing_errors",
    "hits",
    "extracted_items",
    "carved_items",
    "files",
    "volumes",
    "evidence_metadata",
    "evidence_files",
    "evidence",
    "runs",
    "meta",
];

/// Run `statements` one by one, each its own implicit transaction (CREATE
/// TABLESPACE, ALTER SYSTEM and VACUUM refuse to run inside a transaction
/// block, which several statements in one simple query would be).
pub(crate) fn each_alone(
    client: &mut postgres::Client,
    statements: &[String],
) -> Result<(), DbError> {
    for sql in statements {
        client.batch_execute(sql).map_err(|e| pg_error(&e, sql))?;
    }
    Ok(())
}

/// Whether the connected database already holds a case.
pub fn holds_case(client: &mut postgres::Client) -> Result<bool, DbError> {
    let sql = "SELECT to_regclass('meta') IS NOT NULL";
    let row = client.query_one(sql, &[]).map_err(|e| pg_error(&e, sql))?;
    row.try_get::<_, bool>(0).map_err(|e| pg_error(&e, sql))
}

/// Drop a case's tables (`--force` on an external server).
pub fn drop_case(client: &mut postgres::Client) -> Result<(), DbError> {
    // The hash library loaded into the case (ftk4) goes with it.
    let names: Vec<&str> = crate::casedb::hash_library::LIBRARY_TABLES
        .iter()
        .chain(TABLES)
        .copied()
        .collect();
    let sql = format!("DROP TABLE IF EXISTS {} CASCADE", names.join(", "));
    client.batch_execute(&sql).map_err(|e| pg_error(&e, &sql))
}

/// `server_version` and the I/O settings in force, for run.json.
pub fn effective_settings(
    client: &mut postgres::Client,
) -> Result<(String, BTreeMap<String, String>), DbError> {
    let sql =
        "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY($1) ORDER BY name";
    let names: Vec<String> = DEFAULT_SETTINGS
        .iter()
        .chain(ACCOUNTING_SETTINGS)
        .map(|(k, _)| k.to_string())
        .collect();
    let mut settings = BTreeMap::new();
    for row in client
        .query(sql, &[&names])
        .map_err(|e| pg_error(&e, sql))?
    {
        let (k, v): (String, String) = (row.get(0), row.get(1));
        settings.insert(k, v);
    }
    let v = "SHOW server_version";
    let version: String = client
        .query_one(v, &[])
        .map_err(|e| pg_error(&e, v))?
        .get(0);
    Ok((version, settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_and_merged_over_the_defaults() {
        let mut o = PgOptions::default();
        o.set("shared_buffers=1GB").unwrap();
        o.set("fsync=off").unwrap();
        for bad in [
            "nodot",
            "=1",
            "Bad=1",
            "port=5",
            "track_io_timing=off",
            "a b=1",
        ] {
            assert!(o.set(bad).is_err(), "{bad}");
        }
        let s: BTreeMap<_, _> = o.server_settings().into_iter().collect();
        assert_eq!(s["shared_buffers"], "1GB");
        assert_eq!(s["fsync"], "off");
        assert_eq!(s["full_page_writes"], "on");
        assert_eq!(s["track_io_timing"], "on");
    }

    #[test]
    fn passwords_never_reach_reports() {
        assert_eq!(
            redact_url("postgres://u:secret@db.lab:5433/case"),
            "postgres://u@db.lab:5433/case"
        );
        assert_eq!(redact_url("postgres://db/case"), "postgres://db/case");
    }
}
