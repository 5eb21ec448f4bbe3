//! String expressions, written NUL-padded at `R7 + off`, `strsize` bytes: literals, probe names,
//! system-call names and the string subroutines.

use super::*;

impl ProgGen<'_, '_> {
    fn string_lit(&mut self, s: &[u8], off: u32, cap: u32) {
        self.zero(off, cap);
        let n = s.len().min(cap as usize - 1);
        let mut i = 0;
        while i < n {
            let mut w = [0u8; 4];
            let take = (n - i).min(4);
            w[..take].copy_from_slice(&s[i..i + take]);
            self.asm.st_imm(
                Size::W,
                R7,
                (off as usize + i) as i16,
                i32::from_le_bytes(w),
            );
            i += 4;
        }
    }

    fn probe_string(&self, which: Builtin) -> Option<String> {
        let p = self.probes.first()?;
        let s = match which {
            Builtin::Probeprov => &p.provider,
            Builtin::Probemod => &p.module,
            Builtin::Probefunc => &p.function,
            Builtin::Probename => &p.name,
            _ => return None,
        };
        // Constant only when every probe of the clause in this program agrees.
        let all_same = self.probes.iter().all(|q| {
            let t = match which {
                Builtin::Probeprov => &q.provider,
                Builtin::Probemod => &q.module,
                Builtin::Probefunc => &q.function,
                _ => &q.name,
            };
            t == s
        });
        all_same.then(|| s.clone())
    }

    fn sysnames(&mut self) -> usize {
        if let Some(m) = self.sysnames_map {
            return m;
        }
        let m = self.b.add_map(MapSpec {
            name: "sl_sysnames".into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: SYSNAME_LEN,
            max_entries: 512,
            no_prealloc: false,
            role: MapRole::SyscallNames,
        });
        self.sysnames_map = Some(m);
        m
    }

    /// `execname` (the 16-byte `comm`, `bpf_get_current_comm`) into `cap` zeroed bytes at `off`.
    fn execname(&mut self, off: u32, cap: u32) {
        self.zero(off, cap);
        let a = &mut self.asm;
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, 16.min(cap as i64));
        a.call(helper::GET_CURRENT_COMM);
    }

    /// Writes a string whose capacity `cap` (< strsize) came from [`str_cap`]: only the forms
    /// `str_cap` sizes below strsize reach here.
    pub(super) fn string_small(&mut self, e: &TExpr, off: u32, cap: u32) -> Res<()> {
        match &e.kind {
            TExprKind::Str(s) => self.string_lit(s.as_bytes(), off, cap),
            TExprKind::Builtin(Builtin::Execname) => self.execname(off, cap),
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.string_small(t, off, cap)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.string_small(f, off, cap)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) => self.string_small(inner, off, cap)?,
            _ => return self.err(e.span, "internal: string key wider than its slot"),
        }
        Ok(())
    }

    pub(super) fn string(&mut self, e: &TExpr, off: u32) -> Res<()> {
        let ss = self.strsize();
        match &e.kind {
            TExprKind::Str(s) => self.string_lit(s.as_bytes(), off, ss),
            TExprKind::Builtin(Builtin::Execname) => self.execname(off, ss),
            TExprKind::Builtin(
                b @ (Builtin::Probeprov
                | Builtin::Probemod
                | Builtin::Probefunc
                | Builtin::Probename),
            ) => {
                if let Some(s) = self.probe_string(*b) {
                    self.string_lit(s.as_bytes(), off, ss);
                } else if *b == Builtin::Probefunc && self.is_syscall() {
                    // The name of the syscall number, from the table map.
                    self.zero(off, ss);
                    let m = self.sysnames();
                    let a = &mut self.asm;
                    let done = a.label();
                    a.ldx(Size::DW, R1, R10, SLOT_NR);
                    a.jmp_imm(Cond::Gt, R1, 511, done);
                    a.stx(Size::W, R10, SLOT_KEY, R1);
                    lookup_slot_key(a, m);
                    a.jmp_imm(Cond::Eq, R0, 0, done);
                    a.mov(R9, R0);
                    let n = SYSNAME_LEN.min(ss - 8);
                    self.copy(R7, off as i32, R9, 0, n);
                    self.asm.bind(done);
                } else if matches!(self.group, GroupKey::UprobeMulti(..)) {
                    return self.err(e.span, PER_SITE_NEEDED);
                } else {
                    return self.err(
                        e.span,
                        "this probe-name built-in differs between the clause's probes",
                    );
                }
            }
            TExprKind::TpField(name) if self.group == GroupKey::SysEnter => {
                return self.err(
                    e.span,
                    format!(
                        "system call argument `{name}` is not a string: use copyinstr(args->{name})"
                    ),
                );
            }
            TExprKind::TpField(name) => {
                let f = self.tp_field(name, e.span)?;
                self.zero(off, ss);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                if f.data_loc_string {
                    // __data_loc: u32 = offset | len << 16, relative to the record.
                    a.ldx(Size::W, R3, R6, f.offset as i16);
                    a.alu_imm(Alu::And, R3, 0xffff);
                    a.alu(Alu::Add, R3, R6);
                    a.mov_imm(R2, ss as i64);
                } else if f.array.is_some() {
                    a.mov(R3, R6);
                    a.alu_imm(Alu::Add, R3, f.offset as i32);
                    a.mov_imm(R2, (f.size + 1).min(ss) as i64);
                } else {
                    // A `char *` field: the string it points to (kernel memory).
                    a.ldx(Size::DW, R3, R6, f.offset as i16);
                    a.mov_imm(R2, ss as i64);
                }
                a.call(helper::PROBE_READ_KERNEL_STR);
            }
            TExprKind::Var(va) => {
                self.var_ptr(va, false, e.span)?;
                let z = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, z);
                self.asm.mov(R9, R0);
                self.copy(R7, off as i32, R9, 0, ss);
                self.asm.ja(done);
                self.asm.bind(z);
                self.zero(off, ss);
                self.asm.bind(done);
            }
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.string(t, off)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.string(f, off)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) if inner.ty.is_string() => self.string(inner, off)?,
            TExprKind::Assign(va, _) => {
                self.assign(e)?;
                let v = VarAccess {
                    var: va.var,
                    keys: va.keys.clone(),
                };
                let read = TExpr {
                    kind: TExprKind::Var(v),
                    ty: e.ty.clone(),
                    span: e.span,
                };
                self.string(&read, off)?;
            }
            // A typed USDT string argument (`&str`, `&CStr`, `Json<T>` in the probe's
            // `.note.sightline` note, docs/usdt.md): one note argument holding the address of
            // NUL-terminated text in the process (sightline-usdt passes a `&str` as a bounded
            // NUL-terminated copy, no length), read as `copyinstr(argN)` reads it, at most strsize.
            TExprKind::ProbeArg(n) => {
                let ptr = TExpr {
                    kind: TExprKind::ProbeArg(*n),
                    ty: Type::Int {
                        bytes: 8,
                        signed: false,
                    },
                    span: e.span,
                };
                let read = TExpr {
                    kind: TExprKind::Call(Subr::Copyinstr, vec![ptr]),
                    ty: Type::String,
                    span: e.span,
                };
                self.string(&read, off)?;
            }
            TExprKind::Call(Subr::Copyinstr, args) => {
                let addr = self.slot(e.span)?;
                let len = self.slot(e.span)?;
                self.int(&args[0])?;
                self.asm.stx(Size::DW, R10, addr, R0);
                if let Some(m) = args.get(1) {
                    self.int(m)?;
                    self.asm.alu_imm(Alu::Add, R0, 1);
                } else {
                    self.asm.mov_imm(R0, ss as i64);
                }
                self.asm.stx(Size::DW, R10, len, R0);
                self.zero(off, ss);
                let a = &mut self.asm;
                a.ldx(Size::DW, R2, R10, len);
                let clamp = a.label();
                let ok_len = a.label();
                a.jmp_imm(Cond::Gt, R2, ss as i32, clamp);
                a.jmp_imm(Cond::Ge, R2, 1, ok_len);
                a.bind(clamp);
                a.mov_imm(R2, ss as i64);
                a.bind(ok_len);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.ldx(Size::DW, R3, R10, addr);
                self.call_or_fault(helper::PROBE_READ_USER_STR, addr, e.span)?;
            }
            TExprKind::Call(Subr::Stringof, args) | TExprKind::Call(Subr::Strjoin, args)
                if args.is_empty() =>
            {
                return self.err(e.span, "internal: subroutine without arguments");
            }
            TExprKind::Call(Subr::Stringof, args) => {
                let arg = &args[0];
                if arg.ty.is_string() {
                    self.string(arg, off)?;
                } else {
                    // A kernel `char *`: read the string it points to.
                    let addr = self.slot(e.span)?;
                    self.int(arg)?;
                    self.asm.stx(Size::DW, R10, addr, R0);
                    self.zero(off, ss);
                    let a = &mut self.asm;
                    a.mov(R1, R7);
                    a.alu_imm(Alu::Add, R1, off as i32);
                    a.mov_imm(R2, ss as i64);
                    a.ldx(Size::DW, R3, R10, addr);
                    self.call_or_fault(helper::PROBE_READ_KERNEL_STR, addr, e.span)?;
                }
            }
            TExprKind::Call(Subr::Strjoin, args) if args.len() == 2 => {
                // a, then b after a's NUL, truncated to strsize - 1 bytes. The copies are
                // bpf_probe_read_kernel_str from our own scratch memory: bounded, loop-free code
                // (a byte loop makes the verifier walk every length combination).
                let ta = self.scratch(ss, e.span)?;
                self.string(&args[0], ta)?;
                let tb = self.scratch(ss, e.span)?;
                self.string(&args[1], tb)?;
                let tmp = self.scratch(2 * ss, e.span)?;
                self.zero(tmp, 2 * ss);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.mov_imm(R2, ss as i64);
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, ta as i32);
                a.call(helper::PROBE_READ_KERNEL_STR);
                // len(a) = r0 - 1, kept in [0, ss - 1] so the verifier sees the bound.
                let (ok1, ok2) = (a.label(), a.label());
                a.alu_imm(Alu::Sub, R0, 1);
                a.jmp_imm(Cond::SGe, R0, 0, ok1);
                a.mov_imm(R0, 0);
                a.bind(ok1);
                a.jmp_imm(Cond::Le, R0, (ss - 1) as i32, ok2);
                a.mov_imm(R0, (ss - 1) as i64);
                a.bind(ok2);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.alu(Alu::Add, R1, R0);
                a.mov_imm(R2, ss as i64);
                a.alu(Alu::Sub, R2, R0); // room left, NUL included: ss - len >= 1
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, tb as i32);
                a.call(helper::PROBE_READ_KERNEL_STR);
                self.copy(R7, off as i32, R7, tmp as i32, ss);
            }
            TExprKind::Call(Subr::Lltostr, args) if args.len() == 2 => {
                let TExprKind::Int(base) = args[1].kind else {
                    return self.err(e.span, "internal: lltostr() base");
                };
                self.lltostr_base(&args[0], base as u32, off, e.span)?;
            }
            TExprKind::Call(Subr::Lltostr, args) if !args.is_empty() => {
                // Decimal digits written backwards into a 24-byte buffer, then copied out.
                let vslot = self.slot(e.span)?;
                self.int(&args[0])?;
                self.asm.stx(Size::DW, R10, vslot, R0);
                let tmp = self.scratch(24, e.span)?;
                self.zero(tmp, 24);
                self.zero(off, ss);
                let a = &mut self.asm;
                let (pos, digits_done) = (a.label(), a.label());
                a.ldx(Size::DW, R0, R10, vslot);
                a.jmp_imm(Cond::SGe, R0, 0, pos);
                a.alu_imm(Alu::Neg, R0, 0);
                a.bind(pos);
                // R0 = |v| (unsigned), R5 = index of the first digit.
                for k in 0..20i32 {
                    a.mov(R1, R0);
                    a.alu_imm(Alu::Mod, R1, 10);
                    a.alu_imm(Alu::Add, R1, b'0' as i32);
                    a.stx(Size::B, R7, (tmp as i32 + 22 - k) as i16, R1);
                    a.alu_imm(Alu::Div, R0, 10);
                    a.mov_imm(R5, (22 - k) as i64);
                    a.jmp_imm(Cond::Eq, R0, 0, digits_done);
                }
                a.bind(digits_done);
                let nonneg = a.label();
                a.ldx(Size::DW, R0, R10, vslot);
                a.jmp_imm(Cond::SGe, R0, 0, nonneg);
                a.alu_imm(Alu::Sub, R5, 1);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.alu(Alu::Add, R1, R5);
                a.st_imm(Size::B, R1, 0, b'-' as i32);
                a.bind(nonneg);
                // Copy tmp[R5..] (NUL-terminated at tmp[23]) to the destination.
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.mov_imm(R2, 24.min(ss as i64));
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, tmp as i32);
                a.alu(Alu::Add, R3, R5);
                a.call(helper::PROBE_READ_KERNEL_STR);
            }
            TExprKind::Call(Subr::InetNtoa, args) if args.len() == 1 => {
                self.inet(inet::Inet::V4, args, off, e.span)?
            }
            TExprKind::Call(Subr::InetNtoa6, args) if !args.is_empty() => {
                self.inet(inet::Inet::V6, args, off, e.span)?
            }
            TExprKind::Call(Subr::InetNtop, args) if args.len() == 2 => {
                self.inet(inet::Inet::Ntop, args, off, e.span)?
            }
            TExprKind::Call(Subr::Strtok, args) if args.len() == 2 => {
                self.strtok(args, off, e.span)?
            }
            TExprKind::Call(Subr::Toupper, args) if args.len() == 1 => {
                self.change_case(&args[0], true, off, e.span)?
            }
            TExprKind::Call(Subr::Tolower, args) if args.len() == 1 => {
                self.change_case(&args[0], false, off, e.span)?
            }
            TExprKind::Call(Subr::Basename, args) if args.len() == 1 => {
                self.basename_dirname(&args[0], false, off, e.span)?
            }
            TExprKind::Call(Subr::Dirname, args) if args.len() == 1 => {
                self.basename_dirname(&args[0], true, off, e.span)?
            }
            TExprKind::Call(Subr::Substr, args) if args.len() >= 2 => {
                self.substr(args, off, e.span)?
            }
            TExprKind::Call(Subr::Strchr, args) if args.len() == 2 => {
                self.strchr(args, false, off, e.span)?
            }
            TExprKind::Call(Subr::Strrchr, args) if args.len() == 2 => {
                self.strchr(args, true, off, e.span)?
            }
            TExprKind::Call(Subr::Strstr, args) if args.len() == 2 => {
                let (s, w) = self.search(Search::Strstr, args, e.span)?;
                self.suffix_at(s, w, off);
            }
            TExprKind::Call(subr, _) => {
                return self.err(
                    e.span,
                    format!("subroutine {subr:?} is not supported by sightline yet").to_lowercase(),
                );
            }
            _ => {
                return self.err(
                    e.span,
                    "this string expression is not supported by sightline yet",
                );
            }
        }
        Ok(())
    }
}
