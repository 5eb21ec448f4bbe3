//! Syscall-buffering policy shared by recorder and replayer: when to patch a site, how to drain and
//! fill the buffer (the mechanism is `replay_ptrace::syscallbuf`, the format `docs/recording-format.md`).
//!
//! The recorder patches a libc `syscall` site at the seccomp stop of its first bufferable call and
//! records that ([`crate::format::Event::SyscallbufPatch`]); the replayer patches the same site at
//! the same event. From then on the handler in the tracee records (or, on replay, serves) those calls
//! without a stop; the tracer drains the buffer into a [`crate::format::Event::Buffered`] event at
//! every stop where it records something else, so buffered calls keep their place.
//!
//! Buffered calls have no rendezvous points: they only read file-system metadata, clocks and the
//! process's own ids, which no other recorded process can observe; their results are injected on
//! replay like any emulated call's.

use replay_ptrace::syscallbuf::{self as sb, Buffered, Header};
use replay_ptrace::{RemotePtr, Stopped};

use crate::Error;

/// Set `SIGHTLINE_SYSCALLBUF=0` to record without buffering (every call trapped).
pub fn enabled() -> bool {
    std::env::var_os("SIGHTLINE_SYSCALLBUF").is_none_or(|v| v != "0")
}

fn header_ptr() -> RemotePtr<u8> {
    RemotePtr::new(sb::BASE + sb::BUF_OFF)
}

/// The tracee's buffer header, or `None` when it has no buffer.
pub fn header(t: &Stopped) -> Option<Header> {
    let h = t.read_bytes(header_ptr(), sb::HEADER_LEN as usize).ok()?;
    Header::parse(&h)
}

/// Record: takes the buffered calls appended since the last drain (empty when it has none).
///
/// Safe at any stop, even one that interrupted the handler between reserving a record and
/// committing it (an asynchronous signal's delivery stop, often right after the handler's own
/// untraced `syscall`): it never moves the handler's append position (`+8`), which the handler is
/// about to advance from the value it read; it only advances the drained mark (`+16`, which the
/// handler does not use in record mode). [`drain_and_reset`] empties the buffer where that is safe.
///
/// Errors: the buffer cannot be read or updated, or holds a corrupt record.
pub fn drain(t: &Stopped) -> Result<Vec<Buffered>, Error> {
    take(t, false)
}

/// Record, at a seccomp stop: like [`drain`], then empties the buffer (append position and drained
/// mark back to 0). Only safe where the handler is not between reserving and committing a record:
/// at a seccomp stop the tracee is entering a trapped call, either from an unpatched site or from
/// the handler's trapped `syscall`, which it reaches with nothing reserved.
///
/// Errors: as [`drain`].
pub fn drain_and_reset(t: &Stopped) -> Result<Vec<Buffered>, Error> {
    take(t, true)
}

fn take(t: &Stopped, reset: bool) -> Result<Vec<Buffered>, Error> {
    let Some(h) = header(t) else {
        return Ok(Vec::new());
    };
    if h.used == 0 {
        return Ok(Vec::new());
    }
    let data = match h.used.checked_sub(h.pos) {
        Some(0) => Vec::new(),
        Some(n) if h.used <= sb::MAP_LEN - sb::BUF_OFF - sb::HEADER_LEN => t.read_bytes(
            RemotePtr::new(sb::BASE + sb::BUF_OFF + sb::HEADER_LEN + h.pos),
            n as usize,
        )?,
        _ => {
            return Err(Error::Format(format!(
                "tid {}: corrupt syscall buffer header (used {}, drained {})",
                t.tid(),
                h.used,
                h.pos
            )));
        }
    };
    if reset {
        t.write_bytes(header_ptr().add(8), &[0u8; 16])?;
    } else if !data.is_empty() {
        t.write_bytes(header_ptr().add(16), &h.used.to_le_bytes())?;
    }
    sb::parse_records(&data).map_err(|at| {
        Error::Format(format!(
            "tid {}: corrupt syscall buffer at byte {}",
            t.tid(),
            h.pos as usize + at
        ))
    })
}

/// Replay: puts `recs` into the tracee's buffer for the handler to serve.
///
/// Errors: the tracee has no buffer, or it cannot be written.
pub fn fill(t: &Stopped, recs: &[Buffered]) -> Result<(), Error> {
    let data = sb::encode_records(recs);
    if data.len() as u64 > sb::MAP_LEN - sb::BUF_OFF - sb::HEADER_LEN {
        return Err(Error::Format(format!(
            "a buffered batch of {} bytes does not fit the buffer",
            data.len()
        )));
    }
    t.write_bytes(
        RemotePtr::new(sb::BASE + sb::BUF_OFF + sb::HEADER_LEN),
        &data,
    )?;
    let mut used_pos = (data.len() as u64).to_le_bytes().to_vec();
    used_pos.extend_from_slice(&0u64.to_le_bytes());
    t.write_bytes(header_ptr().add(8), &used_pos)?;
    Ok(())
}

/// Replay: the bytes of records still unconsumed in the tracee's buffer (0 when none or no buffer).
pub fn unconsumed(t: &Stopped) -> u64 {
    header(t).map_or(0, |h| h.used.saturating_sub(h.pos))
}

/// Turns the handler off in a tracee (pass-through after recording stopped): every call then goes
/// the trapped way and runs for real.
pub fn switch_off(t: &Stopped) {
    if header(t).is_some() {
        let _ = t.write_bytes(header_ptr().add(4), &0u32.to_le_bytes());
    }
}

/// True when `rip` is inside the handler proper, where its view of the buffer may be half-way
/// through a call: anywhere in it but just after its trapped `syscall` (from there it only returns
/// or starts over). Stubs do not count: a tracee there is before or after the handler's work.
pub fn inside_handler(rip: u64) -> bool {
    (sb::BASE..sb::BASE + sb::STUBS_OFF).contains(&rip) && rip != sb::traced_ip()
}

/// True when the call `nr(args)` would map over, unmap, move or change the protection or contents
/// of the region at [`sb::BASE`] (a program that uses that address for itself, `MAP_FIXED`). Such
/// a call is let through only after [`uninstall`], so the program gets the address as natively and
/// no patched site is left jumping into memory that is no longer the handler.
pub fn touches_region(nr: i64, args: &[u64; 6]) -> bool {
    let overlaps =
        |addr: u64, len: u64| addr < sb::BASE + sb::MAP_LEN && addr.saturating_add(len) > sb::BASE;
    let fixed = (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) as u64;
    match nr {
        libc::SYS_mmap => args[3] & fixed != 0 && overlaps(args[0], args[1]),
        libc::SYS_munmap | libc::SYS_mprotect | libc::SYS_pkey_mprotect | libc::SYS_madvise => {
            overlaps(args[0], args[1])
        }
        libc::SYS_mremap => {
            overlaps(args[0], args[1])
                || (args[3] & libc::MREMAP_FIXED as u64 != 0 && overlaps(args[4], args[2]))
        }
        _ => false,
    }
}

/// Undoes buffering in a process: puts back the original bytes of every patched site (found from
/// the stubs, which hold the displaced `cmp` and the jump back), turns the handler off and erases
/// the header's magic, so that nothing refers to the region any more. Call it with nothing left in
/// the buffer (after draining it). Returns how many sites were restored (0 when the process has no
/// region). A stub whose site no longer holds our jump is left alone.
///
/// Errors: the region or a site cannot be read or written.
pub fn uninstall(t: &Stopped) -> Result<usize, Error> {
    let Some(h) = header(t) else { return Ok(0) };
    let end = h.next_stub.clamp(sb::STUBS_OFF, sb::CODE_LEN);
    let stubs = t.read_bytes(
        RemotePtr::new(sb::BASE + sb::STUBS_OFF),
        (end - sb::STUBS_OFF) as usize,
    )?;
    let mut restored = 0;
    for (i, s) in stubs.chunks_exact(sb::STUB_LEN as usize).enumerate() {
        let stub = sb::BASE + sb::STUBS_OFF + i as u64 * sb::STUB_LEN;
        let Some((site, orig, len)) = sb::stub_site(stub, s) else {
            continue;
        };
        let (Ok(now), Some(patch)) = (
            t.read_bytes(RemotePtr::new(site), len),
            sb::site_patch(site, len, stub),
        ) else {
            continue;
        };
        if now == patch {
            t.write_bytes(RemotePtr::new(site), &orig[..len])?;
            restored += 1;
        }
    }
    t.write_bytes(header_ptr(), &[0u8; 8])?;
    Ok(restored)
}

/// True when this seccomp stop is the handler's own trapped call.
pub fn from_handler(rip: u64) -> bool {
    rip == sb::traced_ip()
}

/// The site a bufferable call at this seccomp stop could be patched at (the `syscall` instruction's
/// address and its 8 bytes), or `None` when it cannot.
pub fn candidate(t: &Stopped, nr: i64, rip: u64) -> Option<(u64, [u8; 8])> {
    sb::bufferable(nr)?;
    let site = rip.checked_sub(2)?;
    if (sb::BASE..sb::BASE + sb::MAP_LEN).contains(&site) {
        return None;
    }
    let orig: [u8; 8] = t
        .read_bytes(RemotePtr::new(site), 8)
        .ok()?
        .try_into()
        .ok()?;
    let len = sb::patch_len(&orig)?;
    // In reach of the stubs (checked with the last slot: the region is small).
    sb::site_patch(site, len, sb::BASE + sb::CODE_LEN)?;
    sb::site_patch(site, len, sb::BASE)?;
    Some((site, orig))
}

/// How installing a patch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// Patched; the tracee restarts the call through the handler (resume it with `PTRACE_CONT`).
    Patched,
    /// The region could not be mapped (something else is at [`sb::BASE`]); the call was rewound and
    /// will be made again, unpatched (resume with `PTRACE_CONT`). Buffer nothing more in this process.
    Rewound,
    /// No free stub slot or out of reach; nothing changed, the tracee is still at the seccomp stop of
    /// its call (handle it as usual). Buffer nothing more in this process.
    NotHere,
}

/// At the seccomp stop of the bufferable call at `site` (original bytes `orig`): maps the region if
/// the process has none (an injected `mmap` in place of the call), writes a stub, patches the site
/// and rewinds the tracee so that it makes the call again, now through the handler. `mode` is
/// [`sb::MODE_RECORD`] or [`sb::MODE_REPLAY`].
///
/// Errors: the tracee's registers or memory cannot be accessed.
pub fn install(t: &mut Stopped, site: u64, orig: &[u8; 8], mode: u32) -> Result<Installed, Error> {
    let saved = t.regs()?;
    let nr = saved.orig_rax;
    let len = sb::patch_len(orig)
        .ok_or_else(|| Error::Format(format!("site {site:#x} is not patchable")))?;
    let mut substituted = false;
    let h = match header(t) {
        Some(h) => h,
        None => {
            let got = t.substitute_syscall(
                libc::SYS_mmap,
                [
                    sb::BASE,
                    sb::MAP_LEN,
                    (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u64,
                    (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64,
                    u64::MAX,
                    0,
                ],
            )?;
            substituted = true;
            if got as u64 != sb::BASE {
                rewind(t, saved, site, nr)?;
                return Ok(Installed::Rewound);
            }
            t.write_bytes(RemotePtr::new(sb::BASE), sb::code())?;
            t.write_bytes(header_ptr(), &sb::header(mode))?;
            header(t).ok_or_else(|| {
                Error::Format("syscall buffer header not readable after mapping".into())
            })?
        }
    };
    let stub = sb::BASE + h.next_stub;
    let (Some(stub_code), Some(patch)) = (
        (h.next_stub + sb::STUB_LEN <= sb::CODE_LEN)
            .then(|| sb::site_stub(stub, site, orig, len))
            .flatten(),
        sb::site_patch(site, len, stub),
    ) else {
        if substituted {
            rewind(t, saved, site, nr)?;
            return Ok(Installed::Rewound);
        }
        return Ok(Installed::NotHere);
    };
    t.write_bytes(RemotePtr::new(stub), &stub_code)?;
    t.write_bytes(
        header_ptr().add(40),
        &(h.next_stub + sb::STUB_LEN).to_le_bytes(),
    )?;
    t.write_bytes(RemotePtr::new(site), &patch)?;
    if substituted {
        rewind(t, saved, site, nr)?;
    } else {
        // Skip the call being entered (orig_rax = -1 leaves rax as we set it) and restart at the site.
        let mut r = saved;
        r.orig_rax = u64::MAX;
        r.rax = nr;
        r.rip = site;
        t.set_regs(&r)?;
    }
    Ok(Installed::Patched)
}

/// After a substituted call's exit stop: back to the `syscall` site with the original registers, so
/// the original call is made again (through the patch if there is one).
fn rewind(t: &mut Stopped, saved: replay_ptrace::Regs, site: u64, nr: u64) -> Result<(), Error> {
    let mut r = saved;
    r.rax = nr;
    r.rip = site;
    t.set_regs(&r)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_the_handler_means_its_code_but_not_after_its_trapped_call() {
        let traced = sb::traced_ip();
        assert!(inside_handler(sb::BASE));
        assert!(
            inside_handler(traced - 2),
            "at the trapped syscall itself (a restart)"
        );
        assert!(
            !inside_handler(traced),
            "after it: it only returns or starts over"
        );
        assert!(
            inside_handler(sb::untraced_ip()),
            "after its untraced call, the record half-written"
        );
        assert!(!inside_handler(sb::BASE + sb::STUBS_OFF), "a stub");
        assert!(!inside_handler(sb::BASE - 1));
        assert!(!inside_handler(0x7fff_f7e0_0041));
    }
}
