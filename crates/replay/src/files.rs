//! Mapped files kept in the recording (`DIR/files/`): every regular file a recorded process maps
//! with `mmap` (shared libraries, data files) is kept as it was at that `mmap`, so replay maps the
//! kept copy and never the file as it is now (rr keeps such files in its trace the same way:
//! hard links or copies).
//!
//! A kept file is named by its contents: `<FNV-1a 64 of the bytes, 16 hex digits>-<size>`. A file
//! kept once per recording (processes share the name) and, through a store next to the recordings
//! (`<parent of DIR>/.sightline-files/`), once across recordings: later recordings hard-link the
//! stored copy. Files of the system's package-managed directories (`/usr`, `/lib`, `/bin`, …) that
//! only their owner may write are hard-linked directly (a package manager replaces such files by
//! renaming a new one over them, so the link keeps the old contents); every other file is copied.
//! See docs/recording-format.md, *Mapped files*.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// Directory of kept files inside a recording.
pub const FILES_DIR: &str = "files";
/// Store shared by the recordings of one directory (in the recording's parent directory).
pub const STORE_DIR: &str = ".sightline-files";

/// Directories whose files are replaced by rename, not rewritten in place (package-managed).
const SYSTEM_PREFIXES: &[&str] = &[
    "/usr/", "/lib/", "/lib32/", "/lib64/", "/bin/", "/sbin/", "/opt/", "/etc/",
];

/// One mapped file kept, as the `extra` bytes of its `mmap` record say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptMapping {
    /// Recorded tid of the thread whose `open` made the fd (0 when the recorder did not see that
    /// open: an fd duplicated or inherited through `fork`).
    pub opener: i32,
    /// Index of that open's record in the opener's stream of records (0-based, all kinds).
    pub seq: u64,
    /// Name of the kept file in `DIR/files/`.
    pub name: String,
}

impl KeptMapping {
    /// Encodes as `opener:u32 seq:u64 name_len:u32 name[name_len]` (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.name.len());
        b.extend_from_slice(&(self.opener as u32).to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        b.extend_from_slice(self.name.as_bytes());
        b
    }

    /// Decodes [`Self::encode`]'s bytes; `None` for anything else (an `mmap` without a kept file
    /// has no extra bytes).
    pub fn decode(b: &[u8]) -> Option<KeptMapping> {
        let opener = i32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
        let seq = u64::from_le_bytes(b.get(4..12)?.try_into().ok()?);
        let len = u32::from_le_bytes(b.get(12..16)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(b.get(16..16 + len)?).ok()?;
        (b.len() == 16 + len && valid_name(name)).then(|| KeptMapping {
            opener,
            seq,
            name: name.to_string(),
        })
    }
}

/// A writable `MAP_SHARED` mapping of a file, as the `extra` bytes of its `mmap` record say
/// (docs/recording-format.md, *Shared memory*): which open made the fd, which of the recording's
/// shared files it is, and the scheduling group the mapping process joined at this call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedMapping {
    /// Recorded tid of the thread whose `open` made the fd (0 when not seen: a memfd, an fd
    /// duplicated or inherited from an unrecorded open).
    pub opener: i32,
    /// Index of that open's record in the opener's stream (0-based, all kinds).
    pub seq: u64,
    /// The shared file, numbered from 0 in the order of first mapping within the recording.
    pub file: u32,
    /// The scheduling group (its key, a recorded tid) the mapping process joined before this
    /// call because another process had the file mapped; 0 when it stayed in its own.
    pub join: i32,
}

impl SharedMapping {
    /// The first bytes of the encoding (never the start of a [`KeptMapping`]'s, whose opener is a
    /// tid of at most 2^22).
    const MAGIC: [u8; 4] = *b"shm\x01";

    /// Encodes as `"shm\x01" opener:u32 seq:u64 file:u32 join:u32` (little-endian, 24 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Self::MAGIC.to_vec();
        b.extend_from_slice(&(self.opener as u32).to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.file.to_le_bytes());
        b.extend_from_slice(&(self.join as u32).to_le_bytes());
        b
    }

    /// Decodes [`Self::encode`]'s bytes; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<SharedMapping> {
        if b.len() != 24 || b[..4] != Self::MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        Some(SharedMapping {
            opener: u32_at(4) as i32,
            seq: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            file: u32_at(16),
            join: u32_at(20) as i32,
        })
    }
}

/// The executable of a successful `execve`, kept: the bytes after the 16 `AT_RANDOM` bytes of its
/// record's `extra`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptExec {
    /// Name of the kept file in `DIR/files/`.
    pub name: String,
    /// Absolute path of the executable at record time (`/proc/<pid>/exe`).
    pub path: String,
}

impl KeptExec {
    /// Encodes as `name_len:u32 name path_len:u32 path` (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for s in [&self.name, &self.path] {
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
        b
    }

    /// Decodes [`Self::encode`]'s bytes; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<KeptExec> {
        let mut at = 0;
        let mut field = || -> Option<String> {
            let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
            let s = std::str::from_utf8(b.get(at + 4..at + 4 + len)?).ok()?;
            at += 4 + len;
            Some(s.to_string())
        };
        let name = field()?;
        let path = field()?;
        (valid_name(&name) && path.starts_with('/')).then_some(KeptExec { name, path })
    }
}

/// True when the file at `path` has exactly the contents kept as `name` (same size, same hash).
pub fn same_contents(path: &Path, name: &str) -> bool {
    let Some((_, size)) = name.split_once('-') else {
        return false;
    };
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && size == m.len().to_string())
        && hash_file(path, None).is_ok_and(|n| n == name)
}

/// A kept file's name is 16 hex digits, `-`, a decimal size: never a path.
fn valid_name(name: &str) -> bool {
    match name.split_once('-') {
        Some((h, s)) => {
            h.len() == 16
                && h.bytes().all(|c| c.is_ascii_hexdigit())
                && !s.is_empty()
                && s.bytes().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// How the recorder keeps mapped files (one per recording).
#[derive(Debug)]
pub struct FileKeeper {
    files: PathBuf,
    store: Option<PathBuf>,
    /// (dev, ino, size, mtime ns, ctime ns) → kept name: a file mapped again (by this or another
    /// process) is not read again.
    seen: HashMap<(u64, u64, u64, i64, i64), String>,
    tmp_seq: u64,
}

/// Identity of a file's version: device, inode, size, modification and change times (ns).
fn version_of(m: &std::fs::Metadata) -> (u64, u64, u64, i64, i64) {
    (
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    )
}

impl FileKeeper {
    /// Keeper writing into `recording/files/` (created on first use), with the store in the
    /// recording's parent directory.
    pub fn new(recording: &Path) -> FileKeeper {
        let store = recording
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().map(|p| p.join(STORE_DIR)));
        FileKeeper {
            files: recording.join(FILES_DIR),
            store,
            seen: HashMap::new(),
            tmp_seq: 0,
        }
    }

    /// Keeps the regular file open as `source` (a `/proc/<tid>/fd/<n>` path, readable even when
    /// the file was deleted), whose name was `original` (the fd's link target). Returns the kept
    /// name, or `None` when `source` is not a regular file.
    ///
    /// Errors: [`Error::Io`] when the recording directory cannot be written or the file read.
    pub fn keep(&mut self, source: &Path, original: &Path) -> Result<Option<String>, Error> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| Error::Io { path, source }
        };
        let meta = std::fs::metadata(source).map_err(io(source))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let version = version_of(&meta);
        if let Some(name) = self.seen.get(&version) {
            return Ok(Some(name.clone()));
        }
        std::fs::create_dir_all(&self.files).map_err(io(&self.files))?;
        let system = original.to_str().is_some_and(|p| {
            SYSTEM_PREFIXES.iter().any(|pre| p.starts_with(pre)) && !p.contains("/../")
        }) && meta.mode() & 0o022 == 0
            && std::fs::metadata(original).is_ok_and(|m| version_of(&m) == version);
        let name = if system {
            let name = hash_file(source, None)?;
            let dst = self.files.join(&name);
            if !dst.exists() && std::fs::hard_link(original, &dst).is_err() {
                self.copy_in(source, &name)?;
            }
            name
        } else {
            self.tmp_seq += 1;
            let tmp = self
                .files
                .join(format!(".tmp-{}-{}", std::process::id(), self.tmp_seq));
            let name = {
                let mut out = std::fs::File::create(&tmp).map_err(io(&tmp))?;
                hash_file(source, Some(&mut out))?
            };
            let dst = self.files.join(&name);
            if dst.exists() {
                let _ = std::fs::remove_file(&tmp);
            } else if let Some(stored) = self.store.as_ref().map(|s| s.join(&name))
                && stored.is_file()
                && std::fs::hard_link(&stored, &dst).is_ok()
            {
                let _ = std::fs::remove_file(&tmp);
            } else {
                std::fs::rename(&tmp, &dst).map_err(io(&dst))?;
                if let Some(store) = &self.store
                    && std::fs::create_dir_all(store).is_ok()
                {
                    let _ = std::fs::hard_link(&dst, store.join(&name));
                }
            }
            name
        };
        self.seen.insert(version, name.clone());
        Ok(Some(name))
    }

    /// Copies `source` in as `name` (a system file on another file system).
    fn copy_in(&mut self, source: &Path, name: &str) -> Result<(), Error> {
        let dst = self.files.join(name);
        std::fs::copy(source, &dst).map_err(|e| Error::Io {
            path: dst.display().to_string(),
            source: e,
        })?;
        Ok(())
    }
}

/// Reads `path` to its end, hashing it (and writing it to `copy`); returns the kept name.
fn hash_file(path: &Path, mut copy: Option<&mut std::fs::File>) -> Result<String, Error> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut h = crate::syscalls::HASH_SEED;
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h = crate::syscalls::hash(h, &buf[..n]);
        size += n as u64;
        if let Some(out) = copy.as_mut() {
            out.write_all(&buf[..n]).map_err(io)?;
        }
    }
    Ok(format!("{h:016x}-{size}"))
}

/// Files the program executed that are gone or changed since the recording, provided from the
/// recording on replay: overlay mounts over their directories (in the replay's own mount
/// namespace) whose upper layers, in a private replay directory, hold the kept copies. The
/// directory is removed when this is dropped.
#[derive(Debug, Default)]
pub struct Provided {
    /// `(directory, overlayfs options)` for `replay_ptrace::SpawnSpec::overlays`.
    pub overlays: Vec<(String, String)>,
    /// `(source, target)` bind mounts made before the overlays: the recording's `files/` seen at
    /// a path in the private replay directory, outside every overlay.
    pub binds: Vec<(String, String)>,
    /// That path, when there are overlays.
    pub files_at: Option<PathBuf>,
    /// The provided files' paths.
    pub paths: Vec<String>,
    scratch: Option<PathBuf>,
}

impl Drop for Provided {
    fn drop(&mut self) {
        if let Some(d) = &self.scratch {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Builds [`Provided`] for `rec`: every executable of a recorded `execve` ([`KeptExec`]) whose
/// file is now missing or has other contents, whose directory still exists. Says on stderr which
/// files it provides.
///
/// Errors: [`Error::Io`] when the private replay directory cannot be made.
pub fn provide_created(rec: &crate::format::Recording) -> Result<Provided, Error> {
    use crate::format::Event;
    let mut by_dir: std::collections::BTreeMap<PathBuf, Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for r in &rec.records {
        let Event::Syscall(e) = &r.event else {
            continue;
        };
        if !matches!(e.nr, libc::SYS_execve | libc::SYS_execveat) || e.result != 0 {
            continue;
        }
        let Some(k) = e.extra.get(16..).and_then(KeptExec::decode) else {
            continue;
        };
        if !seen.insert(k.path.clone()) || same_contents(Path::new(&k.path), &k.name) {
            continue;
        }
        let p = Path::new(&k.path);
        let (Some(dir), Some(base)) = (p.parent(), p.file_name()) else {
            continue;
        };
        if !dir.is_dir() || !rec.dir.join(FILES_DIR).join(&k.name).is_file() {
            eprintln!(
                "sightline: replay cannot provide {}, which the program ran: {}",
                k.path,
                if dir.is_dir() {
                    "its copy is not in the recording"
                } else {
                    "its directory is gone"
                }
            );
            continue;
        }
        by_dir
            .entry(dir.to_path_buf())
            .or_default()
            .push((base.to_string_lossy().into_owned(), k.name.clone()));
    }
    let mut out = Provided::default();
    if by_dir.is_empty() {
        return Ok(out);
    }
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| Error::Io { path, source }
    };
    // On tmpfs when there is one: an overlay's upper layer may not lie inside its lower layer.
    let base = if Path::new("/run").is_dir() {
        PathBuf::from("/run/sightline")
    } else {
        std::env::temp_dir()
    };
    let scratch = base.join(format!(
        "replay-{}-{}",
        std::process::id(),
        replay_ptrace::coarse_monotonic_ns()
    ));
    std::fs::create_dir_all(&scratch).map_err(io(&scratch))?;
    out.scratch = Some(scratch.clone());
    let files_at = scratch.join("files");
    std::fs::create_dir_all(&files_at).map_err(io(&files_at))?;
    out.binds.push((
        rec.dir.join(FILES_DIR).display().to_string(),
        files_at.display().to_string(),
    ));
    out.files_at = Some(files_at);
    for (i, (dir, files)) in by_dir.iter().enumerate() {
        let upper = scratch.join(format!("{i}/upper"));
        let work = scratch.join(format!("{i}/work"));
        std::fs::create_dir_all(&upper).map_err(io(&upper))?;
        std::fs::create_dir_all(&work).map_err(io(&work))?;
        for (base, name) in files {
            let dst = upper.join(base);
            std::fs::copy(rec.dir.join(FILES_DIR).join(name), &dst).map_err(io(&dst))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755))
                .map_err(io(&dst))?;
            out.paths.push(dir.join(base).display().to_string());
        }
        out.overlays.push((
            dir.display().to_string(),
            format!(
                "lowerdir={},upperdir={},workdir={}",
                dir.display(),
                upper.display(),
                work.display()
            ),
        ));
    }
    eprintln!(
        "sightline: replay provides {} file(s) the program created or changed while recording, from the recording (in a mount namespace of the replay's own; nothing is written outside it): {}",
        out.paths.len(),
        out.paths.join(", ")
    );
    Ok(out)
}

/// Space the kept files of a recording take (`replay --info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilesUsage {
    /// Kept files.
    pub files: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Bytes of those files that have other hard links (the original system file, the store or
    /// other recordings): space not used by this recording alone.
    pub shared_bytes: u64,
}

/// The kept files of the recording in `dir` (all zero when it has none).
pub fn usage(dir: &Path) -> FilesUsage {
    let mut u = FilesUsage::default();
    let Ok(entries) = std::fs::read_dir(dir.join(FILES_DIR)) else {
        return u;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(valid_name) {
            continue;
        }
        if let Ok(m) = e.metadata() {
            u.files += 1;
            u.bytes += m.len();
            // One link is this recording's; a stored copy has one in the store too.
            if m.nlink() > 2 || (m.nlink() == 2 && !stored_only(dir, &name)) {
                u.shared_bytes += m.len();
            }
        }
    }
    u
}

/// True when the second link of a kept file is the store's copy and nothing else links it.
fn stored_only(dir: &Path, name: &std::ffi::OsStr) -> bool {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.parent().map(|p| p.join(STORE_DIR).join(name)))
        .is_some_and(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_mapping_round_trips_and_is_no_kept_mapping() {
        let m = SharedMapping {
            opener: 4242,
            seq: 9,
            file: 2,
            join: 4000,
        };
        let b = m.encode();
        assert_eq!(SharedMapping::decode(&b), Some(m));
        assert_eq!(KeptMapping::decode(&b), None);
        assert_eq!(SharedMapping::decode(&b[..23]), None);
        let k = KeptMapping {
            opener: 1,
            seq: 0,
            name: "00112233aabbccdd-4".into(),
        };
        assert_eq!(SharedMapping::decode(&k.encode()), None);
    }

    #[test]
    fn kept_mapping_round_trips_and_rejects_paths() {
        let k = KeptMapping {
            opener: 4242,
            seq: 17,
            name: "00112233aabbccdd-4096".into(),
        };
        assert_eq!(KeptMapping::decode(&k.encode()), Some(k.clone()));
        let bad = KeptMapping {
            name: "../../etc/passwd".into(),
            ..k.clone()
        };
        assert_eq!(KeptMapping::decode(&bad.encode()), None);
        assert_eq!(KeptMapping::decode(&k.encode()[..20]), None);
        assert_eq!(KeptMapping::decode(&[]), None);
    }

    #[test]
    fn a_copied_file_is_named_by_contents_and_deduplicated_through_the_store() {
        let base = std::env::temp_dir().join(format!("sl-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("a")).unwrap();
        std::fs::create_dir_all(base.join("b")).unwrap();
        let data = base.join("data.txt");
        std::fs::write(&data, b"hello mapped world\n").unwrap();
        let mut k = FileKeeper::new(&base.join("a"));
        let name = k.keep(&data, &data).unwrap().unwrap();
        let h = crate::syscalls::hash(crate::syscalls::HASH_SEED, b"hello mapped world\n");
        assert_eq!(name, format!("{h:016x}-19"));
        assert_eq!(
            std::fs::read(base.join("a/files").join(&name)).unwrap(),
            b"hello mapped world\n"
        );
        // Rewriting the original leaves the kept copy alone.
        std::fs::write(&data, b"changed\n").unwrap();
        assert_eq!(
            std::fs::read(base.join("a/files").join(&name)).unwrap(),
            b"hello mapped world\n"
        );
        // A second recording of the same contents links the stored copy.
        std::fs::write(&data, b"hello mapped world\n").unwrap();
        let mut k2 = FileKeeper::new(&base.join("b"));
        assert_eq!(k2.keep(&data, &data).unwrap().unwrap(), name);
        let ino = |p: PathBuf| std::fs::metadata(p).unwrap().ino();
        assert_eq!(
            ino(base.join("a/files").join(&name)),
            ino(base.join("b/files").join(&name))
        );
        let u = usage(&base.join("b"));
        assert_eq!(
            u,
            FilesUsage {
                files: 1,
                bytes: 19,
                shared_bytes: 19
            }
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
