//! Statements and actions: what each action records and how.

use super::*;

impl ProgGen<'_, '_> {
    pub(super) fn stmt(&mut self, s: &TStmt) -> Res<()> {
        let mark = (self.stack_next, self.scratch_next);
        match s {
            TStmt::Expr(e) => {
                if e.ty.is_string() {
                    if let TExprKind::Assign(..) = e.kind {
                        self.assign(e)?;
                    } else {
                        let off = self.scratch(self.strsize(), e.span)?;
                        self.string(e, off)?;
                    }
                } else {
                    self.int(e)?;
                }
            }
            TStmt::If { cond, then, els } => {
                self.int(cond)?;
                let else_l = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, else_l);
                for s in then {
                    self.stmt(s)?;
                }
                self.asm.ja(done);
                self.asm.bind(else_l);
                for s in els {
                    self.stmt(s)?;
                }
                self.asm.bind(done);
            }
            TStmt::Aggregate {
                agg,
                keys,
                value,
                incr,
                span,
            } => self.aggregate(agg.0 as usize, keys, value.as_ref(), incr.as_ref(), *span)?,
            TStmt::Action(a, span) => self.action(a, *span)?,
        }
        self.stack_next = mark.0;
        self.scratch_next = mark.1.max(self.pinned);
        Ok(())
    }

    /// The record part of an action: what it does in user space and its fields. `None` for
    /// actions that record nothing (none today) or are rejected in [`Self::action`].
    fn action_shape(&self, a: &Action) -> Option<(RecordAction, Vec<FieldKind>)> {
        let ss = self.strsize();
        Some(match a {
            Action::Trace(e) => (RecordAction::Trace, vec![trace_kind(&e.ty, ss)]),
            Action::Tracemem { size, .. } => {
                (RecordAction::Trace, vec![FieldKind::Bytes { len: *size }])
            }
            Action::Setopt { .. } => (
                RecordAction::Setopt,
                vec![
                    FieldKind::Str { len: ss },
                    FieldKind::Str { len: ss },
                    FieldKind::Int {
                        bytes: 1,
                        signed: false,
                    },
                ],
            ),
            Action::Print { ty, size, .. } => (
                RecordAction::Print { ty: ty.clone() },
                vec![
                    FieldKind::Int {
                        bytes: 8,
                        signed: false,
                    },
                    FieldKind::Bytes { len: *size },
                ],
            ),
            Action::Printf { format, args } => (
                RecordAction::Printf {
                    format: format.clone(),
                },
                printf_kinds(format, args, ss),
            ),
            Action::Stop => (
                RecordAction::Stop,
                vec![FieldKind::Int {
                    bytes: 4,
                    signed: false,
                }],
            ),
            Action::System { format, args } => (
                RecordAction::System {
                    format: format.clone(),
                },
                args.iter().map(|e| value_kind(&e.ty, ss)).collect(),
            ),
            Action::Exit(_) => (
                RecordAction::Exit,
                vec![FieldKind::Int {
                    bytes: 4,
                    signed: true,
                }],
            ),
            Action::Printa { format, aggs } => (
                RecordAction::Printa {
                    format: format.clone(),
                    aggs: aggs.iter().map(|a| a.0 as usize).collect(),
                },
                vec![],
            ),
            Action::Clear(agg) => (
                RecordAction::Clear {
                    agg: agg.0 as usize,
                },
                vec![],
            ),
            Action::Trunc { agg, keep } => {
                let keep = match keep {
                    None => None,
                    Some(e) => Some(self.const_int(e)?),
                };
                (
                    RecordAction::Trunc {
                        agg: agg.0 as usize,
                        keep,
                    },
                    vec![],
                )
            }
            Action::Normalize { agg, factor } => (
                RecordAction::Normalize {
                    agg: agg.0 as usize,
                    factor: Some(self.const_int(factor)?),
                },
                vec![],
            ),
            Action::Denormalize(agg) => (
                RecordAction::Normalize {
                    agg: agg.0 as usize,
                    factor: None,
                },
                vec![],
            ),
            Action::Speculate(_) | Action::Commit(_) | Action::Discard(_) => {
                let action = match a {
                    Action::Speculate(_) => RecordAction::Speculate,
                    Action::Commit(_) => RecordAction::Commit,
                    _ => RecordAction::Discard,
                };
                let word = FieldKind::Int {
                    bytes: 8,
                    signed: false,
                };
                (action, vec![word.clone(), word])
            }
            _ => return None,
        })
    }

    pub(super) fn collect_actions(
        &self,
        body: &[TStmt],
        out: &mut Vec<(RecordAction, Vec<FieldKind>)>,
    ) {
        for s in body {
            match s {
                TStmt::Action(a, _) => {
                    if let Some(shape) = self.action_shape(a) {
                        out.push(shape);
                    }
                }
                TStmt::If { then, els, .. } => {
                    self.collect_actions(then, out);
                    self.collect_actions(els, out);
                }
                _ => {}
            }
        }
    }

    fn action(&mut self, a: &Action, span: Span) -> Res<()> {
        match a {
            Action::Raise(_) | Action::Stop
                if matches!(
                    self.group,
                    GroupKey::Begin | GroupKey::End | GroupKey::Error
                ) =>
            {
                // These run in sightline's own thread (BPF_PROG_TEST_RUN).
                return self.err(
                    span,
                    "raise() and stop() in BEGIN, END or ERROR would signal sightline itself",
                );
            }
            Action::Raise(sig) => {
                // bpf_send_signal: the current process (the one that fired the probe).
                self.int(sig)?;
                self.asm.mov(R1, R0);
                self.asm.call(helper::SEND_SIGNAL);
                return Ok(());
            }
            Action::Stop => {}
            Action::Chill(ns) => return self.chill(ns, span),
            Action::Copyout { buf, addr, size } => return self.copyout(buf, addr, *size, span),
            Action::Copyoutstr { s, addr, maxlen } => {
                return self.copyoutstr(s, addr, maxlen, span);
            }
            Action::Trunc { keep: Some(e), .. } if self.const_int(e).is_none() => {
                return self.err(e.span, "trunc() needs a constant count");
            }
            Action::Normalize { factor, .. } if self.const_int(factor).is_none() => {
                return self.err(factor.span, "normalize() needs a constant factor");
            }
            _ => {}
        }
        let offs = self.next_section(span)?;
        match a {
            Action::Trace(e) => match trace_kind(&e.ty, self.strsize()) {
                FieldKind::Bytes { len } => self.store_struct_bytes(e, len, offs[0], span)?,
                k => self.store_value(e, &k, offs[0])?,
            },
            Action::Tracemem { addr, size } => {
                let len = *size;
                self.zero(offs[0], (len + 7) & !7);
                if len > 0 {
                    let slot = self.slot(span)?;
                    self.int(addr)?;
                    self.asm.stx(Size::DW, R10, slot, R0);
                    let a = &mut self.asm;
                    a.mov(R1, R7);
                    a.alu_imm(Alu::Add, R1, offs[0] as i32);
                    a.mov_imm(R2, len as i64);
                    a.ldx(Size::DW, R3, R10, slot);
                    self.call_or_fault(helper::PROBE_READ_KERNEL, slot, span)?;
                }
            }
            Action::Print { addr, size, .. } => {
                // The address, then the pointee's bytes (probe_read_kernel zeroes them when the
                // read faults; the fault is reported as DTrace's ERROR).
                let slot = self.slot(span)?;
                self.int(addr)?;
                self.asm.stx(Size::DW, R10, slot, R0);
                self.asm.stx(Size::DW, R7, offs[0] as i16, R0);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, offs[1] as i32);
                a.mov_imm(R2, i64::from(*size));
                a.ldx(Size::DW, R3, R10, slot);
                self.call_or_fault(helper::PROBE_READ_KERNEL, slot, span)?;
            }
            Action::Printf { format, args } => {
                // The kinds the layout gave (a `%A` argument is a user address with its pid).
                let kinds = printf_kinds(format, args, self.strsize());
                for ((e, k), off) in args.iter().zip(&kinds).zip(&offs) {
                    self.store_value(e, k, *off)?;
                }
            }
            Action::Setopt { name, value } => {
                let k = FieldKind::Str {
                    len: self.strsize(),
                };
                self.store_value(name, &k, offs[0])?;
                match value {
                    Some(v) => {
                        self.store_value(v, &k, offs[1])?;
                        self.asm.st_imm(Size::DW, R7, offs[2] as i16, 1);
                    }
                    None => {
                        self.zero(offs[1], self.strsize().div_ceil(8) * 8);
                        self.asm.st_imm(Size::DW, R7, offs[2] as i16, 0);
                    }
                }
            }
            Action::System { args, .. } => {
                for (e, off) in args.iter().zip(&offs) {
                    let k = value_kind(&e.ty, self.strsize());
                    self.store_value(e, &k, *off)?;
                }
            }
            Action::Exit(e) => {
                self.int(e)?;
                self.asm.stx(Size::DW, R7, offs[0] as i16, R0);
            }
            Action::Stop => {
                // The process's pid in the record (the consumer resumes it when tracing ends),
                // then SIGSTOP to it.
                let a = &mut self.asm;
                a.call(helper::GET_CURRENT_PID_TGID);
                a.alu_imm(Alu::Rsh, R0, 32);
                a.stx(Size::W, R7, offs[0] as i16, R0);
                a.mov_imm(R1, 19);
                a.call(helper::SEND_SIGNAL);
            }
            Action::Speculate(id) => self.spec_action(SpecAction::Speculate, id, &offs, span)?,
            Action::Commit(id) => self.spec_action(SpecAction::Commit, id, &offs, span)?,
            Action::Discard(id) => self.spec_action(SpecAction::Discard, id, &offs, span)?,
            _ => {}
        }
        Ok(())
    }

    fn const_int(&self, e: &TExpr) -> Option<i64> {
        match &e.kind {
            TExprKind::Int(v) => Some(*v as i64),
            TExprKind::Cast(inner) => self.const_int(inner),
            TExprKind::Unary(UnaryOp::Neg, inner) => self.const_int(inner).map(|v| -v),
            _ => None,
        }
    }
}

/// The fields of `printf(format, args...)`: each argument's [`value_kind`], except that an
/// integer given to `%a` (`%A`) is recorded as a kernel (user) address the consumer symbolizes,
/// ``module`symbol+0xoff`` (DTrace's `%a`/`%A`; the renderer prints a symbol `with_offset`).
fn printf_kinds(format: &str, args: &[TExpr], strsize: u32) -> Vec<FieldKind> {
    use probe_format::printf::{self, ArgSlot, ConvKind};
    use probe_sema::types::SymKind;
    let pieces = printf::parse(format).unwrap_or_default();
    let convs: Vec<&printf::Conversion> = printf::conversions(&pieces).collect();
    let slots = printf::arg_slots(&pieces);
    args.iter()
        .enumerate()
        .map(|(i, e)| {
            let conv = match slots.get(i) {
                Some(ArgSlot::Value { conv, .. }) => convs.get(*conv).map(|c| c.kind),
                _ => None,
            };
            match conv {
                Some(ConvKind::KernelAddr) if e.ty.is_integral() => FieldKind::Sym(SymKind::Sym),
                Some(ConvKind::UserAddr) if e.ty.is_integral() => FieldKind::Sym(SymKind::Uaddr),
                _ => value_kind(&e.ty, strsize),
            }
        })
        .collect()
}

/// The field `trace(e)` records: a struct or union value as its bytes (DTrace prints them as a
/// hex dump), anything else as [`value_kind`].
fn trace_kind(ty: &Type, strsize: u32) -> FieldKind {
    match ty {
        Type::Struct { size, .. } => FieldKind::Bytes { len: *size },
        _ => value_kind(ty, strsize),
    }
}

impl ProgGen<'_, '_> {
    /// The `len` bytes of the struct variable `e` at scratch offset `off` (zeroes for a
    /// thread-local or array element never written).
    fn store_struct_bytes(&mut self, e: &TExpr, len: u32, off: u32, span: Span) -> Res<()> {
        let TExprKind::Var(va) = &e.kind else {
            return self.err(
                span,
                "internal: trace() of a struct value that is not a variable",
            );
        };
        self.zero(off, (len + 7) & !7);
        self.var_ptr(va, false, span)?;
        let skip = self.asm.label();
        let a = &mut self.asm;
        a.jmp_imm(Cond::Eq, R0, 0, skip);
        a.mov(R3, R0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, len as i64);
        a.call(helper::PROBE_READ_KERNEL);
        a.bind(skip);
        Ok(())
    }
}
