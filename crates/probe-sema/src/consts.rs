//! Named integer constants D scripts use without declaring them: `errno` values (`ENOENT`) and
//! signal numbers (`SIGKILL`).
//!
//! DTrace defines these as `inline` constants in its D library files (`errno.d`, `signal.d`), so
//! that `/errno == ENOENT/` and `/args[0] == SIGKILL/` work. Sightline has no D library; the values
//! here are Linux's (x86-64): `include/uapi/asm-generic/errno-base.h`, `errno.h` and
//! `arch/x86/include/uapi/asm/signal.h`. A test compares them with the system headers.

/// `errno` names and values (Linux).
pub const ERRNO: &[(&str, i64)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("ENOEXEC", 8),
    ("EBADF", 9),
    ("ECHILD", 10),
    ("EAGAIN", 11),
    ("EWOULDBLOCK", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("ENOTBLK", 15),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("EXDEV", 18),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOTTY", 25),
    ("ETXTBSY", 26),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("ESPIPE", 29),
    ("EROFS", 30),
    ("EMLINK", 31),
    ("EPIPE", 32),
    ("EDOM", 33),
    ("ERANGE", 34),
    ("EDEADLK", 35),
    ("EDEADLOCK", 35),
    ("ENAMETOOLONG", 36),
    ("ENOLCK", 37),
    ("ENOSYS", 38),
    ("ENOTEMPTY", 39),
    ("ELOOP", 40),
    ("ENOMSG", 42),
    ("EIDRM", 43),
    ("ENOSTR", 60),
    ("ENODATA", 61),
    ("ETIME", 62),
    ("ENOSR", 63),
    ("ENOLINK", 67),
    ("EPROTO", 71),
    ("EBADMSG", 74),
    ("EOVERFLOW", 75),
    ("EBADFD", 77),
    ("EILSEQ", 84),
    ("ERESTART", 85),
    ("EUSERS", 87),
    ("ENOTSOCK", 88),
    ("EDESTADDRREQ", 89),
    ("EMSGSIZE", 90),
    ("EPROTOTYPE", 91),
    ("ENOPROTOOPT", 92),
    ("EPROTONOSUPPORT", 93),
    ("ESOCKTNOSUPPORT", 94),
    ("EOPNOTSUPP", 95),
    ("ENOTSUP", 95),
    ("EPFNOSUPPORT", 96),
    ("EAFNOSUPPORT", 97),
    ("EADDRINUSE", 98),
    ("EADDRNOTAVAIL", 99),
    ("ENETDOWN", 100),
    ("ENETUNREACH", 101),
    ("ENETRESET", 102),
    ("ECONNABORTED", 103),
    ("ECONNRESET", 104),
    ("ENOBUFS", 105),
    ("EISCONN", 106),
    ("ENOTCONN", 107),
    ("ESHUTDOWN", 108),
    ("ETOOMANYREFS", 109),
    ("ETIMEDOUT", 110),
    ("ECONNREFUSED", 111),
    ("EHOSTDOWN", 112),
    ("EHOSTUNREACH", 113),
    ("EALREADY", 114),
    ("EINPROGRESS", 115),
    ("ESTALE", 116),
    ("EREMOTEIO", 121),
    ("EDQUOT", 122),
    ("ECANCELED", 125),
    ("ENOKEY", 126),
    ("EKEYEXPIRED", 127),
    ("EKEYREVOKED", 128),
    ("EKEYREJECTED", 129),
    ("EOWNERDEAD", 130),
    ("ENOTRECOVERABLE", 131),
    ("ERFKILL", 132),
    ("EHWPOISON", 133),
];

/// Signal names and numbers (Linux x86-64).
pub const SIGNALS: &[(&str, i64)] = &[
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGILL", 4),
    ("SIGTRAP", 5),
    ("SIGABRT", 6),
    ("SIGIOT", 6),
    ("SIGBUS", 7),
    ("SIGFPE", 8),
    ("SIGKILL", 9),
    ("SIGUSR1", 10),
    ("SIGSEGV", 11),
    ("SIGUSR2", 12),
    ("SIGPIPE", 13),
    ("SIGALRM", 14),
    ("SIGTERM", 15),
    ("SIGSTKFLT", 16),
    ("SIGCHLD", 17),
    ("SIGCONT", 18),
    ("SIGSTOP", 19),
    ("SIGTSTP", 20),
    ("SIGTTIN", 21),
    ("SIGTTOU", 22),
    ("SIGURG", 23),
    ("SIGXCPU", 24),
    ("SIGXFSZ", 25),
    ("SIGVTALRM", 26),
    ("SIGPROF", 27),
    ("SIGWINCH", 28),
    ("SIGIO", 29),
    ("SIGPOLL", 29),
    ("SIGPWR", 30),
    ("SIGSYS", 31),
];

/// The `uregs[]` register names (`R_PC`, `R_RDI`, ...) and their subscripts, as Oracle DTrace's
/// x86 `regs.d` numbers them (libdtrace/i386/regs.d): the 64-bit names 0 to 20 in the order of
/// Linux's x86-64 `struct pt_regs` (`R_R15` = 0 ... `R_SS` = 20, `R_ERR` = `orig_ax`), the segment
/// registers 21 to 24, and the 32-bit names from 25 on in the order of the i386 `pt_regs`
/// (`R_EBX` = 25 ... `R_ESP` = 40), with the aliases `R_PC`, `R_FP`, `R_SP`, `R_PS`, `R_R0`, `R_R1`.
/// `R_TRAPNO` is 25 in that file too (it shares `R_EBX`'s number).
pub const UREGS: &[(&str, i64)] = &[
    ("R_R15", 0),
    ("R_R14", 1),
    ("R_R13", 2),
    ("R_R12", 3),
    ("R_RBP", 4),
    ("R_RBX", 5),
    ("R_R11", 6),
    ("R_R10", 7),
    ("R_R9", 8),
    ("R_R8", 9),
    ("R_RAX", 10),
    ("R_RCX", 11),
    ("R_RDX", 12),
    ("R_RSI", 13),
    ("R_RDI", 14),
    ("R_ERR", 15),
    ("R_RIP", 16),
    ("R_CS", 17),
    ("R_RFL", 18),
    ("R_RSP", 19),
    ("R_SS", 20),
    ("R_DS", 21),
    ("R_ES", 22),
    ("R_FS", 23),
    ("R_GS", 24),
    ("R_TRAPNO", 25),
    ("R_EBX", 25),
    ("R_ECX", 26),
    ("R_EDX", 27),
    ("R_ESI", 28),
    ("R_EDI", 29),
    ("R_EBP", 30),
    ("R_EAX", 31),
    ("R_EIP", 37),
    ("R_EFL", 39),
    ("R_ESP", 40),
    ("R_PC", 37),
    ("R_FP", 30),
    ("R_SP", 40),
    ("R_PS", 39),
    ("R_R0", 31),
    ("R_R1", 25),
];

/// The 64-bit word of the x86-64 `struct pt_regs` that `uregs[index]` reads ([`UREGS`]'s
/// numbering), or `None` for the segment registers (21 to 24 and their 32-bit names 32 to 35),
/// which x86-64's `pt_regs` does not save, and subscripts past 41. A 32-bit name reads the whole
/// 64-bit register it names the low half of (`R_EAX` is `rax`), as DTrace on x86-64 does.
pub fn uregs_word(index: i64) -> Option<u32> {
    // The i386 pt_regs order: ebx ecx edx esi edi ebp eax ds es fs gs orig_eax eip cs efl esp ss,
    // as x86-64 pt_regs words.
    const I386: [Option<u32>; 17] = [
        Some(5),
        Some(11),
        Some(12),
        Some(13),
        Some(14),
        Some(4),
        Some(10),
        None,
        None,
        None,
        None,
        Some(15),
        Some(16),
        Some(17),
        Some(18),
        Some(19),
        Some(20),
    ];
    match index {
        0..=20 => Some(index as u32),
        25..=41 => I386[(index - 25) as usize],
        _ => None,
    }
}

/// Address families `inet_ntop()` takes (Linux's values, `include/linux/socket.h`).
pub const ADDRESS_FAMILIES: &[(&str, i64)] = &[("AF_INET", 2), ("AF_INET6", 10)];

/// DTrace's fault numbers, as ERROR clauses get them in `arg4` (Oracle's
/// include/dtrace/faults_defines.h).
pub const FAULTS: &[(&str, i64)] = &[
    ("DTRACEFLT_UNKNOWN", 0),
    ("DTRACEFLT_BADADDR", 1),
    ("DTRACEFLT_BADALIGN", 2),
    ("DTRACEFLT_ILLOP", 3),
    ("DTRACEFLT_DIVZERO", 4),
    ("DTRACEFLT_NOSCRATCH", 5),
    ("DTRACEFLT_KPRIV", 6),
    ("DTRACEFLT_UPRIV", 7),
    ("DTRACEFLT_TUPOFLOW", 8),
    ("DTRACEFLT_BADSTACK", 9),
    ("DTRACEFLT_BADSIZE", 10),
    ("DTRACEFLT_BADINDEX", 11),
    ("DTRACEFLT_LIBRARY", 1000),
];

/// The value of a named constant (`ENOENT` → 2, `SIGKILL` → 9, `R_PC` → 37, `AF_INET` → 2,
/// `DTRACEFLT_DIVZERO` → 4), typed `int` by the caller.
pub fn named_constant(name: &str) -> Option<i64> {
    if !name.starts_with('E')
        && !name.starts_with("SIG")
        && !name.starts_with("R_")
        && !name.starts_with("AF_")
        && !name.starts_with("DTRACEFLT_")
    {
        return None;
    }
    ERRNO
        .iter()
        .chain(SIGNALS)
        .chain(UREGS)
        .chain(ADDRESS_FAMILIES)
        .chain(FAULTS)
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `#define NAME VALUE` lines of a C header, numeric values only.
    fn defines(path: &str) -> Option<Vec<(String, i64)>> {
        let text = std::fs::read_to_string(path).ok()?;
        Some(
            text.lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next()? == "#define").then_some(())?;
                    let name = w.next()?.to_string();
                    let value = w.next()?.parse::<i64>().ok()?;
                    Some((name, value))
                })
                .collect(),
        )
    }

    #[test]
    fn values_match_the_system_headers() {
        let mut checked = 0;
        for (header, table) in [
            ("/usr/include/asm-generic/errno-base.h", ERRNO),
            ("/usr/include/asm-generic/errno.h", ERRNO),
            ("/usr/include/x86_64-linux-gnu/asm/signal.h", SIGNALS),
        ] {
            let Some(defs) = defines(header) else {
                eprintln!("skipped: {header} is absent");
                continue;
            };
            for (name, value) in defs {
                if let Some(&(_, ours)) = table.iter().find(|(n, _)| *n == name) {
                    assert_eq!(ours, value, "{name} in {header}");
                    checked += 1;
                }
            }
        }
        if checked > 0 {
            assert!(
                checked > 80,
                "only {checked} constants found in the headers"
            );
        }
        assert_eq!(named_constant("ENOENT"), Some(2));
        assert_eq!(named_constant("SIGKILL"), Some(9));
        assert_eq!(named_constant("AF_INET6"), Some(10));
        assert_eq!(named_constant("EWOULDBLOCK"), Some(11));
        assert_eq!(named_constant("execname"), None);
    }

    /// `uregs[R_x]` reads the `struct pt_regs` word that the kernel's ptrace ABI header places
    /// the register at (the x86-64 byte offsets of `asm/ptrace-abi.h`), and each 32-bit name
    /// reads its 64-bit register.
    #[test]
    fn uregs_words_match_the_ptrace_abi_header() {
        let header = "/usr/include/x86_64-linux-gnu/asm/ptrace-abi.h";
        let Ok(text) = std::fs::read_to_string(header) else {
            eprintln!("skipped: {header} is absent");
            return;
        };
        // The x86-64 byte offsets follow `__FRAME_OFFSETS`.
        let frame = &text[text.find("__FRAME_OFFSETS").expect("x86-64 offsets")..];
        let offset = |name: &str| -> i64 {
            frame
                .lines()
                .find_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next() == Some("#define") && w.next() == Some(name))
                        .then(|| w.next()?.parse().ok())
                        .flatten()
                })
                .unwrap_or_else(|| panic!("{name} in {header}"))
        };
        let word = |dname: &str| {
            let index = named_constant(dname).unwrap_or_else(|| panic!("{dname}"));
            uregs_word(index).map(|w| w as i64 * 8)
        };
        let pairs = [
            ("R_R15", "R15"),
            ("R_R14", "R14"),
            ("R_R13", "R13"),
            ("R_R12", "R12"),
            ("R_RBP", "RBP"),
            ("R_RBX", "RBX"),
            ("R_R11", "R11"),
            ("R_R10", "R10"),
            ("R_R9", "R9"),
            ("R_R8", "R8"),
            ("R_RAX", "RAX"),
            ("R_RCX", "RCX"),
            ("R_RDX", "RDX"),
            ("R_RSI", "RSI"),
            ("R_RDI", "RDI"),
            ("R_ERR", "ORIG_RAX"),
            ("R_RIP", "RIP"),
            ("R_CS", "CS"),
            ("R_RFL", "EFLAGS"),
            ("R_RSP", "RSP"),
            ("R_SS", "SS"),
            ("R_EAX", "RAX"),
            ("R_EBX", "RBX"),
            ("R_ECX", "RCX"),
            ("R_EDX", "RDX"),
            ("R_ESI", "RSI"),
            ("R_EDI", "RDI"),
            ("R_EBP", "RBP"),
            ("R_EIP", "RIP"),
            ("R_EFL", "EFLAGS"),
            ("R_ESP", "RSP"),
            ("R_PC", "RIP"),
            ("R_SP", "RSP"),
            ("R_FP", "RBP"),
            ("R_PS", "EFLAGS"),
            ("R_R0", "RAX"),
            ("R_R1", "RBX"),
        ];
        for (dname, cname) in pairs {
            assert_eq!(word(dname), Some(offset(cname)), "{dname} vs {cname}");
        }
        for seg in ["R_DS", "R_ES", "R_FS", "R_GS"] {
            assert_eq!(word(seg), None, "{seg}");
        }
        assert_eq!(uregs_word(42), None);
        assert_eq!(uregs_word(-1), None);
    }
}
