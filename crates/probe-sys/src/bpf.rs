//! `bpf(2)` commands: maps, program loading, test runs, raw tracepoints and links.
//!
//! Each wrapper fills a [`BpfAttr`] at the offsets of `union bpf_attr` (include/uapi/linux/bpf.h)
//! for its command and calls the chokepoint (`crate::syscall`); every failure is a
//! [`SyscallError`](crate::SyscallError) naming the command.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::{BpfAttr, BpfCmd, SysResult, Syscall, owned_fd, syscall};

/// Map types (`enum bpf_map_type`).
pub mod map_type {
    /// `BPF_MAP_TYPE_HASH`
    pub const HASH: u32 = 1;
    /// `BPF_MAP_TYPE_ARRAY`
    pub const ARRAY: u32 = 2;
    /// `BPF_MAP_TYPE_PERCPU_HASH`
    pub const PERCPU_HASH: u32 = 5;
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`
    pub const PERCPU_ARRAY: u32 = 6;
    /// `BPF_MAP_TYPE_RINGBUF` (Linux 5.8)
    pub const RINGBUF: u32 = 27;
}

/// Program types (`enum bpf_prog_type`).
pub mod prog_type {
    /// `BPF_PROG_TYPE_KPROBE`: context is `struct pt_regs` (kprobes and uprobes).
    pub const KPROBE: u32 = 2;
    /// `BPF_PROG_TYPE_TRACEPOINT`: context is the tracefs record (format file layout).
    pub const TRACEPOINT: u32 = 5;
    /// `BPF_PROG_TYPE_PERF_EVENT`: context is `struct bpf_perf_event_data`.
    pub const PERF_EVENT: u32 = 7;
    /// `BPF_PROG_TYPE_RAW_TRACEPOINT`: context is the tracepoint's `u64` arguments.
    pub const RAW_TRACEPOINT: u32 = 17;
    /// `BPF_PROG_TYPE_TRACING`: BPF trampolines (fentry/fexit) on kernel functions, typed from
    /// BTF (Linux 5.5).
    pub const TRACING: u32 = 26;
}

/// Attach types (`enum bpf_attach_type`).
pub mod attach_type {
    /// No expected attach type (0).
    pub const NONE: u32 = 0;
    /// `BPF_TRACE_FENTRY`: a tracing program run at a kernel function's entry (Linux 5.5).
    pub const TRACE_FENTRY: u32 = 24;
    /// `BPF_PERF_EVENT`: a BPF link to a perf event (Linux 5.15).
    pub const PERF_EVENT: u32 = 41;
    /// `BPF_TRACE_UPROBE_MULTI`: one link for many uprobes of a file (Linux 6.6).
    pub const TRACE_UPROBE_MULTI: u32 = 48;
}

/// The BPF object name field: up to 15 of `name`'s alphanumeric and `_` bytes, NUL-padded (the
/// kernel refuses other characters, `bpf_obj_name_cpy`).
fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in name
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .take(15)
        .enumerate()
    {
        out[i] = b;
    }
    out
}

fn bpf(cmd: BpfCmd, attr: &mut BpfAttr) -> SysResult<i64> {
    syscall(Syscall::Bpf { cmd, attr })
}

/// `ENOENT` as a `false` result (absent key, end of map), other errors as errors.
fn found(r: SysResult<i64>) -> SysResult<bool> {
    match r {
        Ok(_) => Ok(true),
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `bpf(BPF_MAP_CREATE)`: a map of `map_type` with the given key/value sizes (bytes), capacity and
/// `map_flags` (e.g. `BPF_F_NO_PREALLOC` = 1 for hash maps). For a ring buffer `key_size =
/// value_size = 0` and `max_entries` is the data size in bytes (a power-of-two multiple of the
/// page size).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_CREATE)` (EPERM without CAP_BPF, EINVAL on bad sizes).
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: &str,
) -> SysResult<OwnedFd> {
    let mut attr = BpfAttr::default();
    attr.set_u32(0, map_type)
        .set_u32(4, key_size)
        .set_u32(8, value_size)
        .set_u32(12, max_entries)
        .set_u32(16, map_flags);
    attr.0[28..44].copy_from_slice(&obj_name(name));
    bpf(BpfCmd::MapCreate, &mut attr).map(owned_fd)
}

/// The element-command block: `map_fd` @0, `key` @8, `value`/`next_key` @16, `flags` @24.
fn elem_attr(map: &OwnedFd, key: u64, value: u64) -> BpfAttr {
    let mut attr = BpfAttr::default();
    attr.set_u32(0, map.as_raw_fd() as u32)
        .set_u64(8, key)
        .set_u64(16, value);
    attr
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` with `BPF_ANY`. `key`/`value` must have the map's sizes (for per-CPU
/// maps, `value` holds one 8-byte-aligned slot per possible CPU).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_UPDATE_ELEM)` (E2BIG when a hash map is full).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> SysResult<()> {
    let mut attr = elem_attr(map, key.as_ptr() as u64, value.as_ptr() as u64);
    bpf(BpfCmd::MapUpdateElem, &mut attr).map(|_| ())
}

/// `bpf(BPF_MAP_LOOKUP_ELEM)`: fills `value` (the map's value size, or one slot per possible CPU
/// for per-CPU maps). Returns `false` when the key is absent (ENOENT).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_LOOKUP_ELEM)`.
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> SysResult<bool> {
    let mut attr = elem_attr(map, key.as_ptr() as u64, value.as_mut_ptr() as u64);
    found(bpf(BpfCmd::MapLookupElem, &mut attr))
}

/// `bpf(BPF_MAP_DELETE_ELEM)`. Returns `false` when the key was absent.
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_DELETE_ELEM)`.
pub fn map_delete(map: &OwnedFd, key: &[u8]) -> SysResult<bool> {
    let mut attr = elem_attr(map, key.as_ptr() as u64, 0);
    found(bpf(BpfCmd::MapDeleteElem, &mut attr))
}

/// `bpf(BPF_MAP_GET_NEXT_KEY)`: writes the key after `key` (or the first key when `key` is
/// `None`) into `next`. Returns `false` at the end of the map.
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_GET_NEXT_KEY)`.
pub fn map_next_key(map: &OwnedFd, key: Option<&[u8]>, next: &mut [u8]) -> SysResult<bool> {
    let mut attr = elem_attr(
        map,
        key.map_or(0, |k| k.as_ptr() as u64),
        next.as_mut_ptr() as u64,
    );
    found(bpf(BpfCmd::MapGetNextKey, &mut attr))
}

/// `bpf(BPF_MAP_UPDATE_BATCH)` (Linux 5.6): writes `count` keys and values in one call. `keys`
/// and `values` hold `count` entries of the map's key and value sizes, back to back.
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_MAP_UPDATE_BATCH)`.
pub fn map_update_batch(map: &OwnedFd, keys: &[u8], values: &[u8], count: u32) -> SysResult<()> {
    // `batch`: in_batch @0, out_batch @8, keys @16, values @24, count @32, map_fd @36,
    // elem_flags @40, flags @48.
    let mut attr = BpfAttr::default();
    attr.set_u64(16, keys.as_ptr() as u64)
        .set_u64(24, values.as_ptr() as u64)
        .set_u32(32, count)
        .set_u32(36, map.as_raw_fd() as u32);
    bpf(BpfCmd::MapUpdateBatch, &mut attr).map(|_| ())
}

/// How much of the verifier's log [`prog_load`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerifierLog {
    /// Load without a log; on failure load again with log level 1 to quote the verifier's reason
    /// (the fast path pays nothing for the log).
    #[default]
    OnError,
    /// Log level 2 (every instruction's state) from the start (`-v`).
    Verbose,
}

/// What [`prog_load`] loads.
#[derive(Debug, Clone, Copy)]
pub struct ProgLoad<'a> {
    /// `enum bpf_prog_type` ([`prog_type`]).
    pub prog_type: u32,
    /// `expected_attach_type` ([`attach_type`]; [`attach_type::NONE`] for most programs,
    /// [`attach_type::TRACE_UPROBE_MULTI`] for a program to attach with uprobe_multi links).
    pub expected_attach_type: u32,
    /// The instructions, 8 bytes each as the kernel's `struct bpf_insn` (little-endian).
    pub insns: &'a [[u8; 8]],
    /// The program's name (up to 15 alphanumeric or `_` characters are kept).
    pub name: &'a str,
    /// The verifier log wanted.
    pub log: VerifierLog,
}

/// Size of the verifier-log buffer (bytes); calloc'd, so untouched pages cost nothing.
const LOG_SIZE: usize = 4 << 20;

/// `bpf(BPF_PROG_LOAD)`: loads `p.insns` under the GPL license (the tracing helpers require it).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_PROG_LOAD)`, with [`SyscallError::verifier_log`](crate::SyscallError::verifier_log) holding the
/// verifier's log (EACCES/EINVAL when the verifier rejects the program, EPERM without CAP_BPF).
pub fn prog_load(p: &ProgLoad<'_>) -> SysResult<OwnedFd> {
    let license = c"GPL";
    let attempt = |log: &mut [u8], level: u32| {
        // prog_type @0, insn_cnt @4, insns @8, license @16, log_level @24, log_size @28,
        // log_buf @32, prog_name @48, expected_attach_type @68.
        let mut attr = BpfAttr::default();
        attr.set_u32(0, p.prog_type)
            .set_u32(4, p.insns.len() as u32)
            .set_u64(8, p.insns.as_ptr() as u64)
            .set_u64(16, license.as_ptr() as u64)
            .set_u32(68, p.expected_attach_type);
        if !log.is_empty() {
            attr.set_u32(24, level)
                .set_u32(28, log.len() as u32)
                .set_u64(32, log.as_mut_ptr() as u64);
        }
        attr.0[48..64].copy_from_slice(&obj_name(p.name));
        bpf(BpfCmd::ProgLoad, &mut attr)
    };
    if p.log == VerifierLog::OnError
        && let Ok(fd) = attempt(&mut [], 0)
    {
        return Ok(owned_fd(fd));
    }
    let mut log = vec![0u8; LOG_SIZE];
    let level = if p.log == VerifierLog::Verbose { 2 } else { 1 };
    match attempt(&mut log, level) {
        Ok(fd) => Ok(owned_fd(fd)),
        Err(mut e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            e.verifier_log = Some(String::from_utf8_lossy(&log[..end]).into_owned());
            Err(e)
        }
    }
}

/// `bpf(BPF_RAW_TRACEPOINT_OPEN)`: attaches a raw-tracepoint program to tracepoint `name` (e.g.
/// `sys_enter`). The program stays attached while the returned descriptor is open (Linux 4.17).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_RAW_TRACEPOINT_OPEN)` (ENOENT for an unknown tracepoint).
pub fn raw_tracepoint_open(name: &CStr, prog: &OwnedFd) -> SysResult<OwnedFd> {
    // raw_tracepoint: name @0, prog_fd @8.
    let mut attr = BpfAttr::default();
    attr.set_u64(0, name.as_ptr() as u64)
        .set_u32(8, prog.as_raw_fd() as u32);
    bpf(BpfCmd::RawTracepointOpen, &mut attr).map(owned_fd)
}

/// `bpf(BPF_OBJ_PIN)` (Linux 4.4): gives the map, program or link `fd` the path `path` in a bpf
/// file system (bpffs, usually mounted at `/sys/fs/bpf`). The pinned file holds a reference:
/// the object (and, for a link, its attachment) outlives every descriptor until the file is
/// removed (`unlink(2)`).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_OBJ_PIN)` (EEXIST when the path exists,
/// EPERM when its directory is not on bpffs, EINVAL when `fd` is not a BPF object).
pub fn obj_pin(fd: RawFd, path: &CStr) -> SysResult<()> {
    // obj: pathname @0, bpf_fd @8, file_flags @12.
    let mut attr = BpfAttr::default();
    attr.set_u64(0, path.as_ptr() as u64).set_u32(8, fd as u32);
    bpf(BpfCmd::ObjPin, &mut attr).map(|_| ())
}

/// `bpf(BPF_OBJ_GET)` (Linux 4.4): a new descriptor of the object pinned at `path` (read-write).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_OBJ_GET)` (ENOENT when nothing is pinned
/// there).
pub fn obj_get(path: &CStr) -> SysResult<OwnedFd> {
    // obj: pathname @0, bpf_fd @8 (0), file_flags @12 (0: read-write).
    let mut attr = BpfAttr::default();
    attr.set_u64(0, path.as_ptr() as u64);
    bpf(BpfCmd::ObjGet, &mut attr).map(owned_fd)
}

/// The kernel's id of the map, program or link `fd` (`bpf(BPF_OBJ_GET_INFO_BY_FD)`: the
/// `id` word, at offset 4 of `bpf_map_info`, `bpf_prog_info` and `bpf_link_info` alike).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_OBJ_GET_INFO_BY_FD)`.
pub fn obj_id(fd: RawFd) -> SysResult<u32> {
    // info: bpf_fd @0, info_len @4, info @8.
    let mut info = [0u8; 8];
    let mut attr = BpfAttr::default();
    attr.set_u32(0, fd as u32)
        .set_u32(4, info.len() as u32)
        .set_u64(8, info.as_mut_ptr() as u64);
    bpf(BpfCmd::ObjGetInfoByFd, &mut attr)?;
    Ok(u32::from_le_bytes(info[4..8].try_into().expect("4 bytes")))
}

/// Whether a program (`link == false`) or link (`true`) of kernel id `id` exists
/// (`bpf(BPF_PROG_GET_FD_BY_ID)`, `bpf(BPF_LINK_GET_FD_BY_ID)`; ENOENT: it does not).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming the call (EPERM without CAP_SYS_ADMIN).
pub fn object_exists(id: u32, link: bool) -> SysResult<bool> {
    // prog_id / link_id @0, next_id @4, open_flags @8.
    let mut attr = BpfAttr::default();
    attr.set_u32(0, id);
    let cmd = if link {
        BpfCmd::LinkGetFdById
    } else {
        BpfCmd::ProgGetFdById
    };
    match bpf(cmd, &mut attr) {
        Ok(fd) => {
            drop(owned_fd(fd));
            Ok(true)
        }
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `bpf(BPF_PROG_TEST_RUN)` of a raw-tracepoint program with `ctx` as its `u64` arguments, on the
/// calling thread (so `pid`, `tid`, `execname` are ours). Returns the program's return value.
/// Raw-tracepoint test runs exist since Linux 5.10 (`bpf_prog_test_run_raw_tp`).
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_PROG_TEST_RUN)`.
pub fn prog_test_run_raw_tp(prog: &OwnedFd, ctx: &[u64]) -> SysResult<u32> {
    // test: prog_fd @0, retval @4, ctx_size_in @40, ctx_in @48.
    let mut attr = BpfAttr::default();
    attr.set_u32(0, prog.as_raw_fd() as u32)
        .set_u32(40, std::mem::size_of_val(ctx) as u32)
        .set_u64(
            48,
            if ctx.is_empty() {
                0
            } else {
                ctx.as_ptr() as u64
            },
        );
    bpf(BpfCmd::ProgTestRun, &mut attr)?;
    Ok(attr.u32(4))
}

/// `bpf(BPF_LINK_CREATE)` with attach type `BPF_PERF_EVENT` (Linux 5.15): attaches `prog` to the
/// perf event `event` with `cookie` (read by `bpf_get_attach_cookie()`). Closing the link detaches.
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_LINK_CREATE)`.
pub fn link_create_perf_event(prog: RawFd, event: RawFd, cookie: u64) -> SysResult<OwnedFd> {
    // link_create: prog_fd @0, target_fd @4, attach_type @8, flags @12, perf_event.bpf_cookie @16.
    let mut attr = BpfAttr::default();
    attr.set_u32(0, prog as u32)
        .set_u32(4, event as u32)
        .set_u32(8, attach_type::PERF_EVENT)
        .set_u64(16, cookie);
    bpf(BpfCmd::LinkCreate, &mut attr).map(owned_fd)
}

/// The sites of a [`link_create_uprobe_multi`] call: parallel arrays, one entry per site.
#[derive(Debug, Clone, Copy)]
pub struct UprobeMulti<'a> {
    /// The file.
    pub path: &'a CStr,
    /// File offsets of the probed instructions.
    pub offsets: &'a [u64],
    /// File offsets of the u16 reference counters (USDT semaphores), 0 for none; empty when no
    /// site has one. Same length as `offsets` otherwise.
    pub ref_ctr_offsets: &'a [u64],
    /// Per-site cookies (`bpf_get_attach_cookie()`), same length as `offsets`.
    pub cookies: &'a [u64],
    /// Only this process (all its threads); `None`: every process.
    pub pid: Option<u32>,
    /// Return probes (`BPF_F_UPROBE_MULTI_RETURN`).
    pub retprobe: bool,
}

/// `bpf(BPF_LINK_CREATE)` with attach type `BPF_TRACE_UPROBE_MULTI` (Linux 6.6;
/// `kernel/trace/bpf_trace.c` `bpf_uprobe_multi_link_attach`): one link attaching `prog` (loaded
/// with that expected attach type) to every site. Closing the link detaches all of them.
///
/// # Errors
/// [`SyscallError`](crate::SyscallError) naming `bpf(BPF_LINK_CREATE)` (EINVAL on a bad offset or an old kernel, ESRCH
/// for a dead pid, EBADF when `prog` is not a BPF program or the path not a regular file).
pub fn link_create_uprobe_multi(prog: RawFd, s: &UprobeMulti<'_>) -> SysResult<OwnedFd> {
    const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;
    // link_create: prog_fd @0, attach_type @8; uprobe_multi: path @16, offsets @24,
    // ref_ctr_offsets @32, cookies @40, cnt @48, flags @52, pid @56.
    let mut attr = BpfAttr::default();
    attr.set_u32(0, prog as u32)
        .set_u32(8, attach_type::TRACE_UPROBE_MULTI)
        .set_u64(16, s.path.as_ptr() as u64)
        .set_u64(24, s.offsets.as_ptr() as u64)
        .set_u64(
            32,
            if s.ref_ctr_offsets.is_empty() {
                0
            } else {
                s.ref_ctr_offsets.as_ptr() as u64
            },
        )
        .set_u64(40, s.cookies.as_ptr() as u64)
        .set_u32(48, s.offsets.len() as u32)
        .set_u32(
            52,
            if s.retprobe {
                BPF_F_UPROBE_MULTI_RETURN
            } else {
                0
            },
        )
        .set_u32(56, s.pid.unwrap_or(0));
    bpf(BpfCmd::LinkCreate, &mut attr).map(owned_fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::override_syscall;
    use crate::tests::chain;
    use std::io;

    /// A descriptor the hook may hand out as a "created" object (the wrapper owns and closes it).
    fn some_fd() -> i64 {
        let f = std::fs::File::open("/dev/null").unwrap();
        std::os::fd::IntoRawFd::into_raw_fd(f) as i64
    }

    #[test]
    fn a_refused_map_create_names_bpf_map_create() {
        let _g = override_syscall(|call| match call {
            Syscall::Bpf {
                cmd: BpfCmd::MapCreate,
                attr,
            } => {
                // The block the wrapper built: a hash map of 4-byte keys, 8-byte values.
                assert_eq!(
                    (attr.u32(0), attr.u32(4), attr.u32(8), attr.u32(12)),
                    (map_type::HASH, 4, 8, 16)
                );
                assert_eq!(&attr.0[28..33], b"my_m\0", "the name, `-` dropped");
                Err(io::Error::from_raw_os_error(libc::EPERM))
            }
            other => panic!("unexpected call {}", other.call()),
        });
        let e = map_create(map_type::HASH, 4, 8, 16, 0, "my-_m").unwrap_err();
        assert_eq!(e.call, "bpf(BPF_MAP_CREATE)");
        assert!(e.is_permission());
        assert_eq!(
            chain(&e),
            "`bpf(BPF_MAP_CREATE)` failed: Operation not permitted (os error 1)"
        );
        assert!(e.verifier_log.is_none());
    }

    #[test]
    fn a_rejected_program_surfaces_the_verifier_log() {
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let c2 = calls.clone();
        let _g = override_syscall(move |call| {
            let Syscall::Bpf {
                cmd: BpfCmd::ProgLoad,
                attr,
            } = call
            else {
                panic!("unexpected call {}", call.call());
            };
            let (level, size, buf) = (attr.u32(24), attr.u32(28), attr.u64(32));
            c2.borrow_mut().push((level, size));
            if size > 0 {
                let msg = b"0: (95) exit\nR0 !read_ok\n\0";
                assert!(msg.len() <= size as usize);
                // SAFETY: `buf` is the wrapper's live log buffer of `size` bytes (the kernel's
                // contract for `log_buf`), and `msg` fits in it.
                unsafe {
                    std::ptr::copy_nonoverlapping(msg.as_ptr(), buf as *mut u8, msg.len());
                }
            }
            Err(io::Error::from_raw_os_error(libc::EACCES))
        });
        let insns = [[0x95, 0, 0, 0, 0, 0, 0, 0]];
        let e = prog_load(&ProgLoad {
            prog_type: prog_type::RAW_TRACEPOINT,
            expected_attach_type: attach_type::NONE,
            insns: &insns,
            name: "t",
            log: VerifierLog::OnError,
        })
        .unwrap_err();
        assert_eq!(e.call, "bpf(BPF_PROG_LOAD)");
        assert_eq!(
            e.verifier_log.as_deref(),
            Some("0: (95) exit\nR0 !read_ok\n")
        );
        // First without a log, then again with a level-1 log.
        assert_eq!(*calls.borrow(), vec![(0, 0), (1, LOG_SIZE as u32)]);
    }

    #[test]
    fn a_verbose_load_asks_for_a_level_2_log_at_once_and_returns_the_fd() {
        let levels = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let l2 = levels.clone();
        let _g = override_syscall(move |call| {
            if let Syscall::Bpf { attr, .. } = call {
                l2.borrow_mut().push(attr.u32(24));
            }
            Ok(some_fd())
        });
        let insns = [[0x95, 0, 0, 0, 0, 0, 0, 0]];
        let fd = prog_load(&ProgLoad {
            prog_type: prog_type::KPROBE,
            expected_attach_type: attach_type::TRACE_UPROBE_MULTI,
            insns: &insns,
            name: "v",
            log: VerifierLog::Verbose,
        });
        assert!(fd.is_ok());
        assert_eq!(*levels.borrow(), vec![2]);
    }

    #[test]
    fn an_absent_key_is_false_not_an_error() {
        let _g = override_syscall(|call| match call {
            Syscall::Bpf {
                cmd: BpfCmd::MapLookupElem,
                ..
            } => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Syscall::Bpf {
                cmd: BpfCmd::MapDeleteElem,
                ..
            } => Err(io::Error::from_raw_os_error(libc::EBADF)),
            _ => Ok(some_fd()),
        });
        let map = map_create(map_type::ARRAY, 4, 8, 1, 0, "a").unwrap();
        let mut v = [0u8; 8];
        assert!(!map_lookup(&map, &0u32.to_le_bytes(), &mut v).unwrap());
        let e = map_delete(&map, &0u32.to_le_bytes()).unwrap_err();
        assert_eq!(e.call, "bpf(BPF_MAP_DELETE_ELEM)");
    }

    #[test]
    fn pin_and_get_pass_the_path_and_the_descriptor() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let s2 = seen.clone();
        let _g = override_syscall(move |call| match call {
            Syscall::Bpf { cmd, attr } if matches!(cmd, BpfCmd::ObjPin | BpfCmd::ObjGet) => {
                // SAFETY: the wrapper's pathname points at the caller's live NUL-terminated
                // `CStr` for the whole call.
                let path = unsafe { CStr::from_ptr(attr.u64(0) as *const libc::c_char) };
                s2.borrow_mut()
                    .push((*cmd, path.to_str().unwrap().to_string(), attr.u32(8)));
                if *cmd == BpfCmd::ObjGet {
                    Ok(some_fd())
                } else {
                    Err(io::Error::from_raw_os_error(libc::EEXIST))
                }
            }
            other => panic!("unexpected call {}", other.call()),
        });
        let e = obj_pin(7, c"/sys/fs/bpf/x/map-0").unwrap_err();
        assert_eq!(e.call, "bpf(BPF_OBJ_PIN)");
        assert_eq!(e.errno(), Some(libc::EEXIST));
        assert!(obj_get(c"/sys/fs/bpf/x/map-1").is_ok());
        assert_eq!(
            *seen.borrow(),
            vec![
                (BpfCmd::ObjPin, "/sys/fs/bpf/x/map-0".to_string(), 7),
                (BpfCmd::ObjGet, "/sys/fs/bpf/x/map-1".to_string(), 0)
            ]
        );
    }

    #[test]
    fn a_test_run_returns_the_retval_the_kernel_wrote() {
        let _g = override_syscall(|call| match call {
            Syscall::Bpf {
                cmd: BpfCmd::ProgTestRun,
                attr,
            } => {
                assert_eq!(attr.u32(40), 16, "two u64 arguments");
                attr.set_u32(4, 7);
                Ok(0)
            }
            _ => Ok(some_fd()),
        });
        let map = map_create(map_type::ARRAY, 4, 8, 1, 0, "a").unwrap();
        assert_eq!(prog_test_run_raw_tp(&map, &[1, 2]).unwrap(), 7);
    }
}
