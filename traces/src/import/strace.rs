//! strace output (`strace -f -ttt -T -yy -e trace=desc,file,process,network,futex
//! -o FILE CMD`) into [`RawEvent`]s.
//!
//! Each line is `[PID ]SECONDS.FRACTION CALL(ARGS) = RET <DURATION>` (or
//! `[pid PID] ...` when strace writes to its standard error). A call
//! interrupted by another thread's is split into `CALL(ARGS <unfinished
//! ...>` and `<... CALL resumed>ARGS) = RET <DURATION>`; the two halves are
//! joined, timed from the first. With `-y` every descriptor carries its
//! path (`3</mnt/ev/a.E01>`); without it, descriptors are followed from
//! the calls that open, duplicate and close them. File positions are kept
//! per open file (shared by `dup` and `fork`, as the kernel shares them),
//! so `read` and `write` get the offset `pread` would have named.
//!
//! What threads wait for from each other becomes messages (see
//! `RawOp::Send`, `RawOp::Wake`): bytes through pipes and connected
//! sockets (`-yy` names a socket's two ends), futex wake-ups and the
//! waits they end, a task's making and its end, a connection accepted,
//! a signal sent and received. A receive or woken wait begins when its
//! thread began waiting (the polls and timed waits before it).
//!
//! Not seen by strace, and said so in the import's report: I/O through a
//! memory mapping (`mmap` of a file is counted as such), and the kernel's
//! own readahead and writeback.

use super::error::{FormatError, Location};
use crate::event::{RawEvent, RawOp};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::BufRead;
use std::rc::Rc;

const FORMAT: &str = "strace";

/// What the reader saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StraceInfo {
    /// Lines read.
    pub lines: u64,
    /// System calls turned into events.
    pub calls: u64,
    /// Calls left unfinished when the output ended (the tracee was
    /// killed, or the output cut short).
    pub unfinished: u64,
    /// Calls that were not system calls on files (signals, exits).
    pub other_lines: u64,
    /// Whether descriptors carried their paths (`-y`).
    pub with_paths: bool,
    /// Tasks that appeared with no clone, fork or vfork before them (a
    /// trace taken without `-e trace=process`, or attached to a running
    /// process): what they inherited is not known.
    pub orphans: u64,
    /// First timestamp to last, nanoseconds.
    pub span_ns: u64,
    /// Calls by their duration (`-T`), in microseconds: `[k]` counts
    /// calls of k µs (the last: 1 ms and more).
    pub durations_us: Vec<u64>,
}

impl StraceInfo {
    /// The tracer stopped the traced threads this many times: each call
    /// and each signal.
    pub fn stops(&self) -> u64 {
        self.calls + self.other_lines
    }

    /// The tracer's share of each call's recorded duration: `-T` times a
    /// call from its entry stop to its exit stop, so even a call that takes
    /// the kernel a microsecond shows the tracer's handling. The fastest
    /// tenth of the calls are nothing else; their duration is taken as it.
    pub fn in_call_ns(&self) -> u64 {
        let total: u64 = self.durations_us.iter().sum();
        let mut seen = 0;
        for (us, n) in self.durations_us.iter().enumerate() {
            seen += n;
            if seen * 10 >= total && total > 0 {
                return us as u64 * 1000;
            }
        }
        0
    }
}

/// Whether `line` looks like strace output with timestamps (for guessing
/// the format).
pub fn looks_like_line(line: &str) -> bool {
    split_line(line).is_some_and(|(_, t, rest)| {
        t.contains('.')
            && (rest.starts_with("<...")
                || rest.starts_with("+++")
                || rest.starts_with("---")
                || rest.split('(').next().is_some_and(is_ident))
    })
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `(pid, timestamp, rest)` of a line.
fn split_line(line: &str) -> Option<(Option<u32>, &str, &str)> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (pid, rest) = if let Some(r) = line.strip_prefix("[pid ") {
        let (p, r) = r.split_once(']')?;
        (Some(p.trim().parse().ok()?), r.trim_start())
    } else {
        let (first, r) = line.split_once(' ')?;
        if first.bytes().all(|b| b.is_ascii_digit()) && !first.is_empty() {
            (Some(first.parse().ok()?), r.trim_start())
        } else {
            (None, line)
        }
    };
    let (t, rest) = rest.split_once(' ')?;
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    Some((pid, t, rest))
}

/// Nanoseconds of `SECONDS.FRACTION` (microseconds or nanoseconds).
fn parse_time(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.').unwrap_or((t, ""));
    let secs: u64 = s.parse().ok()?;
    if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    let ns = frac * 10u64.pow(9 - f.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// An open file: its path and position (shared by duplicates).
#[derive(Debug, Clone)]
struct Open {
    path: String,
    pos: Rc<Cell<u64>>,
    append: bool,
    direct: bool,
    directory: bool,
    /// Not a file (pipe, socket, ...): its kind.
    not_file: Option<String>,
}

type FdTable = Rc<std::cell::RefCell<HashMap<i64, Open>>>;

/// A process or thread.
#[derive(Debug, Clone)]
struct Task {
    tgid: u32,
    name: Rc<std::cell::RefCell<String>>,
    fds: FdTable,
    /// The working directory, once known (shared by threads, as
    /// `CLONE_FS` shares it): relative paths of calls without a directory
    /// descriptor (`rename`, `unlink`, `mkdir`, `stat`: a PostgreSQL
    /// server's own renames into its data folder) resolve against it.
    cwd: Rc<std::cell::RefCell<Option<String>>>,
}

struct Reader<'s> {
    sink: &'s mut dyn FnMut(RawEvent),
    tasks: HashMap<u32, Task>,
    unfinished: HashMap<u32, (u64, String)>,
    /// Sizes written so far per path, for appends.
    sizes: HashMap<String, u64>,
    /// Folders seen (made, or holding a file opened): an fsync of one of
    /// them is a directory sync, whatever flags it was opened with.
    dirs: std::collections::HashSet<String>,
    /// Per thread, the calls (and signal stops) since its last event.
    pending: HashMap<u32, u32>,
    /// Per thread, when the waits (`poll`, `epoll_wait`, `select`, sleeps)
    /// it has made since its last event began: a receive or a woken wait
    /// that follows began then.
    ready_since: HashMap<u32, u64>,
    /// Per thread, when its last wait that timed out ended, if its waits
    /// since its last event ended so: what it does next, it does because
    /// the time ran out (a `timer` record before it).
    timed_out: HashMap<u32, u64>,
    /// Every thread seen and its process, ended ones too (a join's wait
    /// names the thread it waits for).
    tids: HashMap<u32, u32>,
    /// Threads and processes made by a call the trace holds, and those of
    /// them whose first event has been emitted.
    spawned: std::collections::HashSet<u32>,
    begun: std::collections::HashSet<u32>,
    /// The first and last timestamps seen.
    first_ns: Option<u64>,
    last_ns: u64,
    info: StraceInfo,
    first_pid: Option<u32>,
}

/// Read strace output, one line at a time.
pub fn read(
    mut input: impl BufRead,
    sink: &mut dyn FnMut(RawEvent),
) -> Result<StraceInfo, FormatError> {
    let mut r = Reader {
        sink,
        tasks: HashMap::new(),
        unfinished: HashMap::new(),
        sizes: HashMap::new(),
        dirs: Default::default(),
        pending: HashMap::new(),
        ready_since: HashMap::new(),
        timed_out: HashMap::new(),
        tids: HashMap::new(),
        spawned: Default::default(),
        begun: Default::default(),
        first_ns: None,
        last_ns: 0,
        info: StraceInfo {
            durations_us: vec![0; 1001],
            ..StraceInfo::default()
        },
        first_pid: None,
    };
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|source| FormatError::Io {
                format: FORMAT,
                source,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.last() != Some(&b'\n') {
            return Err(FormatError::bad(
                FORMAT,
                Location::Line(line_no),
                "the last line is incomplete (the output was cut short)",
            ));
        }
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end();
        if line.is_empty() {
            continue;
        }
        r.info.lines += 1;
        r.line(line, line_no)?;
    }
    r.info.unfinished = r.unfinished.len() as u64;
    r.info.span_ns = r.last_ns.saturating_sub(r.first_ns.unwrap_or(r.last_ns));
    Ok(r.info)
}

impl Reader<'_> {
    fn task(&mut self, pid: u32) -> Task {
        if let Some(t) = self.tasks.get(&pid) {
            return t.clone();
        }
        // A child often makes its first calls before its parent's clone
        // returns (strace shows the parent's call unfinished): it is the
        // child of the latest unfinished clone, fork or vfork, and has
        // that parent's descriptors (the study's server log: written by
        // initdb through descriptors dup2'd before its parent's fork
        // returned, every write was put at offset 0).
        let parent = self
            .unfinished
            .iter()
            .filter(|(p, (_, head))| spawn_call(head) && self.tasks.contains_key(p))
            .max_by_key(|(p, (t, _))| (*t, **p))
            .map(|(p, (_, head))| (*p, head.clone()));
        if let Some((p, head)) = parent
            && let Some(parent) = self.tasks.get(&p).cloned()
        {
            self.spawn(&parent, pid, clone_flags(&head));
        } else {
            if self.first_pid.is_some_and(|f| f != pid) {
                self.info.orphans += 1;
            }
            self.tasks.insert(
                pid,
                Task {
                    tgid: pid,
                    name: Rc::new(std::cell::RefCell::new(format!("pid{pid}"))),
                    fds: Rc::default(),
                    cwd: Rc::default(),
                },
            );
        }
        let task = self.tasks[&pid].clone();
        self.tids.insert(pid, task.tgid);
        task
    }

    /// Make task `child` of `parent` with clone's `flags`: a thread, or a
    /// process with copies of the parent's descriptors (which share their
    /// positions, as the kernel's open files do) and working directory.
    fn spawn(&mut self, parent: &Task, child: u32, flags: &str) {
        let thread = flags.contains("CLONE_THREAD");
        let fds = if flags.contains("CLONE_FILES") {
            Rc::clone(&parent.fds)
        } else {
            Rc::new(std::cell::RefCell::new(parent.fds.borrow().clone()))
        };
        let name = if thread {
            Rc::clone(&parent.name)
        } else {
            Rc::new(std::cell::RefCell::new(parent.name.borrow().clone()))
        };
        let cwd = if flags.contains("CLONE_FS") {
            Rc::clone(&parent.cwd)
        } else {
            Rc::new(std::cell::RefCell::new(parent.cwd.borrow().clone()))
        };
        let tgid = if thread { parent.tgid } else { child };
        self.tids.insert(child, tgid);
        self.spawned.insert(child);
        self.tasks.insert(
            child,
            Task {
                tgid,
                name,
                fds,
                cwd,
            },
        );
    }

    fn line(&mut self, line: &str, no: u64) -> Result<(), FormatError> {
        let bad = |reason: String| FormatError::bad(FORMAT, Location::Line(no), reason);
        let Some((pid, t, rest)) = split_line(line) else {
            return Err(bad(format!(
                "not an strace line with a timestamp (take traces with `strace -f -ttt -T -y`): `{}`",
                line.chars().take(80).collect::<String>()
            )));
        };
        let t_ns = parse_time(t).ok_or_else(|| bad(format!("bad timestamp `{t}`")))?;
        // Without -f there is one process and no pid column.
        let pid = pid.or(self.first_pid).unwrap_or(0);
        self.first_pid.get_or_insert(pid);
        self.first_ns.get_or_insert(t_ns);
        self.last_ns = self.last_ns.max(t_ns);
        // Every line is a stop of the thread: a call, a half of one, a
        // signal; the halves of one call count once (at its resumption).
        if !rest.ends_with("<unfinished ...>") {
            *self.pending.entry(pid).or_default() += 1;
        }
        if rest.starts_with("+++") || rest.starts_with("---") {
            self.info.other_lines += 1;
            // A signal sent by a process (`kill`) or by the kernel for a
            // child's end: what the thread waited for, if it waited.
            if let Some(sig) = rest.strip_prefix("--- ") {
                let field = |name: &str| {
                    sig.split([' ', ',', '{', '}'])
                        .find_map(|f| f.strip_prefix(name))
                        .map(str::to_string)
                };
                let code = field("si_code=").unwrap_or_default();
                let task = self.task(pid);
                let key = if code.starts_with("CLD_") {
                    field("si_pid=").map(|p| format!("exit:{p}"))
                } else if matches!(code.as_str(), "SI_USER" | "SI_TKILL" | "SI_QUEUE") {
                    Some(format!("signal:{}", task.tgid))
                } else {
                    None
                };
                if let Some(key) = key {
                    self.emit(signal_event(&task, pid, t_ns, RawOp::Woken { key }));
                }
            }
            // A task that ended: its number may come back as another's.
            if rest.starts_with("+++ exited") || rest.starts_with("+++ killed") {
                // What joins or reaps it waited for this.
                if let Some(task) = self.tasks.remove(&pid) {
                    let key = format!("exit:{pid}");
                    self.emit(signal_event(&task, pid, t_ns, RawOp::Wake { key }));
                }
            }
            return Ok(());
        }
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let (name, tail) = resumed
                .split_once(" resumed>")
                .ok_or_else(|| bad("a resumed call without `resumed>`".into()))?;
            let Some((start, head)) = self.unfinished.remove(&pid) else {
                // Its first half came before the trace began: nothing to join.
                self.info.other_lines += 1;
                return Ok(());
            };
            let joined = format!("{head}{tail}");
            if !head.starts_with(name.trim()) {
                return Err(bad(format!(
                    "`{name}` resumed, but `{head}` was unfinished"
                )));
            }
            return self.call(pid, start, &joined, no);
        }
        if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            self.unfinished
                .insert(pid, (t_ns, head.trim_end().to_string()));
            return Ok(());
        }
        self.call(pid, t_ns, rest, no)
    }

    /// A whole call: `NAME(ARGS) = RET [<DURATION>]`.
    fn call(&mut self, pid: u32, t_ns: u64, text: &str, no: u64) -> Result<(), FormatError> {
        let bad = |reason: String| FormatError::bad(FORMAT, Location::Line(no), reason);
        let open = text
            .find('(')
            .ok_or_else(|| bad(format!("no `(` in `{text}`")))?;
        let name = &text[..open];
        if !is_ident(name) {
            return Err(bad(format!("`{name}` is not a system call name")));
        }
        let body = &text[open + 1..];
        let (args_end, ret_text) =
            split_result(body).ok_or_else(|| bad(format!("no `) = ` result in `{name}(...)`")))?;
        let args = split_args(&body[..args_end]);
        let (ret, annotation, dur_ns) = parse_result(ret_text);
        let ok = ret.is_some_and(|v| v >= 0);
        let result = ret_text.split(" <").next().unwrap_or("").trim().to_string();
        self.info.calls += 1;
        if let Some(slot) = self
            .info
            .durations_us
            .get_mut(((dur_ns / 1000) as usize).min(1000))
        {
            *slot += 1;
        }
        let task = self.task(pid);
        // `-y` writes the working directory beside `AT_FDCWD`: the surest
        // word on it (a chdir before the trace began included).
        if let Some(cwd) = args
            .iter()
            .find(|a| a.starts_with("AT_FDCWD<"))
            .and_then(|a| annotation_of(a))
        {
            *task.cwd.borrow_mut() = Some(cwd);
        }
        let event = |op: RawOp, path: String, direct: bool| RawEvent {
            t_ns,
            dur_ns,
            process: task.name.borrow().clone(),
            pid: task.tgid,
            tid: pid,
            op,
            path,
            ok,
            result: result.clone(),
            direct,
            paging: false,
            // Set by `emit`: the calls since this thread's last event.
            calls: 0,
        };
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
        match name {
            "execve" | "execveat" => {
                let path = unquote(if name == "execve" { arg(0) } else { arg(1) });
                if ok || ret.is_none() {
                    let base = path.rsplit('/').next().unwrap_or(&path).to_string();
                    *task.name.borrow_mut() = base;
                }
                self.emit(event(RawOp::Stat, path, false));
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                // A child already seen was made from this call when it
                // first appeared (see `task`).
                let child = ret.filter(|&c| c > 0).and_then(|c| u32::try_from(c).ok());
                if let Some(child) = child
                    && !self.tasks.contains_key(&child)
                    && !self.begun.contains(&child)
                {
                    self.spawn(&task, child, clone_flags(text));
                }
                // The child's first call waits for this one (`emit`).
                let raw = match child {
                    Some(child) => RawOp::Wake {
                        key: format!("spawn:{child}"),
                    },
                    None => RawOp::Other(name.to_string()),
                };
                self.emit(event(raw, String::new(), false));
            }
            "open" | "openat" | "openat2" | "creat" => {
                let (dir, path_arg, flags) = match name {
                    "open" => (None, arg(0), arg(1).to_string()),
                    "creat" => (None, arg(0), "O_CREAT|O_WRONLY|O_TRUNC".to_string()),
                    "openat" => (Some(arg(0)), arg(1), arg(2).to_string()),
                    _ => (
                        Some(arg(0)),
                        arg(1),
                        arg(2).trim_start_matches("{flags=").to_string(),
                    ),
                };
                let path = annotation
                    .clone()
                    .filter(|_| ok)
                    .unwrap_or_else(|| resolve(&task, dir, &unquote(path_arg)));
                let created = flags.contains("O_TRUNC") || flags.contains("O_EXCL");
                let directory = flags.contains("O_DIRECTORY");
                let direct = flags.contains("O_DIRECT");
                if ok {
                    if let Some(fd) = ret {
                        let kind = not_file(&path);
                        task.fds.borrow_mut().insert(
                            fd,
                            Open {
                                path: path.clone(),
                                pos: Rc::new(Cell::new(0)),
                                append: flags.contains("O_APPEND"),
                                direct,
                                directory,
                                not_file: kind,
                            },
                        );
                    }
                    if created {
                        self.sizes.insert(path.clone(), 0);
                    }
                    let mut p = path.as_str();
                    while let Some(i) = p.rfind('/').filter(|&i| i > 0) {
                        p = &p[..i];
                        if !self.dirs.insert(p.to_string()) {
                            break;
                        }
                    }
                    self.emit(event(RawOp::Open { created, directory }, path, direct));
                } else {
                    self.emit(event(RawOp::Stat, path, direct));
                }
            }
            "close" => {
                let fd = parse_fd(arg(0));
                let open = fd.and_then(|fd| task.fds.borrow_mut().remove(&fd));
                let path = fd_path(open.as_ref(), arg(0));
                if let Some(kind) = open
                    .as_ref()
                    .and_then(|o| o.not_file.clone())
                    .or_else(|| not_file(&path))
                {
                    self.emit(event(RawOp::NotFile(kind), path, false));
                } else {
                    self.emit(event(RawOp::Close, path, false));
                }
            }
            "dup" | "dup2" | "dup3" | "fcntl" | "fcntl64" => {
                let is_dup = name != "fcntl" && name != "fcntl64" || arg(1).starts_with("F_DUPFD");
                if is_dup
                    && let (Some(old), Some(new)) = (parse_fd(arg(0)), ret.filter(|&r| r >= 0))
                {
                    let copy = task.fds.borrow().get(&old).cloned();
                    if let Some(copy) = copy {
                        task.fds.borrow_mut().insert(new, copy);
                    }
                }
            }
            "sendto" | "send" | "sendmsg" | "recvfrom" | "recv" | "recvmsg" => {
                let send = name.starts_with("send");
                let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                let len = ret.filter(|&r| r >= 0).unwrap_or(0) as u64;
                match stream_of(&path, send) {
                    Some(stream) => self.emit(event(message(send, stream, len), path, false)),
                    None => {
                        let kind = not_file(&path).unwrap_or_else(|| "socket descriptor".into());
                        self.emit(event(RawOp::NotFile(kind), path, false));
                    }
                }
            }
            "read" | "readv" | "pread64" | "preadv" | "preadv2" | "write" | "writev"
            | "pwrite64" | "pwritev" | "pwritev2" => {
                let write = name.contains("write");
                let fd = parse_fd(arg(0));
                let open = fd.and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                if !write && path == "anon_inode:[signalfd]" && ret.is_some_and(|r| r > 0) {
                    let key = format!("signal:{}", task.tgid);
                    self.emit(event(RawOp::Woken { key }, String::new(), false));
                    return Ok(());
                }
                if let Some(stream) = stream_of(&path, write) {
                    let len = ret.filter(|&r| r >= 0).unwrap_or(0) as u64;
                    self.emit(event(message(write, stream, len), path, false));
                    return Ok(());
                }
                if let Some(kind) = open
                    .as_ref()
                    .and_then(|o| o.not_file.clone())
                    .or_else(|| not_file(&path))
                {
                    self.emit(event(RawOp::NotFile(kind), path, false));
                    return Ok(());
                }
                if path.is_empty() {
                    self.emit(event(RawOp::Other("I/O on a descriptor opened before the trace (path unknown; take it with -y)".into()), path, false));
                    return Ok(());
                }
                let len = ret.filter(|&r| r >= 0).unwrap_or(0) as u64;
                // pread64/pwrite64's offset is the 4th argument; preadv's
                // the 4th too (-1 in preadv2 means the file position).
                let explicit = match name {
                    "pread64" | "pwrite64" | "preadv" | "pwritev" | "preadv2" | "pwritev2" => {
                        arg(3).parse::<i64>().ok().filter(|&o| o >= 0)
                    }
                    _ => None,
                };
                let offset = match (explicit, &open) {
                    (Some(o), _) => o as u64,
                    (None, Some(o)) if write && o.append => {
                        let end = self.sizes.get(&path).copied().unwrap_or(0);
                        o.pos.set(end);
                        end
                    }
                    (None, Some(o)) => o.pos.get(),
                    (None, None) => 0,
                };
                if explicit.is_none()
                    && let Some(o) = &open
                {
                    o.pos.set(offset + len);
                }
                if write && ok {
                    let size = self.sizes.entry(path.clone()).or_insert(0);
                    *size = (*size).max(offset + len);
                }
                let direct = open.as_ref().is_some_and(|o| o.direct);
                let op = if write {
                    RawOp::Write { offset, len }
                } else {
                    RawOp::Read { offset, len }
                };
                self.emit(event(op, path, direct));
            }
            "lseek" | "_llseek" => {
                if let (Some(fd), Some(pos)) = (parse_fd(arg(0)), ret.filter(|&r| r >= 0))
                    && let Some(open) = task.fds.borrow().get(&fd)
                {
                    open.pos.set(pos as u64);
                }
            }
            "fsync" | "fdatasync" => {
                let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                let dir = open.is_some_and(|o| o.directory) || self.dirs.contains(&path);
                let op = if dir { RawOp::DirSync } else { RawOp::Sync };
                self.emit(event(op, path, false));
            }
            // Writeback started (and perhaps waited for), not a sync: no
            // device cache flush, no metadata. Replayed as an fsync it cost
            // a revolution per file where the traced call cost microseconds
            // (initdb starts writeback of its ~1,000 files this way before
            // fsyncing them).
            "sync_file_range" | "sync_file_range2" => {
                let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                let dir = open.is_some_and(|o| o.directory) || self.dirs.contains(&path);
                // sync_file_range2 puts the flags second (ARM, PowerPC).
                let (off, len, flags) = if name == "sync_file_range2" {
                    (arg(2), arg(3), arg(1))
                } else {
                    (arg(1), arg(2), arg(3))
                };
                let op = if dir {
                    RawOp::Other("writeback of a folder".into())
                } else {
                    RawOp::Writeback {
                        offset: off.parse().unwrap_or(0),
                        len: len.parse().unwrap_or(0),
                        wait: writeback_waits(flags),
                    }
                };
                self.emit(event(op, path, false));
            }
            "ftruncate" | "ftruncate64" | "truncate" | "truncate64" => {
                let path = if name.starts_with('f') {
                    let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                    fd_path(open.as_ref(), arg(0))
                } else {
                    resolve(&task, None, &unquote(arg(0)))
                };
                let size = arg(1).parse::<u64>().unwrap_or(0);
                if ok {
                    self.sizes.insert(path.clone(), size);
                }
                self.emit(event(RawOp::Truncate { size }, path, false));
            }
            "fallocate" => {
                let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                let (mode, off, len) = (
                    arg(1),
                    arg(2).parse::<u64>().unwrap_or(0),
                    arg(3).parse::<u64>().unwrap_or(0),
                );
                if mode == "0" {
                    let size = self.sizes.get(&path).copied().unwrap_or(0).max(off + len);
                    if ok {
                        self.sizes.insert(path.clone(), size);
                    }
                    self.emit(event(RawOp::Truncate { size }, path, false));
                } else {
                    self.emit(event(
                        RawOp::Other(format!("fallocate mode {mode}")),
                        path,
                        false,
                    ));
                }
            }
            "rename" | "renameat" | "renameat2" => {
                let (from, to) = if name == "rename" {
                    (
                        resolve(&task, None, &unquote(arg(0))),
                        resolve(&task, None, &unquote(arg(1))),
                    )
                } else {
                    (
                        resolve(&task, Some(arg(0)), &unquote(arg(1))),
                        resolve(&task, Some(arg(2)), &unquote(arg(3))),
                    )
                };
                if ok && let Some(size) = self.sizes.remove(&from) {
                    self.sizes.insert(to.clone(), size);
                }
                self.emit(event(RawOp::Rename { to }, from, false));
            }
            "unlink" | "unlinkat" | "rmdir" => {
                let path = if name == "unlinkat" {
                    resolve(&task, Some(arg(0)), &unquote(arg(1)))
                } else {
                    resolve(&task, None, &unquote(arg(0)))
                };
                self.sizes.remove(&path);
                self.emit(event(RawOp::Remove, path, false));
            }
            "mkdir" | "mkdirat" => {
                let path = if name == "mkdirat" {
                    resolve(&task, Some(arg(0)), &unquote(arg(1)))
                } else {
                    resolve(&task, None, &unquote(arg(0)))
                };
                self.dirs.insert(path.clone());
                self.emit(event(RawOp::Mkdir, path, false));
            }
            "stat" | "lstat" | "stat64" | "lstat64" | "access" | "readlink" | "statfs"
            | "chdir" => {
                let path = resolve(&task, None, &unquote(arg(0)));
                if name == "chdir" && ok {
                    *task.cwd.borrow_mut() = Some(path.clone());
                }
                self.emit(event(RawOp::Stat, path, false));
            }
            "newfstatat" | "fstatat64" | "statx" | "faccessat" | "faccessat2" | "readlinkat" => {
                let rel = unquote(arg(1));
                let path = if rel.is_empty() {
                    // AT_EMPTY_PATH: the descriptor itself.
                    let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                    fd_path(open.as_ref(), arg(0))
                } else {
                    resolve(&task, Some(arg(0)), &rel)
                };
                self.emit(event(RawOp::Stat, path, false));
            }
            "fstat" | "fstat64" | "getdents" | "getdents64" | "fstatfs" | "fchdir" => {
                let open = parse_fd(arg(0)).and_then(|fd| task.fds.borrow().get(&fd).cloned());
                let path = fd_path(open.as_ref(), arg(0));
                if name == "fchdir" && ok && !path.is_empty() {
                    *task.cwd.borrow_mut() = Some(path.clone());
                }
                if let Some(kind) = open
                    .as_ref()
                    .and_then(|o| o.not_file.clone())
                    .or_else(|| not_file(&path))
                {
                    self.emit(event(RawOp::NotFile(kind), path, false));
                } else {
                    self.emit(event(RawOp::Stat, path, false));
                }
            }
            "mmap" | "mmap2" => {
                let fd = parse_fd(arg(4)).filter(|&fd| fd >= 0);
                if let Some(fd) = fd {
                    let open = task.fds.borrow().get(&fd).cloned();
                    let path = fd_path(open.as_ref(), arg(4));
                    self.emit(event(RawOp::Map, path, false));
                }
            }
            "futex" => {
                // Private futexes are per process (their addresses are the
                // process's own); shared ones (a thread's exit clears and
                // wakes its id word) by address.
                let (addr, op) = (arg(0), arg(1));
                let key = if op.contains("_PRIVATE") {
                    format!("futex:{}:{addr}", task.tgid)
                } else {
                    format!("futex:{addr}")
                };
                let woke = ret.is_some_and(|r| r > 0);
                if op.starts_with("FUTEX_WAIT") {
                    // A timed wait that ran out is a timer (a sampler's
                    // or a pacing loop's condition-variable wait).
                    if result.contains("ETIMEDOUT") {
                        self.ready_since.entry(pid).or_insert(t_ns);
                        self.note_timeout(pid, t_ns, dur_ns);
                    } else {
                        self.timed_out.remove(&pid);
                    }
                }
                let raw = if op.starts_with("FUTEX_WAKE") && woke {
                    RawOp::Wake { key }
                } else if op.starts_with("FUTEX_WAIT") && arg(2) == "2" {
                    // A contended lock (glibc's and Rust's mutexes wait on
                    // state 2): who held it then is chance of timing, not
                    // what the waiter needed; a replay whose threads run
                    // at other speeds must not wait for that holder.
                    RawOp::Other("futex (a lock's wait)".into())
                } else if op.starts_with("FUTEX_WAIT") && ret == Some(0) {
                    // A join waits on the thread's id word for the value
                    // of its id, until the kernel clears it at its exit.
                    let joined = arg(2)
                        .parse::<u32>()
                        .ok()
                        .filter(|&v| v != pid && self.tids.get(&v) == Some(&task.tgid));
                    match joined {
                        Some(tid) => RawOp::Woken {
                            key: format!("exit:{tid}"),
                        },
                        None if op.contains("_PRIVATE") => RawOp::Woken { key },
                        // A shared futex between processes is a semaphore
                        // in shared memory (a database server's lock
                        // waits): contention, as a lock's is.
                        None => RawOp::Other("futex (a shared semaphore's wait)".into()),
                    }
                } else if op.starts_with("FUTEX_WAIT") && result.contains("ETIMEDOUT") {
                    RawOp::Other(FUTEX_RAN_OUT.into())
                } else {
                    RawOp::Other("futex".into())
                };
                self.emit(event(raw, String::new(), false));
            }
            "connect" => {
                // A connection made: the server's accept of it waits for
                // this. A non-blocking one is made when it says it began.
                let begun = ok || result.contains("EINPROGRESS");
                let key = connection_key(annotation_of(arg(0)).as_deref().unwrap_or(""), arg(1))
                    .filter(|_| begun);
                let raw = match key {
                    Some(key) => RawOp::Wake { key },
                    None => RawOp::Other(name.to_string()),
                };
                self.emit(event(raw, String::new(), false));
            }
            "accept" | "accept4" => {
                let raw = match annotation.as_deref().filter(|_| ok).and_then(accepted_key) {
                    Some(key) => RawOp::Woken { key },
                    None => RawOp::Other(name.to_string()),
                };
                self.emit(event(raw, String::new(), false));
            }
            "kill" | "tkill" | "tgkill" => {
                // To a process (`kill`, `tgkill`) or a thread (`tkill`);
                // signal 0 only asks whether it exists.
                let (target, sig) = match name {
                    "tgkill" => (arg(0).parse::<u32>().ok(), arg(2)),
                    "tkill" => (
                        arg(0)
                            .parse::<u32>()
                            .ok()
                            .and_then(|t| self.tids.get(&t).copied()),
                        arg(1),
                    ),
                    _ => (arg(0).parse::<u32>().ok(), arg(1)),
                };
                let raw = match target.filter(|&t| t > 0 && ok && sig != "0") {
                    Some(t) => RawOp::Wake {
                        key: format!("signal:{t}"),
                    },
                    None => RawOp::Other(name.to_string()),
                };
                self.emit(event(raw, String::new(), false));
            }
            "wait4" => {
                let raw = match ret.filter(|&r| r > 0) {
                    Some(child) => RawOp::Woken {
                        key: format!("exit:{child}"),
                    },
                    None => RawOp::Other(name.to_string()),
                };
                self.emit(event(raw, String::new(), false));
            }
            other => {
                self.emit(event(RawOp::Other(other.to_string()), String::new(), false));
                // A wait that found a descriptor ready: what it waited for
                // is what the thread receives next (`emit`).
                // Waits that timed out count too: a thread that sleeps in
                // timed waits, doing nothing the trace keeps, until a
                // message or a signal wakes it was waiting for that all
                // along (a server process idle between its timeouts until
                // its postmaster signalled it).
                if is_poll(other) || is_sleep(other) {
                    self.ready_since.entry(pid).or_insert(t_ns);
                    // A poll that found nothing ready ran out of time; a
                    // sleep always does (unless a signal cut it short).
                    let ran_out = if is_poll(other) {
                        ret == Some(0)
                    } else {
                        ok && matches!(other, "nanosleep" | "clock_nanosleep")
                    };
                    if ran_out {
                        self.note_timeout(pid, t_ns, dur_ns);
                    } else {
                        self.timed_out.remove(&pid);
                    }
                }
            }
        }
        Ok(())
    }

    /// A wait of thread `tid` that began at `t_ns` and ran out after
    /// `dur_ns`. One under a millisecond (a poll with no timeout, which
    /// only looks) is no timer.
    fn note_timeout(&mut self, tid: u32, t_ns: u64, dur_ns: u64) {
        if dur_ns >= MIN_TIMER_NS {
            self.timed_out.insert(tid, t_ns.saturating_add(dur_ns));
        }
    }

    fn emit(&mut self, mut e: RawEvent) {
        // A spawned thread's or process's first event: it began when the
        // call that made it let it, which a replay waits for.
        if self.spawned.contains(&e.tid) && self.begun.insert(e.tid) {
            let key = format!("spawn:{}", e.tid);
            (self.sink)(marker(&e, e.t_ns, 0, RawOp::Woken { key }));
        }
        e.calls = self.pending.remove(&e.tid).unwrap_or(0).max(1);
        match &e.op {
            // Waiting goes on through more waits, sleeps and failed
            // receives (`EAGAIN` before the wait).
            RawOp::Other(name) if is_poll(name) || is_sleep(name) || name == FUTEX_RAN_OUT => {}
            RawOp::Recv { .. } if !e.ok => {}
            op => {
                let since = self.ready_since.remove(&e.tid);
                let ran_out = self.timed_out.remove(&e.tid);
                // A receive began when its thread began waiting for it:
                // the wait is not think time (a client blocked in
                // `epoll_wait` on its database server's answer).
                let waited_for = matches!(op, RawOp::Recv { .. } | RawOp::Woken { .. });
                // Anything else after waits that ran out came of the
                // timer: kept as one, from the first wait to the last's end.
                if let (Some(t0), Some(end), false) = (since, ran_out, waited_for)
                    && end > t0
                    && t0 < e.t_ns
                {
                    (self.sink)(marker(&e, t0, end - t0, RawOp::Timer));
                }
                if let Some(t0) = since.filter(|&t0| waited_for && t0 < e.t_ns) {
                    e.dur_ns = (e.t_ns - t0).saturating_add(e.dur_ns);
                    e.t_ns = t0;
                }
            }
        }
        (self.sink)(e);
    }
}

/// An event of `e`'s thread that no call of its own made (its spawn's
/// wake-up, a timer that ran out before `e`): `op` from `t_ns` for
/// `dur_ns`.
fn marker(e: &RawEvent, t_ns: u64, dur_ns: u64, op: RawOp) -> RawEvent {
    no_call(e.process.clone(), e.pid, e.tid, t_ns, dur_ns, op)
}

/// An event that is no call of thread `tid` of process `pid` (named
/// `process`): on no path, succeeded, no calls counted.
fn no_call(process: String, pid: u32, tid: u32, t_ns: u64, dur_ns: u64, op: RawOp) -> RawEvent {
    RawEvent {
        t_ns,
        dur_ns,
        process,
        pid,
        tid,
        op,
        path: String::new(),
        ok: true,
        result: String::new(),
        direct: false,
        paging: false,
        calls: 0,
    }
}

/// `len` bytes sent into or received from `stream`.
fn message(send: bool, stream: String, len: u64) -> RawOp {
    if send {
        RawOp::Send { stream, len }
    } else {
        RawOp::Recv { stream, len }
    }
}

/// The event of a line that is no call (a signal delivered, a task's
/// end) of thread `tid` of `task`'s process.
fn signal_event(task: &Task, tid: u32, t_ns: u64, op: RawOp) -> RawEvent {
    no_call(task.name.borrow().clone(), task.tgid, tid, t_ns, 0, op)
}

/// Whether an (unfinished) call's text is one that makes a task.
fn spawn_call(head: &str) -> bool {
    ["clone(", "clone3(", "fork(", "vfork("]
        .iter()
        .any(|c| head.starts_with(c))
}

/// The `flags=` of a clone call's text (`clone3`'s `{flags=...` too);
/// empty for fork and vfork, which share nothing.
fn clone_flags(text: &str) -> &str {
    text.find("flags=")
        .map(|i| &text[i + "flags=".len()..])
        .map(|f| f.split([',', '}', ')']).next().unwrap_or(""))
        .unwrap_or("")
}

/// The path of a descriptor: from its `-y` annotation, else from the
/// descriptor table (empty when neither knows).
fn fd_path(open: Option<&Open>, arg: &str) -> String {
    annotation_of(arg)
        .or_else(|| open.map(|o| o.path.clone()))
        .unwrap_or_default()
}

/// A descriptor's kind when it is not a file (pipe, socket, ...).
fn not_file(path: &str) -> Option<String> {
    [
        "pipe:",
        "socket:",
        "anon_inode:",
        "net:",
        "UNIX:",
        "TCP:",
        "UDP:",
        "TCPv6:",
        "UDPv6:",
    ]
    .iter()
    .find(|p| path.starts_with(**p))
    .map(|p| format!("{} descriptor", p.trim_end_matches(':')))
    .or_else(|| path.starts_with("/dev/").then(|| "device".to_string()))
    .or_else(|| path.starts_with("/proc/").then(|| "/proc".to_string()))
}

/// The number of a descriptor argument (`3` or `3</path>`; `AT_FDCWD`: none).
/// Whether `sync_file_range`'s flags (symbolic, or a number) wait for
/// the writeback: `SYNC_FILE_RANGE_WAIT_AFTER` (4), or waits alone with no
/// `SYNC_FILE_RANGE_WRITE` (2).
fn writeback_waits(flags: &str) -> bool {
    let bits = flags.split('|').fold(0u32, |acc, f| {
        acc | match f.trim() {
            "SYNC_FILE_RANGE_WAIT_BEFORE" => 1,
            "SYNC_FILE_RANGE_WRITE" => 2,
            "SYNC_FILE_RANGE_WAIT_AFTER" => 4,
            n => n
                .strip_prefix("0x")
                .map_or_else(|| n.parse().ok(), |h| u32::from_str_radix(h, 16).ok())
                .unwrap_or(0),
        }
    });
    bits & 4 != 0 || (bits & 2 == 0 && bits & 1 != 0)
}

fn parse_fd(arg: &str) -> Option<i64> {
    let n = arg.split('<').next()?.trim();
    n.parse().ok()
}

/// The inner text of the first `<...>` annotation in `s`, as a byte
/// range. strace escapes `<` and `>` in paths (`\74`, `\76`), so a raw
/// `<` opens a nested annotation (`-yy`'s `/dev/null<char 1:3>`) and a
/// raw `>` closes one, except the arrow between a socket's two ends
/// (`UNIX-STREAM:[12->13]`, `TCP:[127.0.0.1:40->127.0.0.1:5432]`).
fn annotation_span(s: &str) -> Option<(usize, usize)> {
    let open = s.find('<')?;
    let b = s.as_bytes();
    let mut depth = 0u32;
    for i in open..b.len() {
        match b[i] {
            b'<' => depth += 1,
            b'>' if is_arrow(b, i) => {}
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some((open + 1, i));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the `>` at `i` is the arrow of a socket's ends (`->` before a
/// digit or an IPv6 address), not an annotation's end.
fn is_arrow(b: &[u8], i: usize) -> bool {
    i > 0
        && b[i - 1] == b'-'
        && b.get(i + 1)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'[')
}

/// The path in a descriptor's `-y` annotation: `3</mnt/x>` gives `/mnt/x`;
/// a device's number (`-yy`: `/dev/sdb<block 8:16>`) is dropped.
fn annotation_of(arg: &str) -> Option<String> {
    let (a, b) = annotation_span(arg)?;
    let inner = &arg[a..b];
    let inner = match inner.rfind('<') {
        Some(i)
            if inner.ends_with('>')
                && (inner[i..].starts_with("<char ") || inner[i..].starts_with("<block ")) =>
        {
            &inner[..i]
        }
        _ => inner,
    };
    Some(unescape(inner))
}

/// The stream a socket's or pipe's descriptor path names, as both of its
/// ends name it: a connected socket's direction from sender to receiver
/// (`-yy`'s `UNIX-STREAM:[12->13]` sends into `unix:12>13` and receives
/// from `unix:13>12`; TCP and UDP by their addresses), a pipe by its
/// inode. None for a socket without its peer (no `-yy`, or not connected).
fn stream_of(path: &str, send: bool) -> Option<String> {
    if let Some(ino) = path
        .strip_prefix("pipe:[")
        .and_then(|r| r.strip_suffix(']'))
    {
        return Some(format!("pipe:{ino}"));
    }
    let (kind, rest) = path.split_once(":[")?;
    let family = match kind {
        "UNIX" | "UNIX-STREAM" | "UNIX-DGRAM" | "UNIX-SEQPACKET" => "unix",
        "TCP" | "TCPv6" => "tcp",
        "UDP" | "UDPv6" => "udp",
        _ => return None,
    };
    let inner = rest.strip_suffix(']')?;
    // A UNIX socket's path after its ends (`12->13,"/run/x.sock"`).
    let ends = if family == "unix" {
        inner.split(',').next()?
    } else {
        inner
    };
    let (local, peer) = ends.split_once("->")?;
    if local.is_empty() || peer.is_empty() {
        return None;
    }
    Some(if send {
        format!("{family}:{local}>{peer}")
    } else {
        format!("{family}:{peer}>{local}")
    })
}

/// What a connection is known by at both ends, from the client's
/// `connect`: a UNIX socket by the client's own inode (`-yy` shows it as
/// `UNIX-STREAM:[12]` before it connects, and the server's accepted
/// socket as `[13->12,...]`), TCP by the address connected to
/// (`{sa_family=AF_INET, sin_port=htons(5432),
/// sin_addr=inet_addr("127.0.0.1")}`).
fn connection_key(socket: &str, addr: &str) -> Option<String> {
    if let Some(rest) = socket.strip_prefix("UNIX-STREAM:[") {
        let ino: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return (!ino.is_empty()).then(|| format!("connect:unix:{ino}"));
    }
    let field = |name: &str| {
        let i = addr.find(name)? + name.len();
        let rest = &addr[i..];
        Some(rest[..rest.find(['"', ')'])?].to_string())
    };
    let port = field("_port=htons(")?;
    if addr.contains("AF_INET6") {
        let host = addr
            .find("AF_INET6, \"")
            .map(|i| &addr[i + "AF_INET6, \"".len()..])
            .and_then(|r| r.split('"').next())?;
        Some(format!("connect:tcp:[{host}]:{port}"))
    } else {
        Some(format!("connect:tcp:{}:{port}", field("inet_addr(\"")?))
    }
}

/// The key of a connection the server accepted (see `connection_key`),
/// from the accepted socket's `-yy` annotation.
fn accepted_key(socket: &str) -> Option<String> {
    if let Some(rest) = socket.strip_prefix("UNIX-STREAM:[") {
        let (_, peer) = rest.split_once("->")?;
        let ino: String = peer.chars().take_while(char::is_ascii_digit).collect();
        return (!ino.is_empty()).then(|| format!("connect:unix:{ino}"));
    }
    let rest = socket
        .strip_prefix("TCP:[")
        .or_else(|| socket.strip_prefix("TCPv6:["))?;
    let (local, _) = rest.split_once("->")?;
    Some(format!("connect:tcp:{local}"))
}

/// Calls that sleep until a time or a signal.
fn is_sleep(name: &str) -> bool {
    matches!(
        name,
        "nanosleep" | "clock_nanosleep" | "pause" | "rt_sigsuspend" | "sigsuspend"
    )
}

/// What a futex wait that timed out is left out as: a wait (a timer's)
/// like a poll's.
const FUTEX_RAN_OUT: &str = "futex (a timed wait that ran out)";

/// The shortest wait that ran out kept as a timer.
const MIN_TIMER_NS: u64 = 1_000_000;

/// Calls that wait for a descriptor to be ready.
fn is_poll(name: &str) -> bool {
    matches!(
        name,
        "poll"
            | "ppoll"
            | "select"
            | "_newselect"
            | "pselect6"
            | "epoll_wait"
            | "epoll_pwait"
            | "epoll_pwait2"
    )
}

/// Resolve a path argument against the directory descriptor `dir`
/// (`AT_FDCWD</cwd>` or `5</dir>` with `-y`), or, for calls without one
/// and for a bare `AT_FDCWD`, the task's working directory; a relative
/// path stays relative when the directory is unknown. `.` and `..` are
/// taken out (lexically: the trace knows no symbolic links).
fn resolve(task: &Task, dir: Option<&str>, path: &str) -> String {
    if path.starts_with('/') || path.is_empty() {
        return path.to_string();
    }
    let base = match dir {
        Some(d) => annotation_of(d).or_else(|| {
            if d.starts_with("AT_FDCWD") {
                task.cwd.borrow().clone()
            } else {
                parse_fd(d).and_then(|fd| task.fds.borrow().get(&fd).map(|o| o.path.clone()))
            }
        }),
        None => task.cwd.borrow().clone(),
    };
    match base {
        Some(b) => normalise(&format!("{}/{}", b.trim_end_matches('/'), path)),
        None => path.to_string(),
    }
}

/// An absolute path without `.`, `..` or empty components.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Where the arguments end and the result begins: the index of the `)`
/// before ` = `, outside strings and brackets.
fn split_result(body: &str) -> Option<(usize, &str)> {
    let bytes = body.as_bytes();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_str {
            if b == b'\\' {
                i += 1;
            } else if b == b'"' {
                in_str = false;
            }
        } else {
            match b {
                b'"' => in_str = true,
                b'(' | b'[' | b'{' => depth += 1,
                b')' if depth == 0 => {
                    let rest = &body[i + 1..];
                    let rest = rest.trim_start();
                    if let Some(r) = rest.strip_prefix('=') {
                        return Some((i, r.trim_start()));
                    }
                }
                b')' | b']' | b'}' => depth -= 1,
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// The top-level arguments, split at `, ` outside strings, brackets and
/// `<...>` annotations.
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut chars = args.char_indices();
    while let Some((i, c)) = chars.next() {
        if in_str {
            cur.push(c);
            if c == '\\' {
                if let Some((_, n)) = chars.next() {
                    cur.push(n);
                }
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                cur.push(c);
            }
            // An annotation, whole (nested, with arrows: `annotation_span`);
            // one never closed runs to the end.
            '<' if cur
                .chars()
                .last()
                .is_some_and(|p| p.is_ascii_digit() || p.is_ascii_uppercase()) =>
            {
                let end = annotation_span(&args[i..]).map_or(args.len(), |(_, e)| i + e + 1);
                cur.push_str(&args[i..end]);
                while chars.clone().next().is_some_and(|(j, _)| j < end) {
                    chars.next();
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// `RET[<annotation>] [ERRNO (text)] [<DURATION>]`: the return value, a
/// returned descriptor's path, and the duration in nanoseconds.
fn parse_result(text: &str) -> (Option<i64>, Option<String>, u64) {
    let text = text.trim();
    let (main, dur) = match text.rfind(" <") {
        Some(i)
            if text.ends_with('>')
                && text[i + 2..text.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b'.') =>
        {
            (
                &text[..i],
                parse_time(&text[i + 2..text.len() - 1]).unwrap_or(0),
            )
        }
        _ => (text, 0),
    };
    // The number and its annotation, which may hold spaces (`-yy`:
    // `4</dev/urandom<char 1:9>>`).
    let number_end = main
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(main.len());
    let first = match main[number_end..].starts_with('<') {
        true => annotation_span(main).map_or(main, |(_, end)| &main[..=end]),
        false => &main[..number_end],
    };
    let number = first.split('<').next().unwrap_or("");
    let ret = if let Some(hex) = number.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else {
        number.parse().ok()
    };
    (ret, annotation_of(first), dur)
}

/// A string argument without its quotes and escapes (`"a\"b"...` gives
/// `a"b`).
fn unquote(arg: &str) -> String {
    let a = arg.trim();
    let a = a.strip_suffix("...").unwrap_or(a);
    match a.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => unescape(inner),
        None => a.to_string(),
    }
}

/// strace's C escapes (`\n`, `\"`, `\\`, `\x41`, `\101`) decoded.
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 >= bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = bytes[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let h = s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok());
                match h {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'x'),
                }
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    v = v * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (thread, `wake KEY` or `woken KEY`, start) of the wake-ups and woken
    /// waits in `text`.
    /// Nanoseconds of the test traces' time `1.000000` plus `us`
    /// microseconds.
    fn at(us: u64) -> u64 {
        1_000_000_000 + us * 1000
    }

    fn wake_ups(text: &str) -> Vec<(u32, String, u64)> {
        all_events(text)
            .unwrap()
            .iter()
            .filter_map(|e| match &e.op {
                RawOp::Wake { key } => Some((e.tid, format!("wake {key}"), e.t_ns)),
                RawOp::Woken { key } => Some((e.tid, format!("woken {key}"), e.t_ns)),
                _ => None,
            })
            .collect()
    }

    fn all_events(text: &str) -> Result<Vec<RawEvent>, FormatError> {
        let mut got = Vec::new();
        read(text.as_bytes(), &mut |e| got.push(e))?;
        Ok(got)
    }

    /// The events without wake-ups and woken waits (a clone's, a child's
    /// first call's).
    fn events(text: &str) -> Result<Vec<RawEvent>, FormatError> {
        Ok(all_events(text)?
            .into_iter()
            .filter(|e| !matches!(e.op, RawOp::Wake { .. } | RawOp::Woken { .. }))
            .collect())
    }

    #[test]
    fn calls_without_a_directory_resolve_against_the_working_directory() {
        // A server's shape: it changes into its data folder, a forked
        // child inherits that, and renames and removes give bare names.
        let text = "\
200 1700000000.000001 chdir(\"/db/pgdata\") = 0 <0.000010>
200 1700000000.000002 openat(AT_FDCWD</db/pgdata>, \"a.tmp\", O_RDWR|O_CREAT|O_TRUNC, 0600) = 3</db/pgdata/a.tmp> <0.000020>
200 1700000000.000003 write(3</db/pgdata/a.tmp>, \"x\"..., 125) = 125 <0.000010>
200 1700000000.000004 rename(\"a.tmp\", \"a.conf\") = 0 <0.000010>
200 1700000000.000005 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 201 <0.000050>
201 1700000000.000006 unlink(\"pg_stat/../old\") = 0 <0.000010>
200 1700000000.000007 chdir(\"..\") = 0 <0.000010>
201 1700000000.000008 mkdir(\"base\", 0700) = 0 <0.000010>
200 1700000000.000009 stat(\"x\", {st_mode=S_IFREG|0600, st_size=1, ...}) = 0 <0.000010>
300 1700000000.000010 stat(\"unknown\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000010>
";
        let ev = events(text).unwrap();
        let ops: Vec<(&RawOp, &str)> = ev.iter().map(|e| (&e.op, e.path.as_str())).collect();
        assert_eq!(ops[0], (&RawOp::Stat, "/db/pgdata"));
        assert_eq!(
            ops[3],
            (
                &RawOp::Rename {
                    to: "/db/pgdata/a.conf".into()
                },
                "/db/pgdata/a.tmp"
            )
        );
        // The child kept the folder it was forked in after the parent left.
        assert_eq!(ops[4], (&RawOp::Remove, "/db/pgdata/old"));
        assert_eq!(ops[6], (&RawOp::Mkdir, "/db/pgdata/base"));
        assert_eq!(ops[7], (&RawOp::Stat, "/db/x"));
        // A process whose folder the trace never showed keeps the bare name.
        assert_eq!(ops[8], (&RawOp::Stat, "unknown"));
    }

    #[test]
    fn a_child_seen_before_its_fork_returns_has_its_parents_descriptors() {
        // caseload's shape when it starts initdb: the log opened, duplicated,
        // the child forked and writing through stdout before the parent's
        // clone returns; later a server appends to the same log.
        let text = "\
300 1700000000.000001 openat(AT_FDCWD</w>, \"/db/pg.log\", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 5</db/pg.log> <0.000010>
300 1700000000.000002 fcntl(5</db/pg.log>, F_DUPFD_CLOEXEC, 3) = 6</db/pg.log> <0.000010>
300 1700000000.000003 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
301 1700000000.000004 dup2(6</db/pg.log>, 1</dev/null>) = 1</db/pg.log> <0.000010>
301 1700000000.000005 write(1</db/pg.log>, \"The files\"..., 78) = 78 <0.000010>
300 1700000000.000006 <... clone resumed>, child_tidptr=0x7f) = 301 <0.000050>
301 1700000000.000007 write(1</db/pg.log>, \"ok\\n\", 3) = 3 <0.000010>
301 1700000000.000008 +++ exited with 0 +++
300 1700000000.000009 openat(AT_FDCWD</w>, \"/db/pg.log\", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0666) = 7</db/pg.log> <0.000010>
300 1700000000.000010 vfork( <unfinished ...>
301 1700000000.000011 write(7</db/pg.log>, \"LOG\"..., 20) = 20 <0.000010>
300 1700000000.000012 <... vfork resumed>) = 301 <0.000050>
";
        let ev = events(text).unwrap();
        let writes: Vec<(u64, u64)> = ev
            .iter()
            .filter_map(|e| match e.op {
                RawOp::Write { offset, len } => Some((offset, len)),
                _ => None,
            })
            .collect();
        // One position for the descriptors that share it; the second child
        // (the number used again) appends at the end.
        assert_eq!(writes, vec![(0, 78), (78, 3), (81, 20)]);
        assert_eq!(
            clone_flags("clone3({flags=CLONE_VM|CLONE_FS, exit_signal=0}, 88"),
            "CLONE_VM|CLONE_FS"
        );
        assert_eq!(clone_flags("vfork("), "");
    }

    #[test]
    fn calls_with_paths_positions_and_resumed_halves() {
        let text = "\
100 1700000000.000001 execve(\"/usr/bin/tsk_loaddb\", [\"tsk_loaddb\"], 0x7ffd /* 20 vars */) = 0 <0.000300>
100 1700000000.000010 openat(AT_FDCWD</work>, \"img.dd\", O_RDONLY|O_CLOEXEC) = 3</work/img.dd> <0.000020>
100 1700000000.000020 read(3</work/img.dd>, \"\\353c\"..., 65536) = 65536 <0.000044>
100 1700000000.000030 lseek(3</work/img.dd>, 1048576, SEEK_SET) = 1048576 <0.000002>
100 1700000000.000040 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 101 <0.000050>
101 1700000000.000045 read(3</work/img.dd>,  <unfinished ...>
100 1700000000.000046 openat(AT_FDCWD</work>, \"out/a, b.db\", O_RDWR|O_CREAT|O_TRUNC, 0644) = 4</work/out/a, b.db> <0.000030>
101 1700000000.000090 <... read resumed>\"\"..., 4096) = 4096 <0.000045>
100 1700000000.000100 pwrite64(4</work/out/a, b.db>, \"SQLite\"..., 4096, 8192) = 4096 <0.000010>
100 1700000000.000110 fdatasync(4</work/out/a, b.db>) = 0 <0.001000>
100 1700000000.000120 openat(AT_FDCWD</work>, \"missing\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000005>
100 1700000000.000130 rename(\"/work/out/a, b.db\", \"/work/out/c.db\") = 0 <0.000010>
100 1700000000.000140 read(0</dev/pts/0>, \"\", 10) = 0 <0.000001>
100 1700000000.000150 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3</work/img.dd>, 0) = 0x7f0000 <0.000003>
100 1700000000.000160 +++ exited with 0 +++
";
        let ev = events(text).unwrap();
        let ops: Vec<(&RawOp, &str)> = ev.iter().map(|e| (&e.op, e.path.as_str())).collect();
        assert_eq!(
            ops[1],
            (
                &RawOp::Open {
                    created: false,
                    directory: false
                },
                "/work/img.dd"
            )
        );
        assert_eq!(
            ops[2],
            (
                &RawOp::Read {
                    offset: 0,
                    len: 65536
                },
                "/work/img.dd"
            )
        );
        // The thread shares the file, and its read starts where lseek left it.
        assert_eq!(
            ops[4],
            (
                &RawOp::Read {
                    offset: 1_048_576,
                    len: 4096
                },
                "/work/img.dd"
            )
        );
        assert_eq!(
            ev[4].t_ns % 1_000_000_000,
            45_000,
            "timed from the unfinished half"
        );
        assert_eq!(ev[4].dur_ns, 45_000);
        assert_eq!(
            (ev[4].pid, ev[4].tid, ev[4].process.as_str()),
            (100, 101, "tsk_loaddb")
        );
        assert_eq!(
            ops[3],
            (
                &RawOp::Open {
                    created: true,
                    directory: false
                },
                "/work/out/a, b.db"
            )
        );
        assert_eq!(
            ops[5],
            (
                &RawOp::Write {
                    offset: 8192,
                    len: 4096
                },
                "/work/out/a, b.db"
            )
        );
        assert_eq!(ops[6], (&RawOp::Sync, "/work/out/a, b.db"));
        assert_eq!(ops[7], (&RawOp::Stat, "/work/missing"));
        assert!(!ev[7].ok);
        assert_eq!(
            ops[8],
            (
                &RawOp::Rename {
                    to: "/work/out/c.db".into()
                },
                "/work/out/a, b.db"
            )
        );
        assert!(matches!(ops[9].0, RawOp::NotFile(_)));
        assert_eq!(ops[10], (&RawOp::Map, "/work/img.dd"));
    }

    #[test]
    fn sockets_and_pipes_are_messages_and_a_ready_wait_starts_the_receive() {
        // `-yy`: a client sends a query on a UNIX socket, waits in
        // epoll_wait (an EAGAIN receive first), receives the answer; the
        // server receives it on the other end and answers; a pipe between
        // them; a device's number after its path.
        let text = r#"10 1.000000 sendto(8<UNIX-STREAM:[100->101]>, "Q\0\0"..., 70, MSG_NOSIGNAL, NULL, 0) = 70 <0.000020>
10 1.000100 recvfrom(8<UNIX-STREAM:[100->101]>, 0x55d0, 8192, 0, NULL, NULL) = -1 EAGAIN (Resource temporarily unavailable) <0.000010>
10 1.000200 epoll_wait(5<anon_inode:[eventpoll]>, [{events=EPOLLOUT, data={u32=1, u64=1}}], 1024, -1) = 1 <0.000010>
10 1.000300 epoll_wait(5<anon_inode:[eventpoll]>,  <unfinished ...>
11 1.000400 recvfrom(6<UNIX-STREAM:[101->100,"/run/pg/.s.PGSQL.5432"]>, "Q\0\0"..., 8192, 0, NULL, NULL) = 70 <0.000010>
11 1.000500 sendto(6<UNIX-STREAM:[101->100,"/run/pg/.s.PGSQL.5432"]>, "C\0"..., 27, 0, NULL, 0) = 27 <0.000010>
10 1.002000 <... epoll_wait resumed>[{events=EPOLLIN, data={u32=1, u64=1}}], 1024, -1) = 1 <0.001700>
10 1.002100 recvfrom(8<UNIX-STREAM:[100->101]>, "C\0"..., 8192, 0, NULL, NULL) = 27 <0.000010>
11 1.003000 write(3<pipe:[77]>, "log line\n", 9) = 9 <0.000010>
12 1.004000 read(4<pipe:[77]>, "log line\n", 4096) = 9 <0.000010>
12 1.005000 read(0</dev/sdb<block 8:16>>, "x"..., 512) = 512 <0.000010>
13 1.006000 sendto(3<socket:[900]>, "x", 1, 0, NULL, 0) = 1 <0.000010>
"#;
        let ev = events(text).unwrap();
        let msg = |e: &RawEvent| match &e.op {
            RawOp::Send { stream, len } => Some(("send", stream.clone(), *len)),
            RawOp::Recv { stream, len } => Some(("recv", stream.clone(), *len)),
            _ => None,
        };
        let msgs: Vec<(u32, &str, String, u64, u64, bool)> = ev
            .iter()
            .filter_map(|e| msg(e).map(|(k, s, n)| (e.tid, k, s, n, e.t_ns, e.ok)))
            .collect();
        assert_eq!(
            msgs,
            vec![
                (10, "send", "unix:100>101".to_string(), 70, at(0), true),
                (10, "recv", "unix:101>100".to_string(), 0, at(100), false),
                (11, "recv", "unix:100>101".to_string(), 70, at(400), true),
                (11, "send", "unix:101>100".to_string(), 27, at(500), true),
                // Begun with the first wait that found something ready.
                (10, "recv", "unix:101>100".to_string(), 27, at(200), true),
                (11, "send", "pipe:77".to_string(), 9, at(3000), true),
                (12, "recv", "pipe:77".to_string(), 9, at(4000), true),
            ]
        );
        let answer = ev
            .iter()
            .find(|e| e.tid == 10 && e.ok && matches!(e.op, RawOp::Recv { .. }))
            .unwrap();
        assert_eq!(
            answer.dur_ns, 1_910_000,
            "from the first ready wait to its end"
        );
        // The device read keeps its path without `-yy`'s number.
        assert!(ev.iter().any(|e| e.path == "/dev/sdb"), "{ev:?}");
        // A socket whose ends are not named (no `-yy`) is no message.
        assert!(matches!(ev.last().unwrap().op, RawOp::NotFile(_)));
    }

    #[test]
    fn futex_wake_ups_joins_and_reaped_children_are_wake_ups_and_waits() {
        // Thread 21 of process 20 wakes 20 on a private futex, then ends;
        // 20 joins it (a wait on its id word for its id); 20 forks 30 and
        // reaps it. A wait that timed out and a wake that woke no one are
        // nothing.
        let text = "\
20 1.000000 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_CHILD_CLEARTID, child_tid=0x7f90}, 88) = 21 <0.000050>
20 1.000100 futex(0x5610, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
21 1.000500 futex(0x5610, FUTEX_WAKE_PRIVATE, 1) = 1 <0.000010>
20 1.000600 <... futex resumed>) = 0 <0.000500>
20 1.000700 futex(0x7f90, FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME, 21, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
21 1.000800 exit(0)                  = ?
21 1.000900 +++ exited with 0 +++
20 1.001000 <... futex resumed>) = 0 <0.000300>
20 1.002000 futex(0x5618, FUTEX_WAIT_PRIVATE, 2, {tv_sec=0, tv_nsec=1000}) = -1 ETIMEDOUT (Connection timed out) <0.000100>
20 1.003000 futex(0x5618, FUTEX_WAKE_PRIVATE, 1) = 0 <0.000010>
20 1.004000 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f91) = 30 <0.000100>
30 1.005000 exit_group(0)            = ?
30 1.005100 +++ exited with 0 +++
20 1.006000 wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 30 <0.000010>
";
        let got = wake_ups(text);
        assert_eq!(
            got,
            vec![
                // The clone wakes the child's first call.
                (20, "wake spawn:21".to_string(), at(0)),
                (21, "woken spawn:21".to_string(), at(500)),
                (21, "wake futex:20:0x5610".to_string(), at(500)),
                (20, "woken futex:20:0x5610".to_string(), at(100)),
                (21, "wake exit:21".to_string(), at(900)),
                (20, "woken exit:21".to_string(), at(700)),
                (20, "wake spawn:30".to_string(), at(4000)),
                (30, "woken spawn:30".to_string(), at(5000)),
                (30, "wake exit:30".to_string(), at(5100)),
                (20, "woken exit:30".to_string(), at(6000)),
            ]
        );
    }

    #[test]
    fn a_wait_that_ran_out_before_the_thread_went_on_is_a_timer() {
        // 10 naps 30 s, then signals 11: a timer. It then waits until a
        // pipe has a byte (a receive, no timer), polls without waiting (no
        // timer) and writes. 12 naps 5 ms on a condition variable, then
        // writes: a timer from the futex wait.
        let text = r#"10 1.000000 epoll_wait(4<anon_inode:[eventpoll]>, 0x55f4, 1, 30000) = 0 <30.000100>
10 31.000200 kill(11, SIGUSR1) = 0 <0.000010>
10 31.100000 epoll_wait(4<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=3, u64=3}}], 1, 30000) = 1 <0.500000>
10 31.600100 read(3<pipe:[7]>, "x", 1) = 1 <0.000010>
10 31.700000 poll([{fd=3<pipe:[7]>, events=POLLIN}], 1, 0) = 0 (Timeout) <0.000005>
10 31.800000 write(5</tmp/a>, "x", 1) = 1 <0.000010>
12 1.000000 futex(0x5618, FUTEX_WAIT_BITSET_PRIVATE, 0, {tv_sec=1, tv_nsec=5000000}, FUTEX_BITSET_MATCH_ANY) = -1 ETIMEDOUT (Connection timed out) <0.005000>
12 1.005100 write(5</tmp/b>, "x", 1) = 1 <0.000010>
"#;
        let ev = all_events(text).unwrap();
        let timers: Vec<(u32, u64, u64)> = ev
            .iter()
            .filter(|e| e.op == RawOp::Timer)
            .map(|e| (e.tid, e.t_ns, e.dur_ns))
            .collect();
        assert_eq!(
            timers,
            vec![
                (10, 1_000_000_000, 30_000_100_000),
                (12, 1_000_000_000, 5_000_000)
            ]
        );
        // Each timer comes just before what it led to.
        let after = |tid: u32| {
            let i = ev
                .iter()
                .position(|e| e.tid == tid && e.op == RawOp::Timer)
                .unwrap();
            ev[i + 1].op.clone()
        };
        assert!(matches!(after(10), RawOp::Wake { .. }), "{:?}", after(10));
        assert!(matches!(after(12), RawOp::Write { .. }), "{:?}", after(12));
    }

    #[test]
    fn sync_file_range_starts_writeback_and_is_no_sync() {
        let text = r#"12 1.000000 openat(AT_FDCWD</>, "/tmp", O_RDONLY|O_DIRECTORY) = 6</tmp> <0.000010>
12 1.000100 sync_file_range(5</tmp/a>, 0, 0, SYNC_FILE_RANGE_WRITE) = 0 <0.000010>
12 1.000200 sync_file_range(5</tmp/a>, 4096, 8192, SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE|SYNC_FILE_RANGE_WAIT_AFTER) = 0 <0.000010>
12 1.000300 sync_file_range(6</tmp>, 0, 0, SYNC_FILE_RANGE_WRITE) = 0 <0.000010>
12 1.000400 sync_file_range2(5</tmp/a>, 6, 0, 4096) = 0 <0.000010>
12 1.000500 fdatasync(5</tmp/a>) = 0 <0.000010>
"#;
        let ops: Vec<RawOp> = events(text)
            .unwrap()
            .into_iter()
            .map(|e| e.op)
            .filter(|op| !matches!(op, RawOp::Open { .. }))
            .collect();
        assert_eq!(
            ops,
            vec![
                RawOp::Writeback {
                    offset: 0,
                    len: 0,
                    wait: false
                },
                RawOp::Writeback {
                    offset: 4096,
                    len: 8192,
                    wait: true
                },
                RawOp::Other("writeback of a folder".into()),
                RawOp::Writeback {
                    offset: 0,
                    len: 4096,
                    wait: true
                },
                RawOp::Sync,
            ]
        );
    }

    #[test]
    fn a_receive_after_sleeps_and_polls_began_with_the_first() {
        let text = r#"10 1.000000 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=100000000}, NULL) = 0 <0.100000>
10 1.100000 poll([{fd=3<pipe:[7]>, events=POLLIN}], 1, 100) = 0 (Timeout) <0.100000>
10 1.200000 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=100000000}, NULL) = 0 <0.100000>
10 1.300000 read(3<pipe:[7]>, "x", 1) = 1 <0.000010>
"#;
        let ev = events(text).unwrap();
        let recv = ev
            .iter()
            .find(|e| matches!(e.op, RawOp::Recv { .. }))
            .unwrap();
        assert_eq!(recv.t_ns, 1_000_000_000, "{recv:?}");
    }

    #[test]
    fn a_servers_accept_waits_for_the_clients_connect() {
        // UNIX: by the client's inode; TCP: by the address. The accept
        // begins with the wait that found the listener ready.
        let text = r#"10 1.000000 connect(8<UNIX-STREAM:[100]>, {sa_family=AF_UNIX, sun_path="/run/pg/.s.PGSQL.5432"}, 110) = 0 <0.000020>
11 0.999000 epoll_wait(4<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=5, u64=5}}], 64, 60000) = 1 <0.001100>
11 1.000200 accept4(5<UNIX-STREAM:[50,"/run/pg/.s.PGSQL.5432"]>, NULL, NULL, SOCK_CLOEXEC) = 6<UNIX-STREAM:[101->100,"/run/pg/.s.PGSQL.5432"]> <0.000010>
12 1.001000 connect(3<TCP:[200]>, {sa_family=AF_INET, sin_port=htons(5432), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS (Operation now in progress) <0.000020>
13 1.002000 accept(7<TCP:[127.0.0.1:5432]>, {sa_family=AF_INET, sin_port=htons(40000), sin_addr=inet_addr("127.0.0.1")}, [16]) = 8<TCP:[127.0.0.1:5432->127.0.0.1:40000]> <0.000010>
14 1.003000 connect(3<UNIX-STREAM:[300]>, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory) <0.000010>
"#;
        let got = wake_ups(text);
        assert_eq!(
            got,
            vec![
                (10, "wake connect:unix:100".to_string(), at(0)),
                (11, "woken connect:unix:100".to_string(), at(0) - 1_000_000),
                (12, "wake connect:tcp:127.0.0.1:5432".to_string(), at(1000)),
                (13, "woken connect:tcp:127.0.0.1:5432".to_string(), at(2000)),
            ]
        );
    }

    #[test]
    fn annotations_with_arrows_and_devices_split_and_read() {
        let args = split_args(
            r#"8<UNIX-STREAM:[1->2,"/x y"]>, "a,b", 0</dev/null<char 1:3>>, 3</tmp/x->, 5"#,
        );
        assert_eq!(args.len(), 5, "{args:?}");
        assert_eq!(
            annotation_of(&args[0]).as_deref(),
            Some(r#"UNIX-STREAM:[1->2,"/x y"]"#)
        );
        assert_eq!(annotation_of(&args[2]).as_deref(), Some("/dev/null"));
        // A path ending in `-` (strace escapes `>` in paths as `\76`).
        assert_eq!(annotation_of(&args[3]).as_deref(), Some("/tmp/x-"));
        assert_eq!(
            parse_result("4</dev/urandom<char 1:9>> <0.000051>")
                .1
                .as_deref(),
            Some("/dev/urandom")
        );
        assert_eq!(
            stream_of("TCP:[127.0.0.1:40->127.0.0.1:5432]", false).as_deref(),
            Some("tcp:127.0.0.1:5432>127.0.0.1:40")
        );
        assert_eq!(stream_of("UNIX-STREAM:[5,\"/run/x\"]", true), None);
    }

    #[test]
    fn without_paths_descriptors_are_followed() {
        let text = "\
7 1.000000 open(\"/ev/a.E01\", O_RDONLY) = 5 <0.000010>
7 1.000100 read(5, \"x\"..., 100) = 100 <0.000010>
7 1.000200 dup(5) = 6 <0.000001>
7 1.000300 read(6, \"x\"..., 50) = 50 <0.000010>
7 1.000400 close(5) = 0 <0.000001>
7 1.000500 pread64(6, \"x\"..., 10, 4096) = 10 <0.000010>
7 1.000600 read(9, \"x\"..., 10) = 10 <0.000010>
";
        let ev = events(text).unwrap();
        assert_eq!(
            ev[1].op,
            RawOp::Read {
                offset: 0,
                len: 100
            }
        );
        assert_eq!(
            ev[2].op,
            RawOp::Read {
                offset: 100,
                len: 50
            },
            "dup shares the position"
        );
        // The dup left no event: its tracer stop is in this read's gap.
        assert_eq!((ev[1].calls, ev[2].calls), (1, 2));
        assert_eq!(ev[2].path, "/ev/a.E01");
        assert_eq!(
            ev[4].op,
            RawOp::Read {
                offset: 4096,
                len: 10
            }
        );
        assert!(matches!(ev[5].op, RawOp::Other(_)), "{:?}", ev[5]);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, want) in [
            (
                "1 1.0 read(3, \"\", 1) = 1\nnonsense here\n",
                "line 2: not an strace line",
            ),
            (
                "1 1.0 read(3, \"\", 1) = 1\n1 1.5 read(3, \"\", 1\n",
                "line 2: no `) = ` result",
            ),
            (
                "1 1.0 read(3, \"\", 1) = 1\n1 1.5 read(3",
                "line 2: the last line is incomplete",
            ),
            ("1 1.x read(3) = 1\n", "line 1"),
        ] {
            let err = events(text).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        assert!(looks_like_line(
            "12345 1700000000.123456 openat(AT_FDCWD, \"x\", O_RDONLY) = 3 <0.000010>"
        ));
        assert!(looks_like_line(
            "[pid 12] 1.5 <... read resumed>\"\", 4) = 4 <0.1>"
        ));
        assert!(!looks_like_line("\"Time of Day\",\"Process Name\""));
    }
}
