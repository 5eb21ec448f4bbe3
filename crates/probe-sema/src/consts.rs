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

/// The value of a named constant (`ENOENT` → 2, `SIGKILL` → 9), typed `int` by the caller.
pub fn named_constant(name: &str) -> Option<i64> {
    if !name.starts_with('E') && !name.starts_with("SIG") {
        return None;
    }
    ERRNO
        .iter()
        .chain(SIGNALS)
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
        assert_eq!(named_constant("EWOULDBLOCK"), Some(11));
        assert_eq!(named_constant("execname"), None);
    }
}
