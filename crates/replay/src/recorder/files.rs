//! Mapped files at record time: which read-only open made each fd (so replay can open the kept copy
//! instead), and the keeping of every file a process maps (`crate::files`).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Recorder;
use crate::files::KeptMapping;

/// mmap(2)'s mapping-type bits (`MAP_SHARED`, `MAP_PRIVATE`, `MAP_SHARED_VALIDATE`).
const MAP_TYPE: i32 = 0x0f;

/// The read-only open of a regular file that made an fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Opened {
    /// Recorded tid of the opening thread.
    tid: i32,
    /// Index of the open's record in that thread's stream.
    seq: u64,
    /// The opened file's (dev, ino): a later `mmap` of the fd checks it is still that file (`dup2`
    /// and `close` run untrapped).
    id: (u64, u64),
}

/// Per-recording state of the mapped-file keeping.
#[derive(Debug)]
pub(super) struct MappedFiles {
    pub(super) keeper: crate::files::FileKeeper,
    /// (tgid, fd) → the open that made it.
    opened: HashMap<(i32, i32), Opened>,
    /// (tgid, fd) → the open of a regular file for writing that made it (a shared mapping's
    /// opener: replay opens its own shared file there).
    opened_rw: HashMap<(i32, i32), Opened>,
    /// Files mapped shared and writable: (dev, ino) → the recording's number for the file and the
    /// scheduling group that mapped it last.
    pub(super) shared_files: HashMap<(u64, u64), (u32, i32)>,
    /// Threads whose pending `mmap` joined another group (its key), for the record's extra.
    pub(super) joins: HashMap<i32, i32>,
    /// Threads whose pending `mmap` is a shared file mapping: the file's bytes under it, read at
    /// its seccomp stop (`Err`: why they could not be).
    pub(super) contents: HashMap<i32, std::io::Result<Vec<u8>>>,
    /// Threads whose pending `mmap` is a shared file mapping: its rendezvous point on the file,
    /// taken at the seccomp stop with the contents ([`crate::rendezvous::shared_file_object`]),
    /// and the file's number.
    pub(super) pending_rdv: HashMap<i32, (crate::format::Rendezvous, u32)>,
    /// Processes (tgid) that have mapped shared files (the files' numbers): their exit or
    /// `execve` takes a rendezvous point on each (`munmap` runs untrapped).
    pub(super) mapped_shared: HashMap<i32, std::collections::BTreeSet<u32>>,
    /// Records emitted so far per recorded tid (the stream index of the next one).
    pub(super) emitted: HashMap<i32, u64>,
    /// A file could not be kept (said once).
    warned: bool,
    /// Files whose writable shared mapping was said, by (dev, ino), and whether the saying was
    /// about a second mapping.
    shared_said: std::collections::HashSet<((u64, u64), bool)>,
    /// File ranges mapped shared and writable so far.
    shared_ranges: SharedRanges,
}

/// The most bytes of one shared file mapping recorded (256 MiB).
const MAX_SHARED_CONTENTS: u64 = 256 << 20;

/// The file ranges mapped shared and writable, by file (dev, ino), to see a second mapping of
/// the same bytes (replay gives each its own memory).
#[derive(Debug, Default)]
pub(super) struct SharedRanges(HashMap<(u64, u64), Vec<(u64, u64)>>);

impl SharedRanges {
    /// Notes the mapping of `len` bytes at file `offset`; true when it overlaps an earlier one.
    fn note(&mut self, id: (u64, u64), offset: u64, len: u64) -> bool {
        let ranges = self.0.entry(id).or_default();
        let end = offset.saturating_add(len);
        let overlaps = ranges.iter().any(|&(a, b)| offset < b && a < end);
        ranges.push((offset, end));
        overlaps
    }
}

/// `bytes` placed at `addr`, as writes of its runs of pages (4 KiB) that are not all zero: replay
/// writes them into fresh (zeroed) anonymous memory.
fn nonzero_pages(addr: u64, bytes: &[u8]) -> Vec<crate::format::MemWrite> {
    const PAGE: usize = 4096;
    let mut writes: Vec<crate::format::MemWrite> = Vec::new();
    let mut run: Option<usize> = None;
    let mut at = 0;
    while at <= bytes.len() {
        let end = (at + PAGE).min(bytes.len());
        let zero = at == bytes.len() || bytes[at..end].iter().all(|&b| b == 0);
        match (zero, run) {
            (false, None) => run = Some(at),
            (true, Some(start)) => {
                writes.push(crate::format::MemWrite {
                    addr: addr + start as u64,
                    data: bytes[start..at].to_vec(),
                });
                run = None;
            }
            _ => {}
        }
        if at == bytes.len() {
            break;
        }
        at = end;
    }
    writes
}

impl MappedFiles {
    pub(super) fn new(dir: &Path) -> MappedFiles {
        MappedFiles {
            keeper: crate::files::FileKeeper::new(dir),
            opened: HashMap::new(),
            opened_rw: HashMap::new(),
            shared_files: HashMap::new(),
            joins: HashMap::new(),
            contents: HashMap::new(),
            pending_rdv: HashMap::new(),
            mapped_shared: HashMap::new(),
            emitted: HashMap::new(),
            warned: false,
            shared_said: std::collections::HashSet::new(),
            shared_ranges: SharedRanges::default(),
        }
    }
}

/// Processes (other than `recorded` ones and `me`) that have the file `(dev, ino)` open or mapped,
/// from `/proc/<pid>/fd` and `/proc/<pid>/map_files`.
fn processes_with_file(
    id: (u64, u64),
    recorded: &std::collections::HashSet<i32>,
    me: i32,
) -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || recorded.contains(&pid) {
            continue;
        }
        let has = ["fd", "map_files"].iter().any(|sub| {
            std::fs::read_dir(format!("/proc/{pid}/{sub}")).is_ok_and(|d| {
                d.flatten()
                    .any(|f| std::fs::metadata(f.path()).is_ok_and(|m| (m.dev(), m.ino()) == id))
            })
        });
        if has {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// The open flags of an open-family call, `None` for other calls (`openat2` reads its `how`).
fn open_flags(t: &replay_ptrace::Stopped, nr: i64, args: &[u64; 6]) -> Option<i32> {
    match nr {
        libc::SYS_open => Some(args[1] as i32),
        libc::SYS_openat => Some(args[2] as i32),
        libc::SYS_openat2 => t
            .read_u64(replay_ptrace::RemotePtr::new(args[2]))
            .ok()
            .map(|f| f as i32),
        _ => None,
    }
}

impl Recorder {
    /// True when `mmap(args)` in process `tgid` maps a file shared that the program may change
    /// (docs/recording-format.md, *Shared memory*): a `MAP_SHARED` mapping of an fd that is
    /// writable ([`crate::syscalls::is_shared_writable_file_mapping`]), or read-only over an fd
    /// the program opened for writing (sqlite's `PRAGMA mmap_size` maps its database so while it
    /// writes the pages with `pwrite`).
    pub(super) fn is_shared_file_mapping(&self, tgid: i32, args: &[u64; 6]) -> bool {
        let (flags, fd) = (args[3] as i32, args[4] as i32);
        crate::syscalls::is_shared_writable_file_mapping(args)
            || (fd >= 0
                && flags & libc::MAP_ANONYMOUS == 0
                && flags & MAP_TYPE != libc::MAP_PRIVATE
                && self.files.opened_rw.contains_key(&(tgid, fd)))
    }

    /// At the exit of a successful open of a regular file, read-only (the opens replay runs for
    /// real): note which record made the fd.
    pub(super) fn note_open(
        &mut self,
        t: &replay_ptrace::Stopped,
        tgid: i32,
        nr: i64,
        args: &[u64; 6],
        result: i64,
    ) {
        let Some(flags) = open_flags(t, nr, args) else {
            return;
        };
        if result < 0 {
            return;
        }
        let fd = result as i32;
        let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY
            && flags & (libc::O_CREAT | libc::O_TRUNC | libc::O_TMPFILE) == 0;
        let tid = t.tid();
        let meta = std::fs::metadata(format!("/proc/{tid}/fd/{fd}"));
        // The opener as replay knows it: its recorded stream.
        let tid = self.stream_id(tid);
        match meta {
            Ok(m) if read_only && m.is_file() => {
                let seq = self.files.emitted.get(&tid).copied().unwrap_or(0);
                self.files.opened.insert(
                    (tgid, fd),
                    Opened {
                        tid,
                        seq,
                        id: (m.dev(), m.ino()),
                    },
                );
            }
            Ok(m) if m.is_file() => {
                let seq = self.files.emitted.get(&tid).copied().unwrap_or(0);
                self.files.opened.remove(&(tgid, fd));
                self.files.opened_rw.insert(
                    (tgid, fd),
                    Opened {
                        tid,
                        seq,
                        id: (m.dev(), m.ino()),
                    },
                );
                return;
            }
            _ => {
                self.files.opened.remove(&(tgid, fd));
            }
        }
        self.files.opened_rw.remove(&(tgid, fd));
    }

    /// A successful ioctl whose output this version cannot tell (a legacy request without
    /// direction bits that `syscalls::ioctl_output_len` does not know): said once per request,
    /// naming the call, process and thread, since its replay may differ.
    pub(super) fn unmodelled_ioctl(&mut self, tgid: i32, tid: i32, args: &[u64; 6]) {
        let cmd = args[1] as u32;
        if crate::syscalls::ioctl_output_len(args[1]).is_none()
            && self.unmodelled_ioctls.insert(cmd)
        {
            eprintln!(
                "sightline: ioctl({}, {cmd:#x}) (process {tgid}, thread {tid}) is not modelled: what it writes to memory is not recorded, so its replay may differ",
                args[0] as i32
            );
        }
    }

    /// A trapped system call this version has no description of (`syscalls::is_described`): it
    /// replays by its recorded result alone (what it wrote to memory, or did to the system, is not
    /// recorded), so its replay may differ. Said once per call, naming the process and thread,
    /// at record time rather than found at replay.
    pub(super) fn unmodelled_call(&mut self, tgid: i32, tid: i32, nr: i64, result: i64) {
        if !crate::syscalls::is_described(nr) && self.unmodelled_calls.insert(nr) {
            eprintln!(
                "sightline: {} (process {tgid}, thread {tid}, result {result}) is not modelled: replay gives its recorded result only (what it writes to memory is not recorded), so the replay may differ",
                crate::syscalls::name(nr)
            );
        }
    }

    /// At the exit of a successful `execve`: keep the new image's executable (`/proc/<tid>/exe`),
    /// so replay can provide it if the program built it ([`crate::files::KeptExec`]); empty when
    /// it could not be kept.
    pub(super) fn keep_exec(&mut self, tid: i32) -> Vec<u8> {
        let source = format!("/proc/{tid}/exe");
        let Ok(original) = std::fs::read_link(&source) else {
            return Vec::new();
        };
        match self.files.keeper.keep(Path::new(&source), &original) {
            Ok(Some(name)) => crate::files::KeptExec {
                name,
                path: original.display().to_string(),
            }
            .encode(),
            Ok(None) => Vec::new(),
            Err(e) => {
                if !self.files.warned {
                    self.files.warned = true;
                    eprintln!(
                        "sightline: cannot keep the executable {} in the recording ({e})",
                        original.display()
                    );
                }
                Vec::new()
            }
        }
    }

    /// A writable shared mapping of a file. Replay gives the mapping shared anonymous memory with
    /// the contents recorded here ([`Self::shared_contents`]), shared with the children forked
    /// from then on, which run in this process's scheduling group. What the record cannot see is
    /// said here, once per file: processes outside the recording that have it open or mapped
    /// (their writes change what the program reads, unrecorded), and a second mapping of the file
    /// (replay gives each mapping memory of its own).
    fn say_shared(&mut self, tgid: i32, tid: i32, source: &str, again: bool) {
        let Ok(meta) = std::fs::metadata(source) else {
            return;
        };
        let id = (meta.dev(), meta.ino());
        let path = std::fs::read_link(source).unwrap_or_default();
        if again && self.files.shared_said.insert((id, true)) {
            eprintln!(
                "sightline: process {tgid} (thread {tid}) maps {} shared and writable a second time: the replay gives each mapping its own memory, so writes through one are not seen through the other",
                path.display()
            );
        }
        if !self.files.shared_said.insert((id, false)) {
            return;
        }
        let recorded: std::collections::HashSet<i32> =
            self.procs.values().map(|p| p.tgid).collect();
        let outside = processes_with_file(id, &recorded, std::process::id() as i32);
        if outside.is_empty() {
            return;
        }
        eprintln!(
            "sightline: process {tgid} (thread {tid}) maps {} shared and writable (MAP_SHARED); process(es) {} outside the recording have it open or mapped, and what they write there is not recorded: the replay sees the contents as they were at this mmap",
            path.display(),
            outside
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    /// At the seccomp stop of a shared file mapping ([`Self::is_shared_file_mapping`]): the
    /// file's bytes under the mapping to be (from the fd, up to the file's end, at most
    /// [`MAX_SHARED_CONTENTS`]); `None` for any other call.
    pub(super) fn read_shared_contents(
        &self,
        tid: i32,
        tgid: i32,
        args: &[u64; 6],
    ) -> Option<std::io::Result<Vec<u8>>> {
        use std::os::unix::fs::FileExt;
        if !self.is_shared_file_mapping(tgid, args) {
            return None;
        }
        let (len, fd, offset) = (args[1], args[4] as i32, args[5]);
        Some(
            std::fs::File::open(format!("/proc/{tid}/fd/{fd}")).and_then(|f| {
                let size = f.metadata()?.len();
                let n = size.saturating_sub(offset).min(len);
                if n > MAX_SHARED_CONTENTS {
                    return Err(std::io::Error::other(format!(
                        "{n} bytes are more than the {MAX_SHARED_CONTENTS} this version records"
                    )));
                }
                let mut buf = vec![0u8; n as usize];
                f.read_exact_at(&mut buf, offset)?;
                Ok(buf)
            }),
        )
    }

    /// At the exit of a successful shared file mapping: the bytes read at its seccomp stop
    /// ([`Self::read_shared_contents`]), as writes of the nonzero pages at the mapping's address.
    /// Replay puts them in its own file for the mapping, or in shared anonymous memory
    /// (`replayer/syscall.rs`). Empty for any other call, or when the file could not be read
    /// (said).
    pub(super) fn shared_contents(
        &mut self,
        tid: i32,
        args: &[u64; 6],
        result: i64,
    ) -> Vec<crate::format::MemWrite> {
        let Some(read) = self.files.contents.remove(&tid) else {
            return Vec::new();
        };
        if result < 0 {
            return Vec::new();
        }
        match read {
            Ok(bytes) => nonzero_pages(result as u64, &bytes),
            Err(e) => {
                let source = format!("/proc/{tid}/fd/{}", args[4] as i32);
                let path = std::fs::read_link(&source).unwrap_or_default();
                eprintln!(
                    "sightline: cannot record the contents of {} mapped shared (thread {tid}): {e}; its replay starts from zeros and may diverge",
                    path.display()
                );
                Vec::new()
            }
        }
    }

    /// At the seccomp stop of a writable `MAP_SHARED` `mmap` of a file: if another scheduling
    /// group has the file mapped, the process joins that group (so the two run one at a time and
    /// their accesses are in the recorded schedule); else its group is scheduled from here on
    /// (schedule recorded), since another process may join it. A process that cannot move (it has
    /// threads, or other processes share its group) stays, and that is said.
    pub(super) fn join_by_file(&mut self, t: &mut replay_ptrace::Stopped) {
        let tid = t.tid();
        let Ok(regs) = t.regs() else { return };
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
        if regs.orig_rax as i64 != libc::SYS_mmap || !self.is_shared_file_mapping(tgid, &args) {
            return;
        }
        let Ok(meta) = std::fs::metadata(format!("/proc/{tid}/fd/{}", args[4] as i32)) else {
            return;
        };
        let id = (meta.dev(), meta.ino());
        let mine = self.group_of(tid);
        let next = self.files.shared_files.len() as u32;
        let (file, other) = *self.files.shared_files.entry(id).or_insert((next, mine));
        let other_live = other != mine
            && self.groups.contains_key(&other)
            && self.procs.keys().any(|&q| self.group_of(q) == other);
        if other_live {
            let alone = self
                .procs
                .iter()
                .all(|(&q, p)| q == tid || (p.tgid != tgid && self.group_of(q) != mine));
            if alone {
                if self.debug {
                    eprintln!("[record] process {tgid} joins group {other} (a shared file)");
                }
                if let Some(p) = self.procs.get_mut(&tid) {
                    p.group = other;
                }
                self.groups.remove(&mine);
                if let Some(g) = self.groups.get_mut(&other) {
                    g.threaded = true;
                }
                self.files.joins.insert(tid, other);
                return;
            }
            if self.files.shared_said.insert((id, true)) {
                let path = std::fs::read_link(format!("/proc/{tid}/fd/{}", args[4] as i32))
                    .unwrap_or_default();
                eprintln!(
                    "sightline: process {tgid} (thread {tid}) maps {} shared and writable, as another recorded process does, but has threads or shares memory with others: the two are not scheduled together, so their replay may diverge",
                    path.display()
                );
            }
        }
        self.files
            .shared_files
            .insert(id, (file, self.group_of(tid)));
        let key = self.group_of(tid);
        if let Some(g) = self.groups.get_mut(&key) {
            g.threaded = true;
        }
    }

    /// The `extra` bytes of a successful writable `MAP_SHARED` `mmap` of a file
    /// ([`crate::files::SharedMapping`]); empty for any other call.
    pub(super) fn shared_mapping(
        &mut self,
        tid: i32,
        tgid: i32,
        args: &[u64; 6],
        result: i64,
    ) -> Vec<u8> {
        let join = self.files.joins.remove(&tid).unwrap_or(0);
        if result < 0 || !self.is_shared_file_mapping(tgid, args) {
            return Vec::new();
        }
        let fd = args[4] as i32;
        let Some((id, file)) = self.shared_file_of(tid, fd) else {
            return Vec::new();
        };
        let opener = self
            .files
            .opened_rw
            .get(&(tgid, fd))
            .filter(|o| o.id == id)
            .copied();
        crate::files::SharedMapping {
            opener: opener.map_or(0, |o| o.tid),
            seq: opener.map_or(0, |o| o.seq),
            file,
            join,
        }
        .encode()
    }

    /// At the seccomp stop of a shared file mapping whose contents were just read: the mapping's
    /// rendezvous point on the file, kept for its record.
    pub(super) fn take_shared_rdv(&mut self, tid: i32, args: &[u64; 6]) {
        self.files.pending_rdv.remove(&tid);
        let Some((_, file)) = self.shared_file_of(tid, args[4] as i32) else {
            return;
        };
        let rdv = self.next_rdv(crate::rendezvous::shared_file_object(file));
        self.files.pending_rdv.insert(tid, (rdv, file));
    }

    /// At the exit of an `mmap`: the rendezvous point its seccomp stop took, if it was a shared
    /// file mapping; a successful one makes the process a user of the file.
    pub(super) fn shared_mmap_rdv(
        &mut self,
        tid: i32,
        tgid: i32,
        result: i64,
    ) -> Option<crate::format::Rendezvous> {
        let (rdv, file) = self.files.pending_rdv.remove(&tid)?;
        if result >= 0 {
            self.files
                .mapped_shared
                .entry(tgid)
                .or_default()
                .insert(file);
        }
        Some(rdv)
    }

    /// The (dev, ino) and recording number of the shared-mapped file that thread `tid`'s fd `fd`
    /// refers to; `None` when it is not one (or the fd is gone).
    fn shared_file_of(&self, tid: i32, fd: i32) -> Option<((u64, u64), u32)> {
        let meta = std::fs::metadata(format!("/proc/{tid}/fd/{fd}")).ok()?;
        let id = (meta.dev(), meta.ino());
        let &(file, _) = self.files.shared_files.get(&id)?;
        Some((id, file))
    }

    /// At the exit of a trapped call on fd `fd` of process `tgid` (`fcntl` locks, `write`,
    /// `pwrite64`, `ftruncate`, `fallocate`, reads, `fsync`, ...): a rendezvous point on the file
    /// when the fd's open is one of a file mapped shared in the recording, so that replay runs
    /// the call after the other processes' uses of the file that came before it, as recorded.
    /// sqlite's WAL-index (`-shm`) protocol is made of such calls: the second opener takes the
    /// file's lock and truncates it once the first has let go; run earlier, the truncation
    /// changed the memory under the first's mapping. (`close` and `dup2` run untrapped, so a
    /// reused fd may still name the file here: one ordering point more, never a wrong one.)
    pub(super) fn shared_fd_rdv(
        &mut self,
        tgid: i32,
        nr: i64,
        fd: i32,
    ) -> Option<crate::format::Rendezvous> {
        const FD_CALLS: [i64; 18] = [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_pread64,
            libc::SYS_pwrite64,
            libc::SYS_readv,
            libc::SYS_writev,
            libc::SYS_preadv,
            libc::SYS_pwritev,
            libc::SYS_preadv2,
            libc::SYS_pwritev2,
            libc::SYS_fcntl,
            libc::SYS_flock,
            libc::SYS_fsync,
            libc::SYS_fdatasync,
            libc::SYS_ftruncate,
            libc::SYS_fallocate,
            libc::SYS_fstat,
            libc::SYS_lseek,
        ];
        if self.files.shared_files.is_empty() || !FD_CALLS.contains(&nr) {
            return None;
        }
        let id = self.files.opened_rw.get(&(tgid, fd))?.id;
        let &(file, _) = self.files.shared_files.get(&id)?;
        Some(self.next_rdv(crate::rendezvous::shared_file_object(file)))
    }

    /// At the end of process `tgid`'s use of its shared file mappings (its exit, or a successful
    /// `execve`): one rendezvous point on each file it had mapped.
    pub(super) fn shared_files_released(&mut self, tgid: i32) -> Vec<crate::format::Rendezvous> {
        let files = self.files.mapped_shared.remove(&tgid).unwrap_or_default();
        files
            .into_iter()
            .map(|f| self.next_rdv(crate::rendezvous::shared_file_object(f)))
            .collect()
    }

    /// A forked child has its parent's fds.
    pub(super) fn inherit_opens(&mut self, parent_tgid: i32, child: i32) {
        // A forked child keeps its parent's shared mappings (fork(2)).
        if let Some(files) = self.files.mapped_shared.get(&parent_tgid).cloned() {
            self.files.mapped_shared.insert(child, files);
        }
        for map in [&mut self.files.opened, &mut self.files.opened_rw] {
            let copied: Vec<_> = map
                .iter()
                .filter(|((g, _), _)| *g == parent_tgid)
                .map(|((_, fd), o)| ((child, *fd), *o))
                .collect();
            map.extend(copied);
        }
    }

    /// At the exit of a successful `mmap` of a file: keep the file (unless the mapping is shared and
    /// writable: its contents are the program's to change) and return the `mmap` record's extra
    /// bytes ([`KeptMapping`]); empty when nothing was kept.
    pub(super) fn keep_mapped(
        &mut self,
        tid: i32,
        tgid: i32,
        args: &[u64; 6],
        result: i64,
    ) -> Vec<u8> {
        let (prot, flags, fd) = (args[2] as i32, args[3] as i32, args[4] as i32);
        if result < 0 || fd < 0 || flags & libc::MAP_ANONYMOUS != 0 {
            return Vec::new();
        }
        let shared = flags & MAP_TYPE != libc::MAP_PRIVATE;
        let source = format!("/proc/{tid}/fd/{fd}");
        if shared && (prot & libc::PROT_WRITE != 0 || self.is_shared_file_mapping(tgid, args)) {
            // A mapping whose fd's open was seen replays on the replay's own shared file, shared
            // with the other mappings of it; any other gets memory of its own.
            let again = std::fs::metadata(&source).is_ok_and(|m| {
                let id = (m.dev(), m.ino());
                let opened = self
                    .files
                    .opened_rw
                    .get(&(tgid, fd))
                    .is_some_and(|o| o.id == id);
                self.files.shared_ranges.note(id, args[5], args[1]) && !opened
            });
            self.say_shared(tgid, tid, &source, again);
            return Vec::new();
        }
        let Ok(meta) = std::fs::metadata(&source) else {
            return Vec::new();
        };
        let original = std::fs::read_link(&source).unwrap_or_default();
        let name = match self.files.keeper.keep(Path::new(&source), &original) {
            Ok(Some(name)) => name,
            Ok(None) => return Vec::new(),
            Err(e) => {
                if !self.files.warned {
                    self.files.warned = true;
                    eprintln!(
                        "sightline: cannot keep mapped file {} in the recording ({e}): its replay will map the file as it is then",
                        original.display()
                    );
                }
                return Vec::new();
            }
        };
        let opener = self
            .files
            .opened
            .get(&(tgid, fd))
            .filter(|o| o.id == (meta.dev(), meta.ino()))
            .copied();
        KeptMapping {
            opener: opener.map_or(0, |o| o.tid),
            seq: opener.map_or(0, |o| o.seq),
            name,
        }
        .encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nonzero_pages_are_written() {
        let mut b = vec![0u8; 4096 * 4 + 100];
        b[5000] = 1; // page 1
        b[4096 * 2] = 2; // page 2: one run with page 1
        b[4096 * 4 + 99] = 3; // the partial last page
        let w = nonzero_pages(0x1000, &b);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].addr, w[0].data.len()), (0x1000 + 4096, 8192));
        assert_eq!(w[0].data[5000 - 4096], 1);
        assert_eq!((w[1].addr, w[1].data.len()), (0x1000 + 4096 * 4, 100));
        assert!(nonzero_pages(0, &[0; 10]).is_empty());
        assert!(nonzero_pages(0, &[]).is_empty());
    }

    #[test]
    fn a_second_mapping_of_the_same_bytes_is_seen() {
        let mut r = SharedRanges::default();
        assert!(!r.note((1, 2), 0, 32768));
        assert!(
            !r.note((1, 2), 32768, 32768),
            "the next region does not overlap"
        );
        assert!(!r.note((1, 3), 0, 4096), "another file");
        assert!(r.note((1, 2), 4096, 4096));
    }
}
