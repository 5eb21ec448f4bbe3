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
    /// Records emitted so far per recorded tid (the stream index of the next one).
    pub(super) emitted: HashMap<i32, u64>,
    /// A file could not be kept (said once).
    warned: bool,
    /// Files whose writable shared mapping was said, by (dev, ino).
    shared_said: std::collections::HashSet<(u64, u64)>,
}

impl MappedFiles {
    pub(super) fn new(dir: &Path) -> MappedFiles {
        MappedFiles {
            keeper: crate::files::FileKeeper::new(dir),
            opened: HashMap::new(),
            emitted: HashMap::new(),
            warned: false,
            shared_said: std::collections::HashSet::new(),
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
            _ => {
                self.files.opened.remove(&(tgid, fd));
            }
        }
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

    /// A writable shared mapping of a file: not replayed yet. Said at record time, once per file,
    /// naming the file and any process outside the recording that has it open or mapped (its
    /// writes would change what the program reads, unrecorded).
    fn say_shared(&mut self, tgid: i32, tid: i32, source: &str) {
        let Ok(meta) = std::fs::metadata(source) else {
            return;
        };
        let id = (meta.dev(), meta.ino());
        if !self.files.shared_said.insert(id) {
            return;
        }
        let path = std::fs::read_link(source).unwrap_or_default();
        let recorded: std::collections::HashSet<i32> =
            self.procs.values().map(|p| p.tgid).collect();
        let outside = processes_with_file(id, &recorded, std::process::id() as i32);
        let who = if outside.is_empty() {
            String::new()
        } else {
            format!(
                "; process(es) {} outside the recording have it open or mapped, and what they write there is not recorded",
                outside
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        eprintln!(
            "sightline: process {tgid} (thread {tid}) maps {} shared and writable (MAP_SHARED): shared memory is not yet replayed, so the replay will diverge at this mmap{who}",
            path.display()
        );
    }

    /// A forked child has its parent's fds.
    pub(super) fn inherit_opens(&mut self, parent_tgid: i32, child: i32) {
        let copied: Vec<_> = self
            .files
            .opened
            .iter()
            .filter(|((g, _), _)| *g == parent_tgid)
            .map(|((_, fd), o)| ((child, *fd), *o))
            .collect();
        self.files.opened.extend(copied);
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
        if shared && prot & libc::PROT_WRITE != 0 {
            self.say_shared(tgid, tid, &source);
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
