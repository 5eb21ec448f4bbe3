//! Classic-BPF seccomp filters (seccomp(2), `Documentation/userspace-api/seccomp_filter.rst`).
//!
//! A [`Filter`] maps each system call number to an [`Action`]; the compiled program checks the
//! audit architecture first (anything that is not native x86-64, including x32 numbers with
//! `__X32_SYSCALL_BIT`, gets `ENOSYS` so it cannot escape the recording), then tests the listed
//! numbers one by one and falls back to the default action.
//!
//! The program is built here as plain data (pure, testable without privileges); installing it is
//! [`crate::tracee::spawn`]'s job, in the child just before `execve`.

/// What the filter does with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `SECCOMP_RET_ALLOW`: the system call runs at full speed, the tracer never sees it.
    Allow,
    /// `SECCOMP_RET_TRACE`: the tracee stops with `PTRACE_EVENT_SECCOMP` before the system call runs.
    /// Without a tracer attached the system call fails with `ENOSYS` (which is why the recorder uses
    /// `PTRACE_O_EXITKILL`: see `docs/recording-format.md`).
    Trace,
    /// `SECCOMP_RET_ERRNO`: the system call fails with this errno without running.
    Errno(u16),
}

/// One classic BPF instruction (`struct sock_filter`, `include/uapi/linux/filter.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct SockFilter {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant operand.
    pub k: u32,
}

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `AUDIT_ARCH_X86_64` (`include/uapi/linux/audit.h`): EM_X86_64 | 64-bit | little-endian.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// `offsetof(struct seccomp_data, nr)` and `arch`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// `offsetof(struct seccomp_data, instruction_pointer)`: a u64, low half first.
const OFF_IP: u32 = 8;
/// `offsetof(struct seccomp_data, args)`: six u64, little-endian (low half first on x86-64).
const OFF_ARGS: u32 = 16;

/// A seccomp policy: a default action and per-syscall exceptions.
#[derive(Debug, Clone)]
pub struct Filter {
    default: Action,
    rules: Vec<(u32, Action)>,
    arg_rules: Vec<ArgRule>,
    allowed_ip: Option<u64>,
    range_rules: Vec<RangeRule>,
}

/// "System call `nr` is traced when argument `arg` lies in `[high << 32, (high << 32) + low_end)`."
#[derive(Debug, Clone, Copy)]
struct RangeRule {
    nr: u32,
    arg: u8,
    high: u32,
    low_end: u32,
}

/// "System call `nr` gets `matched` when the low 32 bits of argument `arg` are one of `values`,
/// `otherwise` else."
#[derive(Debug, Clone)]
struct ArgRule {
    nr: u32,
    arg: u8,
    values: Vec<u32>,
    matched: Action,
    otherwise: Action,
}

impl Filter {
    /// A filter whose unlisted system calls get `default`.
    pub fn new(default: Action) -> Self {
        Filter {
            default,
            rules: Vec::new(),
            arg_rules: Vec::new(),
            allowed_ip: None,
            range_rules: Vec::new(),
        }
    }

    /// Lets every system call made from the instruction ending at `ip` run (seccomp_data's
    /// `instruction_pointer` is the address after the `syscall` instruction). Checked before any
    /// rule: this is the syscall-buffering handler's untraced call ([`crate::syscallbuf`]).
    pub fn allow_from_ip(&mut self, ip: u64) -> &mut Self {
        self.allowed_ip = Some(ip);
        self
    }

    /// System call `nr` is traced (`SECCOMP_RET_TRACE`) when argument `arg` (0-5) is an address in
    /// `[high << 32, (high << 32) + low_end)`, whatever its other rules say; checked before them.
    /// Used to see the memory calls that touch the syscall-buffering region
    /// ([`crate::syscallbuf::BASE`]) while the rest of them run untraced.
    pub fn trace_if_arg_in(&mut self, nr: i64, arg: u8, high: u32, low_end: u32) -> &mut Self {
        assert!(arg < 6, "argument index 0-5");
        self.range_rules.push(RangeRule {
            nr: nr as u32,
            arg,
            high,
            low_end,
        });
        self
    }

    /// System call `nr` gets `matched` when the low 32 bits of argument `arg` (0-5) equal one of
    /// `values`, and `otherwise` else (e.g. `fcntl` commands that only touch fd flags run free).
    /// Argument rules are checked before plain rules.
    pub fn rule_arg(
        &mut self,
        nr: i64,
        arg: u8,
        values: &[u32],
        matched: Action,
        otherwise: Action,
    ) -> &mut Self {
        assert!(
            arg < 6 && values.len() < 200,
            "argument index 0-5, fewer than 200 values"
        );
        self.arg_rules.push(ArgRule {
            nr: nr as u32,
            arg,
            values: values.to_vec(),
            matched,
            otherwise,
        });
        self
    }

    /// Sets the action of system call `nr` (x86-64 number). A later rule for the same number wins.
    pub fn rule(&mut self, nr: i64, action: Action) -> &mut Self {
        let nr = nr as u32;
        self.rules.retain(|(n, _)| *n != nr);
        self.rules.push((nr, action));
        self
    }

    /// The action the compiled program takes for native system call `nr`.
    pub fn action_for(&self, nr: i64) -> Action {
        self.rules
            .iter()
            .find(|(n, _)| *n == nr as u32)
            .map_or(self.default, |(_, a)| *a)
    }

    /// The action for `nr` with arguments `args`, argument rules included.
    pub fn action_for_args(&self, nr: i64, args: [u64; 6]) -> Action {
        match self.arg_rules.iter().find(|r| r.nr == nr as u32) {
            Some(r) if r.values.contains(&(args[usize::from(r.arg)] as u32)) => r.matched,
            Some(r) => r.otherwise,
            None => self.action_for(nr),
        }
    }

    /// Compiles the filter to classic BPF. Rules whose action equals the default are dropped, so
    /// the program stays short: each rule costs two instructions.
    pub fn compile(&self) -> Vec<SockFilter> {
        let stmt = |code: u16, k: u32| SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        };
        let jump = |code: u16, k: u32, jt: u8, jf: u8| SockFilter { code, jt, jf, k };
        let ret = |a: Action| stmt(BPF_RET | BPF_K, ret_value(a));
        let mut prog = vec![
            stmt(BPF_LD | BPF_W | BPF_ABS, OFF_ARCH),
            jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
            ret(Action::Errno(libc::ENOSYS as u16)),
            stmt(BPF_LD | BPF_W | BPF_ABS, OFF_NR),
            jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
            ret(Action::Errno(libc::ENOSYS as u16)),
        ];
        if let Some(ip) = self.allowed_ip {
            prog.extend([
                stmt(BPF_LD | BPF_W | BPF_ABS, OFF_IP),
                jump(BPF_JMP | BPF_JEQ | BPF_K, ip as u32, 0, 3),
                stmt(BPF_LD | BPF_W | BPF_ABS, OFF_IP + 4),
                jump(BPF_JMP | BPF_JEQ | BPF_K, (ip >> 32) as u32, 0, 1),
                ret(Action::Allow),
                stmt(BPF_LD | BPF_W | BPF_ABS, OFF_NR),
            ]);
        }
        for r in &self.range_rules {
            let lo = OFF_ARGS + 8 * u32::from(r.arg);
            prog.extend([
                jump(BPF_JMP | BPF_JEQ | BPF_K, r.nr, 0, 6),
                stmt(BPF_LD | BPF_W | BPF_ABS, lo + 4),
                jump(BPF_JMP | BPF_JEQ | BPF_K, r.high, 0, 3),
                stmt(BPF_LD | BPF_W | BPF_ABS, lo),
                jump(BPF_JMP | BPF_JGE | BPF_K, r.low_end, 1, 0),
                ret(Action::Trace),
                stmt(BPF_LD | BPF_W | BPF_ABS, OFF_NR),
            ]);
        }
        for r in &self.arg_rules {
            let n = r.values.len();
            // jeq nr ? fall into the block : skip it (n + 3 instructions).
            prog.push(jump(BPF_JMP | BPF_JEQ | BPF_K, r.nr, 0, (n + 3) as u8));
            prog.push(stmt(
                BPF_LD | BPF_W | BPF_ABS,
                OFF_ARGS + 8 * u32::from(r.arg),
            ));
            for (j, v) in r.values.iter().enumerate() {
                // Equal: jump to the final `ret matched` (n - j instructions ahead).
                prog.push(jump(BPF_JMP | BPF_JEQ | BPF_K, *v, (n - j) as u8, 0));
            }
            prog.push(ret(r.otherwise));
            prog.push(ret(r.matched));
        }
        for &(nr, action) in self.rules.iter().filter(|(_, a)| *a != self.default) {
            // jt = 0 falls through to the return; jf = 1 skips it.
            prog.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
            prog.push(ret(action));
        }
        prog.push(ret(self.default));
        prog
    }
}

fn ret_value(a: Action) -> u32 {
    match a {
        Action::Allow => SECCOMP_RET_ALLOW,
        Action::Trace => SECCOMP_RET_TRACE,
        Action::Errno(e) => SECCOMP_RET_ERRNO | u32::from(e),
    }
}

/// Runs a compiled program on `(arch, nr)` as the kernel would (only the opcodes [`Filter::compile`]
/// emits). Used by tests to check the program without installing it.
pub fn evaluate(prog: &[SockFilter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    evaluate_at(prog, arch, nr, 0, args)
}

/// [`evaluate`] for a system call made from the instruction ending at `ip`.
pub fn evaluate_at(prog: &[SockFilter], arch: u32, nr: u32, ip: u64, args: [u64; 6]) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    while pc < prog.len() {
        let i = prog[pc];
        match i.code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                acc = match i.k {
                    OFF_NR => nr,
                    OFF_ARCH => arch,
                    OFF_IP => ip as u32,
                    k if k == OFF_IP + 4 => (ip >> 32) as u32,
                    k => {
                        let a = args[((k - OFF_ARGS) / 8) as usize];
                        if (k - OFF_ARGS) % 8 == 4 {
                            (a >> 32) as u32
                        } else {
                            a as u32
                        }
                    }
                }
            }
            c if c == BPF_JMP | BPF_JEQ | BPF_K => {
                pc += usize::from(if acc == i.k { i.jt } else { i.jf });
            }
            c if c == BPF_JMP | BPF_JGE | BPF_K => {
                pc += usize::from(if acc >= i.k { i.jt } else { i.jf });
            }
            c if c == BPF_RET | BPF_K => return i.k,
            _ => return 0,
        }
        pc += 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_program_matches_rules() {
        let mut f = Filter::new(Action::Trace);
        f.rule(libc::SYS_mmap, Action::Allow)
            .rule(libc::SYS_rseq, Action::Errno(38));
        f.rule(libc::SYS_read, Action::Trace);
        let p = f.compile();
        assert_eq!(
            evaluate(&p, AUDIT_ARCH_X86_64, libc::SYS_mmap as u32, [0; 6]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            evaluate(&p, AUDIT_ARCH_X86_64, libc::SYS_rseq as u32, [0; 6]),
            SECCOMP_RET_ERRNO | 38
        );
        assert_eq!(
            evaluate(&p, AUDIT_ARCH_X86_64, libc::SYS_read as u32, [0; 6]),
            SECCOMP_RET_TRACE
        );
        assert_eq!(
            evaluate(&p, AUDIT_ARCH_X86_64, 9999, [0; 6]),
            SECCOMP_RET_TRACE
        );
        // i386 and x32 system calls cannot bypass the policy.
        assert_eq!(
            evaluate(&p, 0x4000_0003, 3, [0; 6]),
            SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            evaluate(&p, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT | 1, [0; 6]),
            SECCOMP_RET_ERRNO | 38
        );
        // The redundant read rule (same as default) costs nothing.
        assert_eq!(p.len(), 6 + 4 + 1);
        assert_eq!(f.action_for(libc::SYS_read), Action::Trace);
    }

    #[test]
    fn calls_from_the_allowed_instruction_run_untraced() {
        let mut f = Filter::new(Action::Trace);
        f.rule(libc::SYS_rseq, Action::Errno(38));
        let ip = 0x7fff_a000_0063u64;
        f.allow_from_ip(ip);
        let p = f.compile();
        let at = |nr: i64, ip: u64| evaluate_at(&p, AUDIT_ARCH_X86_64, nr as u32, ip, [0; 6]);
        assert_eq!(at(libc::SYS_newfstatat, ip), SECCOMP_RET_ALLOW);
        assert_eq!(at(libc::SYS_newfstatat, ip + 2), SECCOMP_RET_TRACE);
        // Same low half, other high half: still traced.
        assert_eq!(
            at(libc::SYS_newfstatat, ip & 0xffff_ffff),
            SECCOMP_RET_TRACE
        );
        assert_eq!(at(libc::SYS_rseq, 0x1000), SECCOMP_RET_ERRNO | 38);
        // The architecture check still comes first.
        assert_eq!(
            evaluate_at(&p, 0x4000_0003, 3, ip, [0; 6]),
            SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
    }

    #[test]
    fn range_rules_trace_calls_on_addresses_in_the_range_only() {
        let mut f = Filter::new(Action::Trace);
        f.rule(libc::SYS_munmap, Action::Allow)
            .rule(libc::SYS_mremap, Action::Allow);
        f.trace_if_arg_in(libc::SYS_munmap, 0, 0x7fff, 0xa011_0000);
        f.trace_if_arg_in(libc::SYS_mremap, 0, 0x7fff, 0xa011_0000);
        f.trace_if_arg_in(libc::SYS_mremap, 4, 0x7fff, 0xa011_0000);
        let p = f.compile();
        let ev = |nr: i64, args: [u64; 6]| evaluate(&p, AUDIT_ARCH_X86_64, nr as u32, args);
        let at = |a: u64| [a, 0x1000, 0, 0, 0, 0];
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7fff_a000_0000)),
            SECCOMP_RET_TRACE
        );
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7fff_0000_0000)),
            SECCOMP_RET_TRACE
        );
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7fff_a010_f000)),
            SECCOMP_RET_TRACE
        );
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7fff_a011_0000)),
            SECCOMP_RET_ALLOW,
            "just past the end"
        );
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7fff_f7d8_0000)),
            SECCOMP_RET_ALLOW,
            "libc's area"
        );
        assert_eq!(
            ev(libc::SYS_munmap, at(0x7ffe_a000_0000)),
            SECCOMP_RET_ALLOW,
            "other high half"
        );
        assert_eq!(
            ev(
                libc::SYS_mremap,
                [0x5555_0000_0000, 0, 0, 3, 0x7fff_a000_0000, 0]
            ),
            SECCOMP_RET_TRACE
        );
        assert_eq!(
            ev(
                libc::SYS_mremap,
                [0x5555_0000_0000, 0, 0, 3, 0x5555_1000_0000, 0]
            ),
            SECCOMP_RET_ALLOW
        );
    }

    #[test]
    fn argument_rules_select_by_the_low_half_of_an_argument() {
        let mut f = Filter::new(Action::Trace);
        f.rule(libc::SYS_mmap, Action::Allow);
        f.rule_arg(
            libc::SYS_fcntl,
            1,
            &[1, 2, 1030],
            Action::Allow,
            Action::Trace,
        );
        let p = f.compile();
        let ev = |nr: i64, a1: u64| evaluate(&p, AUDIT_ARCH_X86_64, nr as u32, [3, a1, 0, 0, 0, 0]);
        assert_eq!(ev(libc::SYS_fcntl, 1030), SECCOMP_RET_ALLOW);
        assert_eq!(ev(libc::SYS_fcntl, 2), SECCOMP_RET_ALLOW);
        assert_eq!(ev(libc::SYS_fcntl, 3), SECCOMP_RET_TRACE); // F_GETFL
        assert_eq!(ev(libc::SYS_fcntl, 0x1_0000_0002), SECCOMP_RET_ALLOW); // low half only
        assert_eq!(ev(libc::SYS_mmap, 3), SECCOMP_RET_ALLOW);
        assert_eq!(ev(libc::SYS_read, 1030), SECCOMP_RET_TRACE);
        assert_eq!(
            f.action_for_args(libc::SYS_fcntl, [3, 3, 0, 0, 0, 0]),
            Action::Trace
        );
        assert_eq!(
            f.action_for_args(libc::SYS_fcntl, [3, 1, 0, 0, 0, 0]),
            Action::Allow
        );
    }
}
