//! A private PostgreSQL cluster in the database channel directory: the
//! system's `initdb` and `postgres` binaries, a data directory of the
//! run's own, a Unix socket inside it (or a free loopback port when the
//! socket path would be too long), started for a run and stopped after it.
//!
//! PostgreSQL refuses to run as root, so when caseload runs as root the
//! server runs as an unprivileged user (`postgres` where the system has
//! one, else `nobody`), which then owns the data directory. The server is
//! started in a process group of its own (a Ctrl-C at the terminal reaches
//! caseload, which stops the server in order, not the server directly) and
//! with a parent-death signal, so that if caseload itself is killed the
//! server shuts down instead of being left running.
//!
//! On Windows there is no root and no Unix socket: the server runs as
//! caseload's own user, listens on a free loopback port, starts in a
//! process group of its own, and is stopped with `pg_ctl stop` (Windows
//! has no signals; pg_ctl reaches the postmaster through its event). What
//! differs is in the `host` module at the end of this file.

use crate::casedb::DbError;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Name of the data directory inside the database channel directory.
pub const DATA_DIR: &str = "pgdata";
/// Name of the server log inside the database channel directory.
pub const LOG_FILE: &str = "postgresql.log";
/// The database role caseload creates and connects as.
pub const ROLE: &str = "caseload";
/// The database it uses.
pub const DATABASE: &str = "postgres";

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fast shutdown may take before harsher signals.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

fn cluster_error(message: impl Into<String>) -> DbError {
    DbError::Cluster(message.into())
}

/// The PostgreSQL server binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `initdb`.
    pub initdb: PathBuf,
    /// `postgres`.
    pub postgres: PathBuf,
}

/// Find `initdb` and `postgres`: in `$CASELOAD_PG_BINDIR` when set (and
/// only there), else on PATH, else in the newest
/// `/usr/lib/postgresql/N/bin` (where Debian keeps them off PATH).
pub fn find_binaries() -> Result<Binaries, DbError> {
    if let Some(dir) = std::env::var_os("CASELOAD_PG_BINDIR") {
        let dir = PathBuf::from(dir);
        let exe = |n: &str| dir.join(format!("{n}{}", std::env::consts::EXE_SUFFIX));
        let (initdb, postgres) = (exe("initdb"), exe("postgres"));
        return if initdb.is_file() && postgres.is_file() {
            Ok(Binaries { initdb, postgres })
        } else {
            Err(cluster_error(format!(
                "PostgreSQL server binaries (initdb, postgres) are not in CASELOAD_PG_BINDIR `{}`",
                dir.display()
            )))
        };
    }
    let on_path = crate::system::program_on_path;
    if let (Some(initdb), Some(postgres)) = (on_path("initdb"), on_path("postgres")) {
        return Ok(Binaries { initdb, postgres });
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((v, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => Ok(Binaries {
            initdb: bin.join("initdb"),
            postgres: bin.join("postgres"),
        }),
        None => Err(cluster_error(
            "PostgreSQL server binaries (initdb, postgres) were not found on PATH or under /usr/lib/postgresql/*/bin; install PostgreSQL (Debian: apt-get install postgresql) or use --db-url",
        )),
    }
}

/// The unprivileged account the server runs as when caseload is root.
#[derive(Debug, Clone)]
pub struct ServerUser {
    /// Account name.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
}

/// Who runs the server: `None` (caseload's own user) unless caseload is
/// root; then `requested`, else `postgres`, else `nobody`.
pub fn server_user(requested: Option<&str>) -> Result<Option<ServerUser>, DbError> {
    if !crate::os::is_superuser() {
        return Ok(None);
    }
    if let Some(name) = requested {
        return host::lookup_user(name)
            .filter(|u| u.uid != 0)
            .map(Some)
            .ok_or_else(|| {
                cluster_error(format!(
                    "--pg-user `{name}` is not an unprivileged account on this system"
                ))
            });
    }
    ["postgres", "nobody"]
        .iter()
        .find_map(|n| host::lookup_user(n))
        .map(Some)
        .ok_or_else(|| {
            cluster_error(
                "caseload runs as root and PostgreSQL refuses root, but neither a `postgres` nor a `nobody` account exists to run it as; name one with --pg-user",
            )
        })
}

pub use host::{check_reachable, owner_of};

/// Make `dir` for the server to keep files in (a tablespace): created
/// mode 700, owned by `user` (the account the server runs as when caseload
/// is root), every ancestor searchable by it.
pub(crate) fn make_server_dir(dir: &Path, user: Option<&ServerUser>) -> Result<(), DbError> {
    if let Some(u) = user {
        check_reachable(dir, u)?;
    }
    std::fs::create_dir(dir)
        .map_err(|e| cluster_error(format!("creating `{}`: {e}", dir.display())))?;
    host::make_private(dir)?;
    if let Some(u) = user {
        host::chown(dir, u)?;
    }
    Ok(())
}

/// The last lines of the server log, for error messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(6).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Where clients reach the server.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A Unix socket in this directory, named for this port.
    Socket(PathBuf, u16),
    /// A loopback TCP port.
    Tcp(u16),
}

/// A running private cluster.
#[derive(Debug)]
pub struct Cluster {
    data_dir: PathBuf,
    log: PathBuf,
    endpoint: Endpoint,
    child: Option<Child>,
    pid: u32,
}

/// Unix socket paths are at most 107 bytes (`sun_path`).
const MAX_SOCKET_PATH: usize = 100;

fn free_port() -> Result<u16, DbError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| cluster_error(format!("finding a free loopback port: {e}")))
}

impl Cluster {
    /// Create a new cluster in `db_dir` (its data directory must not exist
    /// yet) and start it with `settings` (`name`, `value` pairs).
    pub fn create(
        db_dir: &Path,
        settings: &[(String, String)],
        user: Option<&ServerUser>,
    ) -> Result<Cluster, DbError> {
        let bins = find_binaries()?;
        let data_dir = db_dir.join(DATA_DIR);
        if data_dir.exists() {
            return Err(cluster_error(format!(
                "`{}` already exists; use --force to replace the case it holds",
                data_dir.display()
            )));
        }
        if let Some(u) = user {
            check_reachable(db_dir, u)?;
        }
        std::fs::create_dir(&data_dir).map_err(|e| {
            cluster_error(format!(
                "creating the data directory `{}`: {e}",
                data_dir.display()
            ))
        })?;
        host::make_private(&data_dir)?;
        if let Some(u) = user {
            host::chown(&data_dir, u)?;
        }
        let log = db_dir.join(LOG_FILE);
        let log_file = std::fs::File::create(&log)
            .map_err(|e| cluster_error(format!("creating `{}`: {e}", log.display())))?;
        let mut initdb = Command::new(&bins.initdb);
        initdb
            .arg("-D")
            .arg(&data_dir)
            .args([
                "--username",
                ROLE,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-instructions",
            ])
            .current_dir(host::neutral_dir())
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(|e| cluster_error(e.to_string()))?,
            )
            .stderr(log_file);
        host::run_as(&mut initdb, user);
        let status = initdb
            .status()
            .map_err(|e| cluster_error(format!("running `{}`: {e}", bins.initdb.display())))?;
        if !status.success() {
            return Err(cluster_error(format!(
                "initdb failed ({status}) for `{}`: {}",
                data_dir.display(),
                log_tail(&log)
            )));
        }
        Self::start_with(&bins, db_dir, settings, user)
    }

    /// Start the existing cluster in `db_dir` (to read a finished case).
    pub fn start_existing(
        db_dir: &Path,
        settings: &[(String, String)],
        user: Option<&ServerUser>,
    ) -> Result<Cluster, DbError> {
        let bins = find_binaries()?;
        let data_dir = db_dir.join(DATA_DIR);
        if !data_dir.join("PG_VERSION").is_file() {
            return Err(cluster_error(format!(
                "the case's PostgreSQL data directory `{}` is missing or is not a cluster",
                data_dir.display()
            )));
        }
        Self::start_with(&bins, db_dir, settings, user)
    }

    fn start_with(
        bins: &Binaries,
        db_dir: &Path,
        settings: &[(String, String)],
        user: Option<&ServerUser>,
    ) -> Result<Cluster, DbError> {
        // A loopback port found free can be taken before the server binds
        // it: try another a few times.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(bins, db_dir, settings, user) {
                Err(DbError::Cluster(m))
                    if attempt < 4 && m.contains("could not bind") && m.contains("127.0.0.1") =>
                {
                    continue;
                }
                other => return other,
            }
        }
    }

    fn start_once(
        bins: &Binaries,
        db_dir: &Path,
        settings: &[(String, String)],
        user: Option<&ServerUser>,
    ) -> Result<Cluster, DbError> {
        let data_dir = db_dir.join(DATA_DIR);
        refuse_running(&data_dir)?;
        let log = db_dir.join(LOG_FILE);
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| cluster_error(format!("opening `{}`: {e}", log.display())))?;
        const PORT: u16 = 5432;
        let socket = data_dir.join(format!(".s.PGSQL.{PORT}"));
        let endpoint = if host::UNIX_SOCKETS && socket.as_os_str().len() <= MAX_SOCKET_PATH {
            Endpoint::Socket(data_dir.clone(), PORT)
        } else {
            Endpoint::Tcp(free_port()?)
        };
        let mut cmd = Command::new(&bins.postgres);
        cmd.arg("-D").arg(&data_dir);
        match &endpoint {
            Endpoint::Socket(dir, port) => {
                cmd.arg("-p").arg(port.to_string());
                cmd.arg("-c").arg("listen_addresses=");
                cmd.arg("-c")
                    .arg(format!("unix_socket_directories={}", dir.display()));
            }
            Endpoint::Tcp(port) => {
                cmd.arg("-p").arg(port.to_string());
                cmd.arg("-c").arg("listen_addresses=127.0.0.1");
                cmd.arg("-c").arg("unix_socket_directories=");
            }
        }
        for (k, v) in settings {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        cmd.current_dir(host::neutral_dir())
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(|e| cluster_error(e.to_string()))?,
            )
            .stderr(log_file);
        host::detach_server(&mut cmd, user);
        let child = cmd
            .spawn()
            .map_err(|e| cluster_error(format!("starting `{}`: {e}", bins.postgres.display())))?;
        let pid = child.id();
        let mut cluster = Cluster {
            data_dir,
            log,
            endpoint,
            child: Some(child),
            pid,
        };
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn wait_ready(&mut self) -> Result<(), DbError> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(cluster_error(format!(
                    "the PostgreSQL server for `{}` exited at start ({status}): {}",
                    self.data_dir.display(),
                    log_tail(&self.log)
                )));
            }
            match self.connect() {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() > START_TIMEOUT => {
                    let _ = self.stop();
                    return Err(cluster_error(format!(
                        "the PostgreSQL server for `{}` did not accept connections within {} s ({e}): {}",
                        self.data_dir.display(),
                        START_TIMEOUT.as_secs(),
                        log_tail(&self.log)
                    )));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The server log.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Where clients reach it.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Connection settings for it.
    pub fn config(&self) -> postgres::Config {
        let mut c = postgres::Config::new();
        match &self.endpoint {
            Endpoint::Socket(dir, port) => {
                host::socket_config(&mut c, dir, *port);
            }
            Endpoint::Tcp(port) => {
                c.host("127.0.0.1").port(*port);
            }
        }
        c.user(ROLE)
            .dbname(DATABASE)
            .application_name("caseload")
            .connect_timeout(Duration::from_secs(10));
        c
    }

    /// Its connection settings as a libpq key/value string, for other
    /// processes (`caseload worker --db-url`).
    pub fn connection_string(&self) -> String {
        // Values quoted as libpq wants them: a socket directory may hold
        // spaces or quotes.
        let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
        let host = match &self.endpoint {
            Endpoint::Socket(dir, port) => {
                format!("host={} port={port}", quote(&dir.to_string_lossy()))
            }
            Endpoint::Tcp(port) => format!("host=127.0.0.1 port={port}"),
        };
        format!("{host} user={ROLE} dbname={DATABASE}")
    }

    /// Its connection settings for a client that reaches it over TCP at
    /// `address` (a network the server listens on, `listen_addresses`;
    /// see [`Cluster::trust_network`]).
    pub fn tcp_connection_string(&self, address: &str) -> String {
        let port = match &self.endpoint {
            Endpoint::Socket(_, port) | Endpoint::Tcp(port) => *port,
        };
        format!("host={address} port={port} user={ROLE} dbname={DATABASE}")
    }

    /// Let clients from `cidr` in without a password, as the private
    /// cluster lets local ones (its pg_hba.conf, reloaded): for workers in
    /// network namespaces of `caseload cluster --netns`.
    pub fn trust_network(&self, cidr: &str) -> Result<(), DbError> {
        let hba = self.data_dir.join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba)
            .map_err(|e| cluster_error(format!("reading `{}`: {e}", hba.display())))?;
        text.push_str(&format!("host all {ROLE} {cidr} trust\n"));
        std::fs::write(&hba, text)
            .map_err(|e| cluster_error(format!("writing `{}`: {e}", hba.display())))?;
        let sql = "SELECT pg_reload_conf()";
        self.connect()?
            .batch_execute(sql)
            .map_err(|e| crate::casedb::conn::pg_error(&e, sql))
    }

    /// A new connection.
    pub fn connect(&self) -> Result<postgres::Client, DbError> {
        self.config()
            .connect(postgres::NoTls)
            .map_err(|e| crate::casedb::conn::pg_error(&e, "connect"))
    }

    /// Whether the postmaster is still running (not exited, not a zombie).
    pub fn is_running(&self) -> bool {
        self.child.is_some() && host::server_running(self.pid)
    }

    /// Why the server stopped, from its log, if it is no longer running.
    pub fn stopped_because(&self) -> Option<String> {
        (!self.is_running()).then(|| {
            format!(
                "the PostgreSQL server for `{}` is no longer running: {}",
                self.data_dir.display(),
                log_tail(&self.log)
            )
        })
    }

    /// Stop the server: fast shutdown (active sessions are ended, the
    /// final checkpoint written), then harsher signals if it hangs; any
    /// server process left behind by a killed postmaster is ended too.
    pub fn stop(&mut self) -> Result<(), DbError> {
        self.stop_as(true)
    }

    /// Stop at once (immediate shutdown: no checkpoint; the next start
    /// recovers from the WAL), for a server that could not checkpoint (a
    /// full disk) and would retry its shutdown checkpoint for ever.
    pub fn stop_now(&mut self) -> Result<(), DbError> {
        self.stop_as(false)
    }

    fn stop_as(&mut self, fast: bool) -> Result<(), DbError> {
        let mut result = Ok(());
        if let Some(mut child) = self.child.take() {
            let pid = self.pid;
            let exited = host::stop_server(&mut child, &self.data_dir, fast);
            if !exited {
                result = Err(cluster_error(format!(
                    "the PostgreSQL server {pid} for `{}` did not stop",
                    self.data_dir.display()
                )));
            }
        }
        end_leftovers(&self.data_dir);
        result
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn wait_for(child: &mut Child, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

pub use host::cluster_processes;
use host::end_leftovers;

/// Refuse to start a second server on a data directory whose server is
/// still running (a case being written by another caseload).
fn refuse_running(data_dir: &Path) -> Result<(), DbError> {
    let pid_file = data_dir.join("postmaster.pid");
    let Ok(text) = std::fs::read_to_string(&pid_file) else {
        return Ok(());
    };
    let pid: Option<u32> = text.lines().next().and_then(|l| l.trim().parse().ok());
    if let Some(pid) = pid
        && cluster_processes(data_dir).contains(&pid)
    {
        return Err(cluster_error(format!(
            "a PostgreSQL server (pid {pid}) is already running on `{}`: another caseload is using this case",
            data_dir.display()
        )));
    }
    Ok(())
}

/// Unix: root's unprivileged server account, modes and owners, the
/// socket, process groups, the parent-death signal and signals to stop.
#[cfg(unix)]
mod host {
    use super::{STOP_TIMEOUT, ServerUser, cluster_error, wait_for};
    use crate::casedb::DbError;
    use std::ffi::CString;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    /// Whether the server can listen on a Unix socket.
    pub const UNIX_SOCKETS: bool = true;

    /// Where the server's processes work from (not the caller's directory,
    /// which the server account may not reach).
    pub fn neutral_dir() -> &'static Path {
        Path::new("/")
    }

    pub fn lookup_user(name: &str) -> Option<ServerUser> {
        let c = CString::new(name).ok()?;
        // SAFETY: getpwnam returns NULL or a pointer to a static passwd
        // record, read at once before any other passwd call.
        let pw = unsafe { libc::getpwnam(c.as_ptr()) };
        if pw.is_null() {
            return None;
        }
        // SAFETY: non-null, as checked.
        let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        Some(ServerUser {
            name: name.to_string(),
            uid,
            gid,
        })
    }

    /// The owner of `path`, as the account to start its server as.
    pub fn owner_of(path: &Path) -> Option<ServerUser> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(ServerUser {
            name: format!("uid {}", meta.uid()),
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }

    /// Refuse, with the directory named, when `user` cannot reach `dir`
    /// (every ancestor must be searchable by it).
    pub fn check_reachable(dir: &Path, user: &ServerUser) -> Result<(), DbError> {
        use std::os::unix::fs::MetadataExt;
        let mut ancestors: Vec<&Path> = dir.ancestors().collect();
        ancestors.reverse();
        for a in ancestors {
            let Ok(meta) = std::fs::metadata(a) else {
                continue;
            };
            let mode = meta.mode();
            let ok = if meta.uid() == user.uid {
                mode & 0o100 != 0
            } else if meta.gid() == user.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !ok {
                return Err(cluster_error(format!(
                    "PostgreSQL runs as `{}` (it refuses root), which cannot reach `{}` (mode {:o}); put that directory where that account can reach it, or run caseload as an unprivileged user",
                    user.name,
                    a.display(),
                    mode & 0o7777
                )));
            }
        }
        Ok(())
    }

    /// Mode 700, as PostgreSQL demands of its directories.
    pub fn make_private(dir: &Path) -> Result<(), DbError> {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| cluster_error(format!("setting `{}` to mode 700: {e}", dir.display())))
    }

    pub fn chown(path: &Path, user: &ServerUser) -> Result<(), DbError> {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).map_err(|e| {
            cluster_error(format!(
                "giving `{}` to `{}`: {e}",
                path.display(),
                user.name
            ))
        })
    }

    /// Run `cmd` as `user` (when caseload is root).
    pub fn run_as(cmd: &mut Command, user: Option<&ServerUser>) {
        if let Some(u) = user {
            cmd.uid(u.uid).gid(u.gid);
        }
    }

    /// The server in a process group of its own, as `user`, with a
    /// parent-death signal.
    pub fn detach_server(cmd: &mut Command, user: Option<&ServerUser>) {
        cmd.process_group(0);
        run_as(cmd, user);
        // SAFETY: prctl is async-signal-safe; nothing else runs between
        // fork and exec here.
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(|| {
                // Shut down (fast) if caseload dies; set after the uid
                // change, which would clear it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    pub fn socket_config(c: &mut postgres::Config, dir: &Path, port: u16) {
        c.host_path(dir).port(port);
    }

    /// Whether the postmaster `pid` is still running (not exited, not a
    /// zombie).
    pub fn server_running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let rest = s.get(s.rfind(')')? + 2..)?;
                rest.chars().next()
            })
            .is_some_and(|state| state != 'Z' && state != 'X')
    }

    /// Stop the postmaster `child`: SIGINT (fast shutdown) when `fast`,
    /// then SIGQUIT, then SIGKILL; whether it exited.
    pub fn stop_server(child: &mut Child, _data_dir: &Path, fast: bool) -> bool {
        // Our child, not yet reaped (so its pid is not reused).
        let pid = child.id();
        let signal = |s| crate::os::send_signal(pid, s, false);
        (fast && {
            signal(libc::SIGINT);
            wait_for(child, STOP_TIMEOUT)
        }) || {
            signal(libc::SIGQUIT);
            wait_for(child, Duration::from_secs(10))
        } || {
            signal(libc::SIGKILL);
            wait_for(child, Duration::from_secs(10))
        }
    }

    /// Server processes whose working directory is `data_dir`: every
    /// PostgreSQL process of a cluster works in its data directory, and no
    /// other process has reason to, so these are this cluster's and no one
    /// else's.
    pub fn cluster_processes(data_dir: &Path) -> Vec<u32> {
        let Ok(want) = std::fs::canonicalize(data_dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == want) {
                out.push(pid);
            }
        }
        out
    }

    /// End server processes a killed postmaster left behind (they exit by
    /// themselves once they notice, but not always before caseload exits).
    pub fn end_leftovers(data_dir: &Path) {
        let started = Instant::now();
        loop {
            let left = cluster_processes(data_dir);
            if left.is_empty() {
                return;
            }
            let signal = if started.elapsed() < Duration::from_secs(5) {
                libc::SIGQUIT
            } else {
                libc::SIGKILL
            };
            // Just read from /proc: they work in our data directory.
            for pid in left {
                crate::os::send_signal(pid, signal, false);
            }
            if started.elapsed() > Duration::from_secs(15) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Windows: caseload's own user, a loopback port, a new process group,
/// and `pg_ctl stop` (Windows has no signals).
#[cfg(windows)]
mod host {
    use super::{STOP_TIMEOUT, ServerUser, wait_for};
    use crate::casedb::DbError;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    /// PostgreSQL on Windows listens on TCP only.
    pub const UNIX_SOCKETS: bool = false;

    pub fn neutral_dir() -> PathBuf {
        std::env::temp_dir()
    }

    /// No root: the server runs as caseload's user.
    pub fn lookup_user(_name: &str) -> Option<ServerUser> {
        None
    }

    pub fn owner_of(_path: &Path) -> Option<ServerUser> {
        None
    }

    pub fn check_reachable(_dir: &Path, _user: &ServerUser) -> Result<(), DbError> {
        Ok(())
    }

    /// The directory keeps the ACL it inherits (the user's own).
    pub fn make_private(_dir: &Path) -> Result<(), DbError> {
        Ok(())
    }

    pub fn chown(_path: &Path, _user: &ServerUser) -> Result<(), DbError> {
        Ok(())
    }

    pub fn run_as(_cmd: &mut Command, _user: Option<&ServerUser>) {}

    /// A process group of its own (`CREATE_NEW_PROCESS_GROUP`), so a
    /// Ctrl-C at the console reaches caseload, which stops it in order.
    pub fn detach_server(cmd: &mut Command, _user: Option<&ServerUser>) {
        use std::os::windows::process::CommandExt;
        cmd.creation_flags(0x0000_0200);
    }

    pub fn socket_config(c: &mut postgres::Config, _dir: &Path, port: u16) {
        c.host("127.0.0.1").port(port);
    }

    pub fn server_running(pid: u32) -> bool {
        crate::os::process_alive(pid)
    }

    /// `pg_ctl stop -m fast` (or `immediate`), then the postmaster
    /// terminated if it hangs; whether it exited.
    pub fn stop_server(child: &mut Child, data_dir: &Path, fast: bool) -> bool {
        let pg_ctl = super::find_binaries().ok().map(|b| {
            b.postgres
                .with_file_name(format!("pg_ctl{}", std::env::consts::EXE_SUFFIX))
        });
        let mode = if fast { "fast" } else { "immediate" };
        if let Some(pg_ctl) = pg_ctl {
            let _ = Command::new(pg_ctl)
                .args(["stop", "-m", mode, "-D"])
                .arg(data_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        wait_for(
            child,
            if fast {
                STOP_TIMEOUT
            } else {
                Duration::from_secs(10)
            },
        ) || {
            let _ = child.kill();
            wait_for(child, Duration::from_secs(10))
        }
    }

    /// Windows cannot list a cluster's processes by working directory;
    /// the postmaster ends its own children.
    pub fn cluster_processes(_data_dir: &Path) -> Vec<u32> {
        Vec::new()
    }

    pub fn end_leftovers(_data_dir: &Path) {}
}
