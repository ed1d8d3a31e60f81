//! The case-database flags `run` and `compare` share (flattened into both).

use caseload_engine::casedb::postgres::PgOptions;
use caseload_engine::casedb::{DbEngine, DbOptions, JournalMode, Profile, Synchronous};

/// Case-database flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// Engine of the case database: `sqlite` (a file in the database
    /// directory) or `postgres` (a private PostgreSQL cluster started in the
    /// database directory, or the server --db-url names). Default: sqlite,
    /// or postgres with --db-url or the ftk4 profile.
    #[arg(long, value_enum)]
    pub db_engine: Option<EngineArg>,
    /// Use this PostgreSQL server (`postgres://user@host:port/db`) instead
    /// of a private cluster; its database must not hold a case (or give
    /// --force).
    #[arg(long, value_name = "URL")]
    pub db_url: Option<String>,
    /// A server setting of the private PostgreSQL cluster, `NAME=VALUE`
    /// (fsync, synchronous_commit, full_page_writes, wal_level,
    /// shared_buffers, checkpoint_timeout, max_wal_size, ...; default:
    /// PostgreSQL 15's own). Repeatable.
    #[arg(long = "pg-setting", value_name = "NAME=VALUE")]
    pub pg_settings: Vec<String>,
    /// The account the private cluster runs as when caseload runs as root
    /// (PostgreSQL refuses root). Default: `postgres`, else `nobody`.
    #[arg(long, value_name = "USER")]
    pub pg_user: Option<String>,
    /// SQLite journal mode of the case database.
    #[arg(long, value_enum, default_value = "wal")]
    pub journal_mode: JournalArg,
    /// SQLite synchronous level of the case database.
    #[arg(long, value_enum, default_value = "normal")]
    pub synchronous: SyncArg,
    /// Database operations per transaction.
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Suite profile of the case database (docs/profiles.md): `native`
    /// (caseload's own), `autopsy` (The Sleuth Kit's case database, SQLite;
    /// sets the journal, synchronous level and batch size its suite uses),
    /// `ftk4` (FTK 4's case database, PostgreSQL unless --db-engine says
    /// otherwise; items, properties, compound files expanded). Default: the
    /// workload's `profile`, else native.
    #[arg(long, value_enum)]
    pub profile: Option<ProfileArg>,
}

/// `--profile`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum ProfileArg {
    Native,
    Autopsy,
    Ftk4,
}

/// `--db-engine`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum EngineArg {
    Sqlite,
    Postgres,
}

/// `--journal-mode`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum JournalArg {
    Delete,
    Truncate,
    Persist,
    Wal,
    Memory,
    Off,
}

/// `--synchronous`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum SyncArg {
    Off,
    Normal,
    Full,
    Extra,
}

impl DbArgs {
    /// The options these flags ask for, with `workload_profile` (a
    /// workload's `profile`) when `--profile` is not given.
    pub fn options_with(&self, workload_profile: Option<Profile>) -> anyhow::Result<DbOptions> {
        anyhow::ensure!(self.batch_size > 0, "--batch-size must be at least 1");
        let profile = match self.profile {
            None => workload_profile.unwrap_or_default(),
            Some(ProfileArg::Native) => Profile::Native,
            Some(ProfileArg::Autopsy) => Profile::Autopsy,
            Some(ProfileArg::Ftk4) => Profile::Ftk4,
        };
        // Without an engine named, the profile's suite decides: FTK keeps
        // its cases in PostgreSQL.
        let engine = match (self.db_engine, &self.db_url) {
            (Some(EngineArg::Sqlite), Some(_)) => {
                anyhow::bail!(
                    "--db-url names a PostgreSQL server; it cannot go with --db-engine sqlite"
                )
            }
            (None, None) if profile == Profile::Ftk4 => DbEngine::Postgres,
            (Some(EngineArg::Sqlite), None) | (None, None) => DbEngine::Sqlite,
            (Some(EngineArg::Postgres), _) | (None, Some(_)) => DbEngine::Postgres,
        };
        let mut postgres = PgOptions {
            url: self.db_url.clone(),
            settings: Default::default(),
            user: self.pg_user.clone(),
        };
        for s in &self.pg_settings {
            postgres.set(s).map_err(anyhow::Error::msg)?;
        }
        if engine == DbEngine::Sqlite && (!postgres.settings.is_empty() || postgres.user.is_some())
        {
            anyhow::bail!("--pg-setting and --pg-user need --db-engine postgres");
        }
        if postgres.url.is_some() && (!postgres.settings.is_empty() || postgres.user.is_some()) {
            anyhow::bail!(
                "--pg-setting and --pg-user set up a private cluster; an existing server (--db-url) keeps its own settings"
            );
        }
        Ok(DbOptions {
            engine,
            journal_mode: match self.journal_mode {
                JournalArg::Delete => JournalMode::Delete,
                JournalArg::Truncate => JournalMode::Truncate,
                JournalArg::Persist => JournalMode::Persist,
                JournalArg::Wal => JournalMode::Wal,
                JournalArg::Memory => JournalMode::Memory,
                JournalArg::Off => JournalMode::Off,
            },
            synchronous: match self.synchronous {
                SyncArg::Off => Synchronous::Off,
                SyncArg::Normal => Synchronous::Normal,
                SyncArg::Full => Synchronous::Full,
                SyncArg::Extra => Synchronous::Extra,
            },
            batch_size: self.batch_size,
            postgres,
            profile,
        })
    }
}
