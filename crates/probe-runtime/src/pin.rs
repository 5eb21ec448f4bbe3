//! BPF objects pinned under bpffs: anonymous enablings (`sightline probe -A`, claimed by `-a`,
//! DTrace's anonymous tracing) and the postmortem directories of `bufpolicy=ring` runs
//! (`sightline probe --recover`). Paths and the manifest's format: docs/probe-pinning.md.
//!
//! A pinned directory holds the objects [`crate::session::Session::pin`] pinned (`map-I`,
//! `prog-I`, `link-I`) and a [`Manifest`] in [`MANIFEST`]: the script's compile inputs (to
//! compile it again: the record and aggregation layouts are the code generator's, which is
//! deterministic) and the pinned maps' shapes, which the claimer compares with the recompiled
//! layout before it reads a byte ([`Manifest::check_layout`]).

use std::path::{Path, PathBuf};

use probe_codegen::layout::{Layout, MapKind};
use serde::{Deserialize, Serialize};

use crate::session::{PinnedObjects, RuntimeError};

/// Where Sightline's pinned directories are: `sightline` in the bpf file system.
pub const ROOT: &str = "/sys/fs/bpf/sightline";
/// The anonymous enabling's directory name under [`ROOT`] (one at a time, as DTrace's).
pub const ANON: &str = "anon";
/// A ring-policy run's directory name under [`ROOT`]: this prefix, then the run's pid.
pub const RUN_PREFIX: &str = "run-";
/// The manifest's file name in a pinned directory. bpffs holds BPF objects only (no regular
/// files), so the manifest is a pinned `ARRAY` map: key `u32` chunk number, value
/// [`MANIFEST_CHUNK`] bytes, the JSON text in chunks 0, 1, ... padded with NUL bytes.
pub const MANIFEST: &str = "layout";
/// The value size of the manifest map (bytes of JSON per entry).
pub const MANIFEST_CHUNK: usize = 4096;
/// The manifest format this version writes and reads.
pub const FORMAT: u32 = 1;

/// What a pinned directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinKind {
    /// An anonymous enabling (`-A`): every map, program and link; tracing goes on.
    Anonymous,
    /// A ring-policy run's buffers (postmortem): the kernel ring, its heads, the stats and the
    /// aggregations; nothing attached.
    Run,
}

/// One D source of the script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Its name in diagnostics (a `-s` path, `-n`, ...).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// Everything the compile of a script took, so that another process compiles the same program
/// (the fields of [`crate::compile::CompileOptions`] but the target, which a pinned program
/// cannot have).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptInputs {
    /// The sources, in order.
    pub sources: Vec<Source>,
    /// `$0`.
    pub script_name: Option<String>,
    /// `$1`, `$2`, ...
    pub macro_args: Vec<String>,
    /// The `-x` options in order (`[name, value]`, value `null` for a flag).
    pub options: Vec<(String, Option<String>)>,
    /// `-Z`.
    pub allow_zero_matches: bool,
    /// `$target` of the run (`-c`/`-p`), as a number only: the claim compiles without the
    /// process, so pid-provider probes of it cannot be compiled again.
    #[serde(default)]
    pub target_pid: Option<u32>,
    /// [`crate::compile::CompileOptions::ring_bypass_last`] (the flight recorder's clauses).
    #[serde(default)]
    pub ring_bypass_last: usize,
}

impl ScriptInputs {
    /// The compile options these inputs give.
    pub fn compile_options(&self) -> crate::compile::CompileOptions {
        crate::compile::CompileOptions {
            macro_args: self.macro_args.clone(),
            script_name: self.script_name.clone(),
            target_pid: self.target_pid,
            options: self.options.clone(),
            allow_zero_matches: self.allow_zero_matches
                || self.options.iter().any(|(k, _)| k == "zdefs"),
            ring_bypass_last: self.ring_bypass_last,
        }
    }

    /// The sources as a source map (the names and texts in order).
    pub fn source_map(&self) -> probe_syntax::SourceMap {
        let mut m = probe_syntax::SourceMap::new();
        for s in &self.sources {
            m.add(s.name.clone(), s.text.clone());
        }
        m
    }
}

/// A pinned map of the manifest: its shape (to compare with the recompiled layout) and file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedMap {
    /// The map's name (`sl_ring`, `sl_agg_16_8`, ...).
    pub name: String,
    /// `hash`, `array`, `percpu_hash`, `percpu_array` or `ringbuf`.
    pub kind: String,
    /// Key size (bytes).
    pub key_size: u32,
    /// Value size (bytes; per CPU for per-CPU maps).
    pub value_size: u32,
    /// Capacity (entries; bytes for the ring buffer).
    pub max_entries: u32,
    /// The pinned file in the directory, `null` when this map is not pinned.
    pub file: Option<String>,
}

/// The manifest of a pinned directory ([`MANIFEST`]), as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// What the directory holds.
    pub kind: PinKind,
    /// The pid of the sightline that pinned it.
    pub pid: u32,
    /// That process's start time (`/proc/PID/stat` field 22, clock ticks after boot), which
    /// tells it from a later process given the same pid.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// The Sightline version that wrote it.
    pub sightline: String,
    /// The script's compile inputs.
    pub script: ScriptInputs,
    /// Every map of the layout, in layout order (a map's index is its position).
    pub maps: Vec<PinnedMap>,
    /// Per program of the layout, its pinned file (`null`: not pinned).
    pub programs: Vec<Option<String>>,
    /// The pinned links (attachments).
    pub links: Vec<String>,
    /// The byte size of each record kind (a record id indexes this list).
    pub records: Vec<u32>,
    /// The aggregations' names, by aggregation id.
    pub aggregations: Vec<String>,
}

/// The manifest kind name of a map kind.
fn kind_name(k: MapKind) -> &'static str {
    match k {
        MapKind::Hash => "hash",
        MapKind::Array => "array",
        MapKind::PercpuHash => "percpu_hash",
        MapKind::PercpuArray => "percpu_array",
        MapKind::RingBuf => "ringbuf",
    }
}

impl Manifest {
    /// The manifest of `pinned`, the objects of `layout` compiled from `script`.
    pub fn new(
        kind: PinKind,
        script: ScriptInputs,
        layout: &Layout,
        pinned: &PinnedObjects,
    ) -> Manifest {
        Manifest {
            format: FORMAT,
            kind,
            pid: std::process::id(),
            start_time: start_time(std::process::id()),
            sightline: env!("CARGO_PKG_VERSION").to_string(),
            script,
            maps: layout
                .maps
                .iter()
                .enumerate()
                .map(|(i, m)| PinnedMap {
                    name: m.name.clone(),
                    kind: kind_name(m.kind).to_string(),
                    key_size: m.key_size,
                    value_size: m.value_size,
                    max_entries: m.max_entries,
                    file: pinned.maps.get(i).cloned().flatten(),
                })
                .collect(),
            programs: pinned.programs.clone(),
            links: pinned.links.clone(),
            records: layout.records.iter().map(|r| r.size).collect(),
            aggregations: layout.aggs.iter().map(|a| a.name.clone()).collect(),
        }
    }

    /// The pinned objects the manifest names (for [`crate::session::Session::open_pinned`]).
    pub fn pinned(&self) -> PinnedObjects {
        PinnedObjects {
            maps: self.maps.iter().map(|m| m.file.clone()).collect(),
            programs: self.programs.clone(),
            links: self.links.clone(),
        }
    }

    /// Checks that `layout` (the script compiled again) has the maps, records and aggregations
    /// this manifest describes; `Err` says the first difference (the kernel or Sightline changed
    /// since the objects were pinned, and their bytes would be misread).
    pub fn check_layout(&self, layout: &Layout) -> Result<(), String> {
        let now = Manifest::new(self.kind, self.script.clone(), layout, &self.pinned());
        if now.maps.len() != self.maps.len() {
            return Err(format!(
                "the script now compiles to {} maps, the pinned program had {}",
                now.maps.len(),
                self.maps.len()
            ));
        }
        for (i, (a, b)) in self.maps.iter().zip(&now.maps).enumerate() {
            if a != b {
                return Err(format!(
                    "map {i} was {} ({} {}/{}/{}) and now compiles to {} ({} {}/{}/{})",
                    a.name,
                    a.kind,
                    a.key_size,
                    a.value_size,
                    a.max_entries,
                    b.name,
                    b.kind,
                    b.key_size,
                    b.value_size,
                    b.max_entries
                ));
            }
        }
        if now.records != self.records {
            return Err("the record layouts differ from the pinned program's".into());
        }
        if now.aggregations != self.aggregations {
            return Err("the aggregations differ from the pinned program's".into());
        }
        Ok(())
    }

    /// Reads `dir`'s manifest.
    ///
    /// # Errors
    /// [`RuntimeError::Pin`] when it cannot be read or parsed, or is of another format.
    pub fn read(dir: &Path) -> Result<Manifest, RuntimeError> {
        let path = dir.join(MANIFEST);
        let text = read_text_map(&path)?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| RuntimeError::Pin {
            what: format!("parsing {}", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        if m.format != FORMAT {
            return Err(RuntimeError::Pin {
                what: format!("{}: manifest format {}", path.display(), m.format),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("this sightline reads format {FORMAT}"),
                ),
            });
        }
        Ok(m)
    }

    /// Writes the manifest into `dir`.
    ///
    /// # Errors
    /// [`RuntimeError::Pin`] naming the file.
    pub fn write(&self, dir: &Path) -> Result<(), RuntimeError> {
        let text = serde_json::to_string_pretty(self).expect("manifests serialize") + "\n";
        write_text_map(&dir.join(MANIFEST), &text)
    }

    /// The manifest as pretty-printed JSON (what [`Manifest::write`] stores).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifests serialize") + "\n"
    }
}

/// `path` as a C string for the `bpf(2)` object calls.
fn c_path(path: &Path, call: &'static str) -> Result<std::ffi::CString, RuntimeError> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        RuntimeError::Sys(probe_sys::SyscallError::new(
            call,
            std::io::ErrorKind::InvalidInput.into(),
        ))
    })
}

/// Stores `text` in a new `ARRAY` map of [`MANIFEST_CHUNK`]-byte values pinned at `path`.
fn write_text_map(path: &Path, text: &str) -> Result<(), RuntimeError> {
    use probe_sys::bpf;
    let bytes = text.as_bytes();
    let n = bytes.len().div_ceil(MANIFEST_CHUNK).max(1);
    let map = bpf::map_create(
        bpf::map_type::ARRAY,
        4,
        MANIFEST_CHUNK as u32,
        n as u32,
        0,
        "sl_layout",
    )?;
    let mut chunk = vec![0u8; MANIFEST_CHUNK];
    for i in 0..n {
        chunk.fill(0);
        let part = &bytes
            [(i * MANIFEST_CHUNK).min(bytes.len())..((i + 1) * MANIFEST_CHUNK).min(bytes.len())];
        chunk[..part.len()].copy_from_slice(part);
        bpf::map_update(&map, &(i as u32).to_le_bytes(), &chunk)?;
    }
    bpf::obj_pin(
        std::os::fd::AsRawFd::as_raw_fd(&map),
        &c_path(path, "bpf(BPF_OBJ_PIN)")?,
    )?;
    Ok(())
}

/// The text [`write_text_map`] stored in the map pinned at `path`.
fn read_text_map(path: &Path) -> Result<String, RuntimeError> {
    use probe_sys::bpf;
    let map = bpf::obj_get(&c_path(path, "bpf(BPF_OBJ_GET)")?).map_err(|e| RuntimeError::Pin {
        what: format!("reading {}", path.display()),
        source: e.io_error,
    })?;
    let mut text = Vec::new();
    let mut chunk = vec![0u8; MANIFEST_CHUNK];
    let mut i = 0u32;
    while bpf::map_lookup(&map, &i.to_le_bytes(), &mut chunk)? {
        let end = chunk.iter().position(|&b| b == 0).unwrap_or(chunk.len());
        text.extend_from_slice(&chunk[..end]);
        if end < chunk.len() {
            break;
        }
        i += 1;
    }
    String::from_utf8(text).map_err(|e| RuntimeError::Pin {
        what: format!("reading {}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// The anonymous enabling's directory, [`ROOT`]/[`ANON`].
pub fn anon_dir() -> PathBuf {
    Path::new(ROOT).join(ANON)
}

/// The postmortem directory of the run of process `pid`, [`ROOT`]/`run-PID`.
pub fn run_dir(pid: u32) -> PathBuf {
    Path::new(ROOT).join(format!("{RUN_PREFIX}{pid}"))
}

/// Creates `dir` (a new directory under [`ROOT`]), mounting bpffs at `/sys/fs/bpf` first when
/// nothing is mounted there.
///
/// # Errors
/// [`RuntimeError::Sys`] naming `mount(bpf)`; [`RuntimeError::Pin`] when the directory exists
/// already or cannot be created.
pub fn create_dir(dir: &Path) -> Result<(), RuntimeError> {
    probe_sys::os::ensure_bpffs(probe_sys::os::BPFFS)?;
    let _ = std::fs::create_dir(ROOT);
    std::fs::create_dir(dir).map_err(|source| RuntimeError::Pin {
        what: format!("creating {}", dir.display()),
        source,
    })
}

/// Removes a pinned directory: every file (an unpinned link detaches its probe once no
/// descriptor holds it; an unpinned map or program is freed) and the directory itself.
///
/// # Errors
/// [`RuntimeError::Pin`] naming the file that could not be removed.
pub fn remove_dir(dir: &Path) -> Result<(), RuntimeError> {
    let err = |what: String| move |source| RuntimeError::Pin { what, source };
    let entries = std::fs::read_dir(dir).map_err(err(format!("reading {}", dir.display())))?;
    for e in entries.flatten() {
        let p = e.path();
        std::fs::remove_file(&p).map_err(err(format!("removing {}", p.display())))?;
    }
    std::fs::remove_dir(dir).map_err(err(format!("removing {}", dir.display())))
}

/// The start time of process `pid` (`/proc/PID/stat` field 22, `starttime`: clock ticks after
/// boot; proc(5)); `None` when it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces: field 3
    // (state) is the first of them.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether the run that pinned `dir` for `pid` is gone: no live process `pid`, or one that
/// started at another time than the manifest says (the pid was reused).
fn run_is_dead(pid: u32, dir: &Path) -> bool {
    if !probe_sys::os::process_alive(pid) {
        return true;
    }
    match Manifest::read(dir).ok().and_then(|m| m.start_time) {
        Some(t) => start_time(pid) != Some(t),
        None => false,
    }
}

/// The `run-PID` directories under [`ROOT`] whose process is gone, oldest pid first: the runs
/// that died (`kill -9`) without removing their buffers. A live process that reuses the pid
/// of a dead run is told apart by its start time.
pub fn dead_runs() -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(ROOT) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid: u32 = name.strip_prefix(RUN_PREFIX)?.parse().ok()?;
            run_is_dead(pid, &e.path()).then(|| (pid, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The systemd unit that installs the anonymous enabling at boot: `sightline probe -A` of
/// `args` (the words after `sightline probe`, the script's path absolute), run once before
/// `sysinit.target` without the default dependencies, so the probes are enabled before the
/// other services start (as DTrace's anonymous enabling is read by the kernel at boot).
/// `exe` is the sightline binary.
pub fn boot_unit(exe: &Path, args: &[String]) -> String {
    let quote = |w: &str| {
        if !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-=,:+@".contains(&b))
        {
            w.to_string()
        } else {
            format!("\"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))
        }
    };
    let mut cmd = vec![quote(&exe.to_string_lossy()), "probe".into(), "-A".into()];
    cmd.extend(args.iter().map(|a| quote(a)));
    // The binary and the scripts must be mounted before the unit runs.
    let mut paths = vec![quote(&exe.to_string_lossy())];
    paths.extend(
        args.windows(2)
            .filter(|w| w[0] == "-s")
            .map(|w| quote(&w[1])),
    );
    format!(
        "# Written by `sightline probe -A --boot-unit`: installs Sightline's anonymous enabling at\n\
         # boot; claim its records with `sightline probe -a` (docs/probe-pinning.md).\n\
         [Unit]\n\
         Description=Sightline anonymous tracing (sightline probe -A)\n\
         DefaultDependencies=no\n\
         Before=sysinit.target\n\
         After=sys-fs-bpf.mount sys-kernel-tracing.mount\n\
         RequiresMountsFor={}\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         ExecStart={}\n\
         \n\
         [Install]\n\
         WantedBy=sysinit.target\n",
        paths.join(" "),
        cmd.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(src: &str) -> Layout {
        let mut m = probe_syntax::SourceMap::new();
        m.add("t.d", src.to_string());
        let program = crate::compile::parse(&m).unwrap();
        crate::compile::compile(
            &program,
            &crate::catalog::kernel(),
            &crate::compile::CompileOptions {
                options: vec![("bufpolicy".into(), Some("ring".into()))],
                ..Default::default()
            },
        )
        .unwrap()
        .layout
    }

    #[test]
    fn a_manifest_round_trips_and_checks_its_layout() {
        let l = layout("BEGIN { @n = count(); @s[1] = sum(2); trace(1); }");
        let pinned = PinnedObjects {
            maps: (0..l.maps.len())
                .map(|i| Some(format!("map-{i}")))
                .collect(),
            programs: vec![Some("prog-0".into())],
            links: vec![],
        };
        let script = ScriptInputs {
            sources: vec![Source {
                name: "t.d".into(),
                text: "x".into(),
            }],
            macro_args: vec!["7".into()],
            ..Default::default()
        };
        let m = Manifest::new(PinKind::Anonymous, script, &l, &pinned);
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains(r#""kind":"anonymous""#), "{text}");
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.pinned(), pinned);
        assert_eq!(back.aggregations, vec!["n".to_string(), "s".to_string()]);
        assert!(back.check_layout(&l).is_ok());
        // Another program: one more aggregation shape, another map.
        let other = layout("BEGIN { @n = count(); @s[1] = sum(2); @t[\"a\"] = max(1); trace(1); }");
        let why = back.check_layout(&other).unwrap_err();
        assert!(why.contains("maps") || why.contains("map "), "{why}");
    }

    #[test]
    fn this_process_has_a_start_time_and_a_dead_pid_none() {
        let t = start_time(std::process::id()).expect("our own stat");
        assert!(t > 0);
        assert_eq!(
            start_time(std::process::id()),
            Some(t),
            "it does not change"
        );
        // pid_max is at most 2^22: this pid cannot exist.
        assert_eq!(start_time(1 << 23), None);
    }

    #[test]
    fn the_boot_unit_runs_before_sysinit_without_default_dependencies() {
        let u = boot_unit(
            Path::new("/usr/local/bin/sightline"),
            &["-s".into(), "/etc/sightline/anon.d".into(), "a b".into()],
        );
        assert!(u.contains("\nDefaultDependencies=no\n"), "{u}");
        assert!(u.contains("\nBefore=sysinit.target\n"), "{u}");
        assert!(
            u.contains(
                "\nExecStart=/usr/local/bin/sightline probe -A -s /etc/sightline/anon.d \"a b\"\n"
            ),
            "{u}"
        );
        assert!(u.contains("\nWantedBy=sysinit.target\n"), "{u}");
        assert!(
            u.contains("\nRequiresMountsFor=/usr/local/bin/sightline /etc/sightline/anon.d\n"),
            "{u}"
        );
    }
}
