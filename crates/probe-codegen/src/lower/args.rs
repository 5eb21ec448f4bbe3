//! Probe arguments: `argN` per probe kind ([`ArgAccess`]), USDT argument specs, the built-in
//! integer variables, `profile` arguments and tracepoint and system-call fields.

use probe_sema::argspec::{ArgLocation, ArgSpec, Reg as UReg};

use super::*;

/// Frames `stackdepth` and `ustackdepth` count at most (the kernel's `sysctl_perf_event_max_stack`
/// default).
pub const STACKDEPTH_MAX: u32 = 127;

impl ProgGen<'_, '_> {
    pub(super) fn arg(&mut self, n: u8, span: Span) -> Res<()> {
        let access = self.arg_access(n, span)?;
        match access {
            ArgAccess::Zero => self.asm.mov_imm(R0, 0),
            ArgAccess::CtxU64 { index } => self.asm.ldx(Size::DW, R0, R6, (index * 8) as i16),
            ArgAccess::Regs { reg_offset } => self.asm.ldx(Size::DW, R0, R6, reg_offset),
            ArgAccess::RegsViaPtr {
                ptr_index,
                reg_offset,
            } => {
                let s = self.slot(span)?;
                let a = &mut self.asm;
                a.st_imm(Size::DW, R10, s, 0);
                a.mov(R1, R10);
                a.alu_imm(Alu::Add, R1, s as i32);
                a.mov_imm(R2, 8);
                a.ldx(Size::DW, R3, R6, (ptr_index * 8) as i16);
                a.alu_imm(Alu::Add, R3, reg_offset as i32);
                a.call(helper::PROBE_READ_KERNEL);
                a.ldx(Size::DW, R0, R10, s);
            }
            ArgAccess::Usdt(spec) => self.usdt_arg(&spec, span)?,
            ArgAccess::AttachCookie => {
                self.asm.mov(R1, R6);
                self.asm.call(helper::GET_ATTACH_COOKIE);
            }
        }
        Ok(())
    }

    fn usdt_arg(&mut self, spec: &ArgSpec, span: Span) -> Res<()> {
        let addr_in_r3 = match usdt_operand(&mut self.asm, spec) {
            Ok(UsdtOperand::Value) => false,
            Ok(UsdtOperand::Address) => true,
            Err(why) => {
                return self.err(
                    span,
                    format!("USDT argument `{spec}` is not supported: {why}"),
                );
            }
        };
        if addr_in_r3 {
            let s = self.slot(span)?;
            let a = &mut self.asm;
            a.st_imm(Size::DW, R10, s, 0);
            a.mov(R1, R10);
            a.alu_imm(Alu::Add, R1, s as i32);
            a.mov_imm(R2, spec.size.clamp(1, 8) as i64);
            a.call(helper::PROBE_READ_USER);
            a.ldx(Size::DW, R0, R10, s);
        }
        let ty = Type::Int {
            bytes: spec.size.clamp(1, 8),
            signed: spec.signed,
        };
        self.normalize(R0, &ty);
        Ok(())
    }

    /// How `argN` is read in the current group (all of a clause's probes in one group share it).
    fn arg_access(&self, n: u8, span: Span) -> Res<ArgAccess> {
        Ok(match &self.group {
            GroupKey::Begin | GroupKey::End => ArgAccess::Zero,
            GroupKey::Error => {
                if n < 6 {
                    ArgAccess::CtxU64 { index: n as u16 }
                } else {
                    ArgAccess::Zero
                }
            }
            GroupKey::SysEnter => match SYSCALL_ARG_REGS.get(n as usize) {
                Some(&r) => ArgAccess::RegsViaPtr {
                    ptr_index: 0,
                    reg_offset: r,
                },
                None => ArgAccess::Zero,
            },
            GroupKey::SysExit => {
                if n < 2 {
                    ArgAccess::CtxU64 { index: 1 }
                } else {
                    ArgAccess::Zero
                }
            }
            GroupKey::Tracepoint(..) => ArgAccess::Zero,
            GroupKey::Profile(..) => return self.err(span, "internal: profile args are computed"),
            GroupKey::Uprobe(..) | GroupKey::UprobeMulti(..) => {
                let probe = self.probes.first();
                match probe.map(|p| &p.kind) {
                    Some(ProbeKind::Usdt { arg_specs, .. }) => match arg_specs.get(n as usize) {
                        Some(spec) => ArgAccess::Usdt(spec.clone()),
                        None => ArgAccess::Zero,
                    },
                    // DTrace: arg0 = offset of the returning instruction (the attach cookie of each
                    // return site, see probe-runtime's `user::attach`), arg1 = the return value.
                    Some(ProbeKind::Uprobe { ret: true, .. }) => match n {
                        0 => ArgAccess::AttachCookie,
                        1 => ArgAccess::Regs {
                            reg_offset: pt_regs::AX,
                        },
                        _ => ArgAccess::Zero,
                    },
                    _ => match CALL_ARG_REGS.get(n as usize) {
                        Some(&r) => ArgAccess::Regs { reg_offset: r },
                        None => ArgAccess::Zero,
                    },
                }
            }
        })
    }

    /// `stackdepth`/`ustackdepth` (the frames `stack()`/`ustack()` would record, at most
    /// [`STACKDEPTH_MAX`]) and `caller`/`ucaller` (the second frame of that stack: the return
    /// address into the function that called the probed one; 0 when there is none) into R0,
    /// from `bpf_get_stack`.
    fn stack_builtin(&mut self, b: Builtin, span: Span) -> Res<()> {
        let user = matches!(b, Builtin::Ucaller | Builtin::Ustackdepth);
        let depth = matches!(b, Builtin::Stackdepth | Builtin::Ustackdepth);
        let frames = if depth { STACKDEPTH_MAX } else { 2 };
        let buf = self.scratch(frames * 8, span)?;
        if !depth {
            self.zero(buf, 16);
        }
        let a = &mut self.asm;
        a.mov(R1, R6);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, buf as i32);
        a.mov_imm(R3, (frames * 8) as i64);
        a.mov_imm(R4, if user { 256 } else { 0 });
        a.call(helper::GET_STACK);
        if depth {
            let ok = a.label();
            a.jmp_imm(Cond::SGe, R0, 0, ok);
            a.mov_imm(R0, 0);
            a.bind(ok);
            a.alu_imm(Alu::Rsh, R0, 3);
        } else {
            a.ldx(Size::DW, R0, R7, (buf + 8) as i16);
        }
        Ok(())
    }

    pub(super) fn builtin_int(&mut self, b: Builtin, span: Span) -> Res<()> {
        let syscall = self.is_syscall();
        let a = &mut self.asm;
        match b {
            Builtin::Pid => {
                a.call(helper::GET_CURRENT_PID_TGID);
                a.alu_imm(Alu::Rsh, R0, 32);
            }
            Builtin::Tid => {
                a.call(helper::GET_CURRENT_PID_TGID);
                a.zext(R0, 32);
            }
            Builtin::Uid => {
                a.call(helper::GET_CURRENT_UID_GID);
                a.zext(R0, 32);
            }
            Builtin::Gid => {
                a.call(helper::GET_CURRENT_UID_GID);
                a.alu_imm(Alu::Rsh, R0, 32);
            }
            Builtin::Cpu => a.call(helper::GET_SMP_PROCESSOR_ID),
            Builtin::Timestamp => a.call(helper::KTIME_GET_NS),
            Builtin::Walltimestamp => {
                a.call(helper::KTIME_GET_NS);
                a.mov_imm(R1, self.b.opts.wall_offset_ns);
                a.alu(Alu::Add, R0, R1);
            }
            Builtin::Curthread => a.call(helper::GET_CURRENT_TASK),
            Builtin::Arg(n) => {
                if let GroupKey::Profile(..) = self.group {
                    return self.profile_arg(n);
                }
                return self.arg(n, span);
            }
            Builtin::Errno => {
                if self.group == GroupKey::SysExit {
                    // errno = -ret when ret is in [-4095, -1], else 0.
                    let zero = a.label();
                    let done = a.label();
                    a.ldx(Size::DW, R0, R6, 8);
                    a.jmp_imm(Cond::SGe, R0, 0, zero);
                    a.jmp_imm(Cond::SLt, R0, -4095, zero);
                    a.alu_imm(Alu::Neg, R0, 0);
                    a.ja(done);
                    a.bind(zero);
                    a.mov_imm(R0, 0);
                    a.bind(done);
                } else {
                    a.mov_imm(R0, 0);
                }
            }
            Builtin::Epid => a.mov_imm(R0, self.clause as i64 + 1),
            Builtin::Id => {
                if syscall {
                    a.ldx(Size::DW, R0, R10, SLOT_NR);
                } else if matches!(self.group, GroupKey::UprobeMulti(..)) {
                    // The display id is the attach cookie's high half.
                    a.mov(R1, R6);
                    a.call(helper::GET_ATTACH_COOKIE);
                    a.alu_imm(Alu::Rsh, R0, 32);
                } else {
                    // The clause's (first) probe in this program.
                    let id = match (self.b.opts.probe_id, self.probes.first()) {
                        (Some(f), Some(p)) => f(&p.full_name()),
                        _ => 0,
                    };
                    let a = &mut self.asm;
                    a.mov_imm(R0, i64::from(id));
                }
            }
            Builtin::Ppid | Builtin::Vtimestamp if self.b.opts.task.is_some() => {
                let t = self.b.opts.task.expect("checked");
                let s = self.slot(span)?;
                // Reads `size` bytes at `R3` into slot `s` (zeroed first), leaving them in R0.
                let read = |a: &mut Asm, size: i64| {
                    a.st_imm(Size::DW, R10, s, 0);
                    a.mov(R1, R10);
                    a.alu_imm(Alu::Add, R1, s as i32);
                    a.mov_imm(R2, size);
                    a.call(helper::PROBE_READ_KERNEL);
                    a.ldx(Size::DW, R0, R10, s);
                };
                let a = &mut self.asm;
                a.call(helper::GET_CURRENT_TASK);
                if b == Builtin::Ppid {
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.real_parent as i32);
                    read(a, 8);
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.tgid as i32);
                    read(a, 4);
                    a.movsx(R0, R0, 32);
                } else {
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.sum_exec_runtime as i32);
                    read(a, 8);
                }
            }
            Builtin::Ppid | Builtin::Vtimestamp => return self.err(span, NEEDS_TASK_OFFSETS),
            Builtin::Caller | Builtin::Ucaller | Builtin::Stackdepth | Builtin::Ustackdepth => {
                self.stack_builtin(b, span)?;
            }
            Builtin::Execname
            | Builtin::Probeprov
            | Builtin::Probemod
            | Builtin::Probefunc
            | Builtin::Probename => {
                return self.err(span, "internal: string built-in in integer context");
            }
        }
        Ok(())
    }

    /// profile probes: arg0 = kernel PC (0 in user mode), arg1 = user PC (0 in kernel mode), from
    /// the `struct pt_regs` at the start of `bpf_perf_event_data`.
    pub(super) fn profile_arg(&mut self, n: u8) -> Res<()> {
        let a = &mut self.asm;
        if n > 1 {
            a.mov_imm(R0, 0);
            return Ok(());
        }
        let zero = a.label();
        let done = a.label();
        a.ldx(Size::DW, R1, R6, pt_regs::CS);
        a.alu_imm(Alu::And, R1, 3);
        // user mode when (cs & 3) == 3
        if n == 0 {
            a.jmp_imm(Cond::Eq, R1, 3, zero);
        } else {
            a.jmp_imm(Cond::Ne, R1, 3, zero);
        }
        a.ldx(Size::DW, R0, R6, pt_regs::IP);
        a.ja(done);
        a.bind(zero);
        a.mov_imm(R0, 0);
        a.bind(done);
        Ok(())
    }

    pub(super) fn tp_field(&self, name: &str, span: Span) -> Res<probe_sema::TpField> {
        for p in &self.probes {
            if let Some(f) = p.args.field(name) {
                return Ok(f.clone());
            }
        }
        self.err(span, format!("no tracepoint field `{name}` at this probe"))
    }

    /// `args->name` at `syscall::NAME:entry`: the system call argument the field stands for (its
    /// position in tracefs `syscalls/sys_enter_NAME/format` after `__syscall_nr`), read from the
    /// saved user registers like `argN`. The raw `sys_enter` context is only `{regs, nr}`: reading
    /// the field's tracepoint-record offset from it makes `BPF_RAW_TRACEPOINT_OPEN` fail with
    /// EINVAL (the program's context accesses exceed the tracepoint's arguments). When the
    /// clause's system calls have the field at different positions, the position is chosen by the
    /// system call number at run time. Result in R0.
    pub(super) fn syscall_field(&mut self, name: &str, span: Span) -> Res<()> {
        // (argument index, system call numbers having the field there)
        let mut at: Vec<(u8, Vec<u32>)> = Vec::new();
        for p in &self.probes {
            let (ProbeArgs::SyscallEntry { args, .. }, ProbeKind::Syscall { nr, .. }) =
                (&p.args, &p.kind)
            else {
                return self.err(
                    span,
                    format!("probe {} has no named arguments (args->)", p.full_name()),
                );
            };
            let Some(i) = args.iter().position(|f| f.name == name) else {
                return self.err(span, format!("{} has no argument `{name}`", p.full_name()));
            };
            let i = u8::try_from(i).ok().filter(|&i| i < 6);
            let Some(i) = i else {
                return self.err(
                    span,
                    format!(
                        "argument `{name}` of {} is not in a register",
                        p.full_name()
                    ),
                );
            };
            match at.iter_mut().find(|(j, _)| *j == i) {
                Some((_, nrs)) => nrs.push(*nr),
                None => at.push((i, vec![*nr])),
            }
        }
        let Some(((last, _), rest)) = at.split_last() else {
            return self.err(
                span,
                format!("no system call argument `{name}` at this probe"),
            );
        };
        let (last, rest) = (*last, rest.to_vec());
        let done = self.asm.label();
        for (i, nrs) in &rest {
            let next = self.asm.label();
            let here = self.asm.label();
            self.asm.ldx(Size::DW, R0, R10, SLOT_NR);
            for nr in nrs {
                self.asm.jmp_imm(Cond::Eq, R0, *nr as i32, here);
            }
            self.asm.ja(next);
            self.asm.bind(here);
            self.arg(*i, span)?;
            self.asm.ja(done);
            self.asm.bind(next);
        }
        self.arg(last, span)?;
        self.asm.bind(done);
        Ok(())
    }
}

/// Where [`usdt_operand`] left a USDT argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UsdtOperand {
    /// The value is in `R0` (not yet truncated to the argument's size).
    Value,
    /// The argument's user-space address is in `R3`; the caller reads `spec.size` bytes there.
    Address,
}

/// Emits the code that locates a USDT argument, the context (`struct pt_regs *`) in `R6`, as
/// [`ArgSpec::eval`] specifies: a register is loaded from its `pt_regs` slot and shifted down for
/// the high-byte registers (`%ah` is byte 1 of `rax`); a memory operand's address is
/// `base + index * scale + disp`. Clobbers `R0`, `R1`, `R3`.
///
/// # Errors
/// The reason, for a static operand that [`ArgSpec::at_site`] did not make `%rip`-relative (its
/// address would need the module's load bias).
fn usdt_operand(a: &mut Asm, spec: &ArgSpec) -> Result<UsdtOperand, &'static str> {
    let slot = |r: UReg| r.pt_regs_offset() as i16;
    match &spec.loc {
        ArgLocation::Immediate(v) => {
            a.mov_imm(R0, *v);
            Ok(UsdtOperand::Value)
        }
        ArgLocation::Register { reg, byte } => {
            a.ldx(Size::DW, R0, R6, slot(*reg));
            if *byte > 0 {
                a.alu_imm(Alu::Rsh, R0, 8 * i32::from(*byte));
            }
            Ok(UsdtOperand::Value)
        }
        ArgLocation::Memory { base, index, disp } => {
            match base {
                Some(b) => a.ldx(Size::DW, R3, R6, slot(*b)),
                None => a.mov_imm(R3, 0),
            }
            if let Some((i, scale)) = index {
                a.ldx(Size::DW, R1, R6, slot(*i));
                a.alu_imm(Alu::Mul, R1, i32::from(*scale));
                a.alu(Alu::Add, R3, R1);
            }
            if *disp != 0 {
                a.mov_imm(R1, *disp);
                a.alu(Alu::Add, R3, R1);
            }
            Ok(UsdtOperand::Address)
        }
        ArgLocation::Static { .. } => Err("its address is not relative to the probe site"),
    }
}

#[cfg(test)]
mod tests {
    use probe_sema::argspec::VirtAddr;

    use super::*;

    /// Runs the straight-line code [`usdt_operand`] emits over a `struct pt_regs` (`regs`, by byte
    /// offset) and returns `R0` for a value or `R3` for an address, truncated and extended as the
    /// caller's `normalize` does for a value.
    fn run_operand(spec: &ArgSpec, regs: &dyn Fn(i16) -> u64) -> (UsdtOperand, u64) {
        let mut a = Asm::new();
        let kind = usdt_operand(&mut a, spec).expect("supported");
        let (insns, _) = a.finish();
        let mut r = [0u64; 11];
        let mut pc = 0;
        while pc < insns.len() {
            let i = insns[pc];
            let (d, s) = (i.dst as usize, i.src as usize);
            let imm = i.imm as i64 as u64;
            match i.code {
                0x79 => {
                    assert_eq!(s, 6, "loads only from the context");
                    r[d] = regs(i.off);
                }
                0xb7 => r[d] = imm,
                0x18 => {
                    r[d] = (i.imm as u32 as u64) | ((insns[pc + 1].imm as u32 as u64) << 32);
                    pc += 1;
                }
                0x77 => r[d] >>= imm,
                0x27 => r[d] = r[d].wrapping_mul(imm),
                0x0f => r[d] = r[d].wrapping_add(r[s]),
                c => panic!("unexpected opcode {c:#x} for {spec}"),
            }
            pc += 1;
        }
        match kind {
            UsdtOperand::Value => (
                kind,
                probe_sema::argspec::extend(r[0], spec.size, spec.signed) as u64,
            ),
            UsdtOperand::Address => (kind, r[3]),
        }
    }

    /// Issue 21: `%ah`-style high-byte registers (and every other operand form) are read as
    /// [`ArgSpec::eval`] specifies, from the typed spec (no text round-trip).
    #[test]
    fn usdt_operands_match_argspec_eval() {
        let reg_val = |r: UReg| 0x1111_0000_0000_0000u64 | (u64::from(r.dwarf()) << 16) | 0x9a80;
        let by_offset = |off: i16| {
            let all = [
                UReg::Rax,
                UReg::Rbx,
                UReg::Rcx,
                UReg::Rdx,
                UReg::Rsi,
                UReg::Rdi,
                UReg::Rbp,
                UReg::Rsp,
                UReg::R8,
                UReg::R12,
                UReg::Rip,
            ];
            let r = all
                .into_iter()
                .find(|r| r.pt_regs_offset() as i16 == off)
                .unwrap_or_else(|| panic!("no register at pt_regs offset {off}"));
            reg_val(r)
        };
        for text in [
            "1@%ah",
            "-1@%ah",
            "1@%bh",
            "-1@%ch",
            "1@%dh",
            "-4@%eax",
            "8@%rbx",
            "2@%r12w",
            "-1@%sil",
            "8@$42",
            "-4@$-5",
            "8@$0x123456789",
        ] {
            let spec = ArgSpec::parse(text).unwrap();
            let want = spec.eval(reg_val, |_, _| None, 0).unwrap() as u64;
            assert_eq!(
                run_operand(&spec, &by_offset),
                (UsdtOperand::Value, want),
                "{text}"
            );
        }
        for text in ["8@-16(%rbp)", "4@8(%rdi,%r12,4)", "4@(,%rcx,8)", "2@(%rsp)"] {
            let spec = ArgSpec::parse(text).unwrap();
            let seen = std::cell::Cell::new(None);
            spec.eval(
                reg_val,
                |addr, size| {
                    seen.set(Some((addr, size)));
                    Some(0)
                },
                0,
            );
            let (addr, size) = seen.get().expect("a memory read");
            assert_eq!(size, spec.size);
            assert_eq!(
                run_operand(&spec, &by_offset),
                (UsdtOperand::Address, addr),
                "{text}"
            );
        }
        // A static operand reads through %rip once made site-relative; not before.
        let mut spec = ArgSpec::parse("8@counter+8(%rip)").unwrap();
        spec.resolve(|_| Some(VirtAddr(0x4000))).unwrap();
        assert!(usdt_operand(&mut Asm::new(), &spec).is_err());
        let site = spec.at_site(VirtAddr(0x1000));
        let (kind, addr) = run_operand(&site, &by_offset);
        assert_eq!(kind, UsdtOperand::Address);
        assert_eq!(addr, reg_val(UReg::Rip).wrapping_add(0x3008));
    }
}
