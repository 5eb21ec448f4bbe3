//! Machine-level nondeterminism that recorder and replayer handle identically: the new image after
//! `execve` (auxiliary vector, vDSO, AT_RANDOM, CPUID faulting, RDTSC trapping) and the trapped
//! instructions (RDTSC, RDTSCP, CPUID).

use replay_ptrace::{RemotePtr, Stopped};

use crate::Error;

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;
/// `ARCH_SET_CPUID` (`arch/x86/include/uapi/asm/prctl.h`): 0 makes CPUID fault (SIGSEGV).
const ARCH_SET_CPUID: u64 = 0x1012;

/// What [`prepare_image`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The 16 AT_RANDOM bytes now in the image (recorded, or just written from the recording).
    pub at_random: Vec<u8>,
    /// True when CPUID now faults (`arch_prctl(ARCH_SET_CPUID, 0)` succeeded).
    pub cpuid_faulting: bool,
    /// True when RDTSC now faults (`prctl(PR_SET_TSC, PR_TSC_SIGSEGV)` succeeded).
    pub tsc_trapped: bool,
    /// True when the vDSO was hidden (its AT_SYSINFO_EHDR entry turned into AT_IGNORE).
    pub vdso_hidden: bool,
}

/// Prepares a freshly exec'd image at the `execve` syscall-exit stop, before its first instruction:
///
/// 1. hides the vDSO: the auxv entry `AT_SYSINFO_EHDR` becomes `AT_IGNORE`, so glibc makes real
///    (trapped, recorded) `clock_gettime`/`gettimeofday`/`time`/`getcpu` system calls;
/// 2. reads the AT_RANDOM bytes, or overwrites them with `at_random` on replay (they seed the stack
///    protector and pointer guard);
/// 3. makes CPUID fault (`ARCH_SET_CPUID` is reset by every exec, so it is set here) so its answers
///    are recorded and RDRAND/RDSEED can be masked;
/// 4. only then traps RDTSC with `PR_SET_TSC` (the vDSO reads the TSC, which is why it goes first).
///
/// Errors: tracee memory access and injected system calls ([`Error::Ptrace`]).
pub fn prepare_image(t: &mut Stopped, at_random: Option<&[u8]>) -> Result<ImageInfo, Error> {
    let regs = t.regs()?;
    let sp = RemotePtr::<u64>::new(regs.rsp);
    let argc = t.read_u64(sp)?;
    // Skip argc, argv[0..argc], NULL; then envp until NULL.
    let mut p = sp.add(1 + argc + 1);
    while t.read_u64(p)? != 0 {
        p = p.add(1);
    }
    p = p.add(1);
    let mut info = ImageInfo {
        at_random: Vec::new(),
        cpuid_faulting: false,
        tsc_trapped: false,
        vdso_hidden: false,
    };
    for _ in 0..64 {
        let key = t.read_u64(p)?;
        if key == AT_NULL {
            break;
        }
        let val = t.read_u64(p.add(1))?;
        match key {
            AT_SYSINFO_EHDR => {
                t.write_bytes(p.cast(), &AT_IGNORE.to_le_bytes())?;
                info.vdso_hidden = true;
            }
            AT_RANDOM => {
                let ptr = RemotePtr::<u8>::new(val);
                if let Some(bytes) = at_random {
                    t.write_bytes(ptr, bytes)?;
                }
                info.at_random = t.read_bytes(ptr, 16)?;
            }
            _ => {}
        }
        p = p.add(2);
    }
    info.cpuid_faulting =
        t.inject_syscall(libc::SYS_arch_prctl, [ARCH_SET_CPUID, 0, 0, 0, 0, 0])? == 0;
    if info.vdso_hidden {
        let r = t.inject_syscall(
            libc::SYS_prctl,
            [
                libc::PR_SET_TSC as u64,
                libc::PR_TSC_SIGSEGV as u64,
                0,
                0,
                0,
                0,
            ],
        )?;
        info.tsc_trapped = r == 0;
    }
    Ok(info)
}

/// An instruction that faulted because we asked it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trap {
    /// RDTSC (`0f 31`), 2 bytes.
    Rdtsc,
    /// RDTSCP (`0f 01 f9`), 3 bytes.
    Rdtscp,
    /// CPUID (`0f a2`), 2 bytes.
    Cpuid,
}

impl Trap {
    /// Instruction length in bytes.
    pub fn length(self) -> u64 {
        match self {
            Trap::Rdtscp => 3,
            Trap::Rdtsc | Trap::Cpuid => 2,
        }
    }
}

/// Decodes the instruction at the tracee's rip after a SIGSEGV with `si_code == SI_KERNEL`.
pub fn decode_trap(t: &mut Stopped) -> Result<Option<Trap>, Error> {
    let rip = t.regs()?.rip;
    let Ok(b) = t.read_bytes(RemotePtr::new(rip), 3) else {
        return Ok(None);
    };
    Ok(match b[..] {
        [0x0f, 0x31, _] => Some(Trap::Rdtsc),
        [0x0f, 0x01, 0xf9] => Some(Trap::Rdtscp),
        [0x0f, 0xa2, _] => Some(Trap::Cpuid),
        _ => None,
    })
}

/// CPUID's answer as the recorded program sees it: the tracer's own CPUID, with RDRAND (leaf 1 ECX
/// bit 30) and RDSEED (leaf 7 subleaf 0 EBX bit 18) masked so programs fall back to `getrandom`,
/// which is recorded (Intel SDM vol. 2A, CPUID).
pub fn masked_cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    let r = replay_ptrace::cpuid(leaf, subleaf);
    let mut out = [r.eax, r.ebx, r.ecx, r.edx];
    if leaf == 1 {
        out[2] &= !(1 << 30);
    }
    if leaf == 7 && subleaf == 0 {
        out[1] &= !(1 << 18);
    }
    out
}

/// Signal code of a kernel-generated fault (`SI_KERNEL`, `include/uapi/asm-generic/siginfo.h`).
pub const SI_KERNEL: i32 = 0x80;

/// `si_code` of a 128-byte `siginfo_t` (offset 8 on x86-64).
pub fn si_code(info: &[u8; 128]) -> i32 {
    i32::from_le_bytes(info[8..12].try_into().expect("4 bytes"))
}

/// True when `sig` with this siginfo is synchronous: a fault raised by the program's own instruction
/// (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS with a positive, kernel-set `si_code`). Such
/// signals recur by themselves on replay; every other signal is asynchronous.
pub fn is_synchronous(sig: i32, info: &[u8; 128]) -> bool {
    matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
    ) && si_code(info) > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuid_masks_rdrand_and_rdseed() {
        assert_eq!(masked_cpuid(1, 0)[2] & (1 << 30), 0);
        assert_eq!(masked_cpuid(7, 0)[1] & (1 << 18), 0);
        // Other bits pass through (SSE2, leaf 1 EDX bit 26, is on every x86-64 CPU).
        assert_ne!(masked_cpuid(1, 0)[3] & (1 << 26), 0);
    }

    #[test]
    fn user_sent_segv_is_asynchronous() {
        let mut info = [0u8; 128];
        info[8..12].copy_from_slice(&0i32.to_le_bytes()); // SI_USER
        assert!(!is_synchronous(libc::SIGSEGV, &info));
        info[8..12].copy_from_slice(&1i32.to_le_bytes()); // SEGV_MAPERR
        assert!(is_synchronous(libc::SIGSEGV, &info));
        assert!(!is_synchronous(libc::SIGCHLD, &info));
    }
}
