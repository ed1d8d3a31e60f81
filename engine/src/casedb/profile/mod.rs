//! Suite profiles of the case database: how a suite's database is set up
//! and what rows it writes for what caseload records (`--profile`,
//! docs/profiles.md). caseload's own tables are written in every profile
//! (the stages read them); a profile adds the suite's shape on top, one
//! module per suite: `autopsy` (The Sleuth Kit's SQLite case database),
//! `ftk4` (FTK 4's PostgreSQL case database).

mod autopsy;
mod ftk4;

use super::DbError;
use super::conn::Conn;
use super::write::{Reply, Write};
use serde::{Deserialize, Serialize};

pub use autopsy::AUTOPSY_BATCH;
pub use ftk4::FTK4_BATCH;

/// A suite profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// caseload's own efficient processing (the default).
    #[default]
    Native,
    /// Autopsy / The Sleuth Kit's case database (SQLite).
    Autopsy,
    /// FTK 4's case database (PostgreSQL): an item row per file and per
    /// extracted or carved item, property rows per item.
    Ftk4,
}

impl Profile {
    /// Every profile, in `--profile`'s order.
    pub const ALL: [Profile; 3] = [Profile::Native, Profile::Autopsy, Profile::Ftk4];

    /// The name (`--profile`).
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Native => "native",
            Profile::Autopsy => "autopsy",
            Profile::Ftk4 => "ftk4",
        }
    }

    /// The profile's own tables, created with caseload's.
    pub(crate) fn schema(self) -> Option<&'static str> {
        match self {
            Profile::Native => None,
            Profile::Autopsy => Some(autopsy::SCHEMA),
            Profile::Ftk4 => Some(ftk4::SCHEMA),
        }
    }

    /// Whether file-hash expands compound files into items of their own
    /// unless its `expand` option says otherwise (FTK's pre-processing
    /// option "Expand compound files", which the FTK 4 study used).
    pub fn expands_compound_files(self) -> bool {
        self == Profile::Ftk4
    }

    /// Whether the KFF hash library is looked up in the case database
    /// rather than in caseload's library file: FTK 4 keeps its KFF in its
    /// database, so every KFF lookup is a query on the database server.
    pub fn keeps_kff_in_case_db(self) -> bool {
        self == Profile::Ftk4
    }

    /// Whether the case's database server keeps its temporary files on
    /// the temp channel (FTK 4's dbTemp) rather than in its data directory.
    pub fn server_temp_on_temp_channel(self) -> bool {
        self == Profile::Ftk4
    }

    /// After `write` was applied (with `reply`): the rows the suite writes
    /// for the same record.
    pub(crate) fn after(
        self,
        write: &Write,
        reply: &Reply,
        conn: &mut Conn,
    ) -> Result<(), DbError> {
        match self {
            Profile::Native => Ok(()),
            Profile::Autopsy => autopsy::after(write, reply, conn),
            Profile::Ftk4 => ftk4::after(write, reply, conn),
        }
    }
}

/// The row id a file's write replied with, or the last one inserted (a
/// file without parse errors replies without it).
fn file_id(reply: &Reply, conn: &mut Conn) -> Result<i64, DbError> {
    match reply {
        Reply::Id(id) => Ok(*id),
        _ => conn.last_insert_id(),
    }
}

/// A file name's extension as suites list it: lower-case, after the last
/// dot, at most 10 characters.
fn extension(name: &str) -> Option<String> {
    name.rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .filter(|e| !e.is_empty() && e.len() <= 10)
}

/// `("/dir/sub/", "name")` of `/dir/sub/name` (parent paths keep the
/// trailing slash, as TSK's do).
fn split_path(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..=i], &path[i + 1..]),
        None => ("/", path),
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown profile `{s}` (native, autopsy, ftk4)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_like_tsk_parent_paths() {
        assert_eq!(split_path("/a/b/c.txt"), ("/a/b/", "c.txt"));
        assert_eq!(split_path("/c.txt"), ("/", "c.txt"));
        assert_eq!(split_path("c.txt"), ("/", "c.txt"));
    }

    #[test]
    fn profiles_parse_by_name() {
        for p in Profile::ALL {
            assert_eq!(p.as_str().parse::<Profile>().unwrap(), p);
        }
        assert!("ftk".parse::<Profile>().is_err());
    }
}
