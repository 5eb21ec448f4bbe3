//! The files a command *will* map, before it runs: its executable, its dynamic loader and the
//! closure of its `DT_NEEDED` libraries, found the way `ld.so(8)` finds them.
//!
//! `sightline probe -c CMD` attaches before CMD executes its first instruction, so that no early
//! call is missed. At that point the process has not mapped its libraries, so `/proc/PID/maps`
//! cannot resolve `pid$target:libc.so.6:malloc:entry`. Uprobes are placed on files, not on
//! mappings (the kernel inserts the breakpoint when the file is mapped later, `uprobe_mmap` in
//! `kernel/events/uprobes.c`), so it is enough to know which file `libc.so.6` will be.
//!
//! Search order per ld.so(8): `DT_RPATH` of the object (when it has no `DT_RUNPATH`),
//! `LD_LIBRARY_PATH`, `DT_RUNPATH`, the directories of `/etc/ld.so.conf` (with its `include`
//! lines; used instead of parsing the binary `/etc/ld.so.cache` it is built from), then `/lib` and
//! `/usr/lib` (with the x86-64 multiarch directories first). `$ORIGIN` is expanded. Libraries the
//! command loads later with `dlopen(3)` are not known here.

use std::path::{Path, PathBuf};

use crate::elf::ElfFile;

/// Library directories from `/etc/ld.so.conf` and the files it includes, in order.
pub fn ld_so_conf_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    read_conf(Path::new("/etc/ld.so.conf"), &mut out, 0);
    out
}

fn read_conf(path: &Path, out: &mut Vec<PathBuf>, depth: u32) {
    if depth > 8 {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(pat) = line.strip_prefix("include").map(str::trim) {
            // Only `dir/*.conf`-style patterns occur in practice.
            let (dir, suffix) = match pat.rsplit_once('/') {
                Some((d, f)) => (PathBuf::from(d), f.trim_start_matches('*').to_string()),
                None => continue,
            };
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_str().is_some_and(|s| s.ends_with(&suffix)))
                .collect();
            files.sort();
            for f in files {
                read_conf(&f, out, depth + 1);
            }
        } else if line.starts_with('/') {
            let p = PathBuf::from(line);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
}

/// The default directories after the configured ones.
const DEFAULT_DIRS: [&str; 4] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib",
    "/usr/lib",
];

/// Finds the file for library `name` needed by `by` (see the module docs for the order).
fn find_library(name: &str, by: &ElfFile, conf: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let origin = by
        .path()
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let expand =
        |d: &str| PathBuf::from(d.replace("$ORIGIN", &origin).replace("${ORIGIN}", &origin));
    let dynamic = by.dynamic();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if dynamic.runpath.is_empty() {
        dirs.extend(dynamic.rpath.iter().map(|d| expand(d)));
    }
    if let Ok(lp) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(lp.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    dirs.extend(dynamic.runpath.iter().map(|d| expand(d)));
    dirs.extend(conf.iter().cloned());
    dirs.extend(DEFAULT_DIRS.iter().map(PathBuf::from));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The executable, its `PT_INTERP` loader and every library in the `DT_NEEDED` closure, in load
/// order (breadth first, as ld.so loads them), each once. Unresolvable names are skipped.
pub fn load_closure(exe: &Path) -> Vec<PathBuf> {
    let conf = ld_so_conf_dirs();
    let mut out: Vec<PathBuf> = vec![exe.to_path_buf()];
    let mut queue: Vec<PathBuf> = vec![exe.to_path_buf()];
    if let Ok(e) = ElfFile::open(exe)
        && let Some(interp) = &e.dynamic().interp
    {
        out.push(PathBuf::from(interp));
    }
    let mut i = 0;
    while i < queue.len() && out.len() < 512 {
        let Ok(elf) = ElfFile::open(&queue[i]) else {
            i += 1;
            continue;
        };
        for name in &elf.dynamic().needed {
            if let Some(p) = find_library(name, &elf, &conf) {
                // Compare by canonical path so /lib and /usr/lib (merged /usr) count once.
                let canon = std::fs::canonicalize(&p).unwrap_or(p.clone());
                if !out
                    .iter()
                    .any(|o| std::fs::canonicalize(o).unwrap_or(o.clone()) == canon)
                {
                    out.push(p.clone());
                    queue.push(p);
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_closure_has_libc_and_loader() {
        let files = load_closure(Path::new("/usr/bin/python3.11"));
        assert_eq!(files[0], PathBuf::from("/usr/bin/python3.11"));
        assert_eq!(files[1], PathBuf::from("/lib64/ld-linux-x86-64.so.2"));
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in ["libm.so.6", "libz.so.1", "libexpat.so.1", "libc.so.6"] {
            assert_eq!(
                names.iter().filter(|x| *x == n).count(),
                1,
                "{n} in {names:?}"
            );
        }
        // The libc found is the one the system uses.
        let libc = files.iter().find(|p| p.ends_with("libc.so.6")).unwrap();
        assert_eq!(
            std::fs::canonicalize(libc).unwrap(),
            std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libc.so.6").unwrap()
        );
        assert!(ld_so_conf_dirs().contains(&PathBuf::from("/usr/lib/x86_64-linux-gnu")));
    }
}
