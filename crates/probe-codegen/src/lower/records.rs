//! Records: ring-buffer record layouts, headers, sections, stored values and faults (the layouts
//! are documented in `docs/probe-internals.md`).

use super::*;

impl ProgGen<'_, '_> {
    /// Registers a record layout for `actions` and returns (record id, size, per-action field
    /// offsets relative to the record start).
    pub(super) fn record_layout(
        &mut self,
        actions: Vec<(RecordAction, Vec<FieldKind>)>,
    ) -> (u32, u32, Vec<Vec<u32>>) {
        let mut size = RECORD_HEADER;
        let mut recs = Vec::new();
        let mut offs = Vec::new();
        for (action, kinds) in actions {
            let mut fields = Vec::new();
            let mut o = Vec::new();
            for k in kinds {
                o.push(size);
                fields.push(Field {
                    offset: size,
                    kind: k.clone(),
                });
                size += k.size();
            }
            recs.push(ActionRec { action, fields });
            offs.push(o);
        }
        let id = self.b.layout.records.len() as u32;
        self.b.layout.records.push(RecordDesc {
            clause: self.clause,
            program: self.prog_index,
            actions: recs,
            size,
        });
        (id, size, offs)
    }

    /// Writes the record header at scratch `base` (mask 0).
    pub(super) fn write_header(&mut self, base: u32, id: u32) {
        let a = &mut self.asm;
        a.st_imm(Size::W, R7, base as i16, id as i32);
        a.call(helper::GET_SMP_PROCESSOR_ID);
        a.stx(Size::W, R7, (base + 4) as i16, R0);
        a.ldx(Size::DW, R0, R10, SLOT_NR);
        a.stx(Size::DW, R7, (base + 8) as i16, R0);
        a.st_imm(Size::DW, R7, (base + 16) as i16, 0);
        a.call(helper::KTIME_GET_NS);
        a.stx(Size::DW, R7, (base + 24) as i16, R0);
    }

    /// Sends `size` bytes at scratch `base` to the ring buffer; a full buffer counts a drop.
    /// Under the kernel ring ([`KernelRing`]), a probe-fired program's record goes into this
    /// CPU's next ring slot instead; under its fill policy, END's records too.
    pub(super) fn submit(&mut self, base: u32, size: u32) {
        let bypass_from = (self.b.prog.clauses.len()).saturating_sub(self.b.opts.ring_bypass_last);
        if let Some(ring) = self.b.ring
            && self.clause < bypass_from
            && match self.group {
                GroupKey::Begin | GroupKey::Error => false,
                GroupKey::End => ring.fill,
                _ => true,
            }
        {
            self.ring_store(ring, base, size);
            return;
        }
        let a = &mut self.asm;
        a.ld_map(R1, self.b.layout.ringbuf);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, base as i32);
        a.mov_imm(R3, size as i64);
        a.mov_imm(R4, 0);
        a.call(helper::RINGBUF_OUTPUT);
        let ok = a.label();
        a.jmp_imm(Cond::SGe, R0, 0, ok);
        self.stat_inc(Stat::RecordDrops);
        self.asm.bind(ok);
    }

    /// Copies `size` bytes at scratch `base` into slot `head % slots` of this CPU's ring and
    /// counts the record in its head (one CPU's programs do not run concurrently but for a
    /// perf-event program interrupting another; such a pair may share a slot). Under the fill
    /// policy ([`KernelRing::fill`]) the slot is `head` itself while `head` is below the
    /// program's limit (END: every slot; the others: [`KernelRing::probe_slots`]); at the
    /// limit the record is dropped, counted, and the CPU's [`Stat::BufferFull`] set.
    fn ring_store(&mut self, ring: KernelRing, base: u32, size: u32) {
        let limit = match (ring.fill, &self.group) {
            (false, _) => None,
            (true, GroupKey::End) => Some(ring.slots),
            (true, _) => Some(ring.probe_slots),
        };
        let a = &mut self.asm;
        let done = a.label();
        let full = a.label();
        a.call(helper::GET_SMP_PROCESSOR_ID);
        a.alu_imm(Alu::Mul, R0, ring.slots as i32);
        a.stx(Size::W, R10, SLOT_RING, R0);
        a.st_imm(Size::W, R10, SLOT_KEY, 0);
        lookup_slot_key(a, ring.head);
        a.jmp_imm(Cond::Eq, R0, 0, done);
        a.ldx(Size::DW, R1, R0, 0);
        if let Some(limit) = limit {
            a.jmp_imm(Cond::Ge, R1, limit as i32, full);
        }
        a.mov(R2, R1);
        a.alu_imm(Alu::Add, R2, 1);
        a.stx(Size::DW, R0, 0, R2);
        if limit.is_none() {
            a.alu_imm(Alu::Mod, R1, ring.slots as i32);
        }
        a.ldx(Size::W, R2, R10, SLOT_RING);
        a.alu(Alu::Add, R1, R2);
        a.stx(Size::W, R10, SLOT_RING, R1);
        a.ld_map(R1, ring.map);
        a.mov(R2, R10);
        a.alu_imm(Alu::Add, R2, SLOT_RING as i32);
        a.call(helper::MAP_LOOKUP_ELEM);
        a.jmp_imm(Cond::Eq, R0, 0, done);
        a.mov(R1, R0);
        a.mov_imm(R2, size as i64);
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, base as i32);
        a.call(helper::PROBE_READ_KERNEL);
        if limit.is_some() {
            self.asm.ja(done);
            self.asm.bind(full);
            self.stat_inc(Stat::RecordDrops);
            let a = &mut self.asm;
            a.st_imm(Size::W, R10, SLOT_KEY, Stat::BufferFull as i32);
            lookup_slot_key(a, self.b.layout.stats);
            a.jmp_imm(Cond::Eq, R0, 0, done);
            a.st_imm(Size::DW, R0, 0, 1);
        } else {
            self.asm.bind(full);
        }
        self.asm.bind(done);
    }

    /// The next action's field offsets (absolute scratch offsets), marking it executed.
    pub(super) fn next_section(&mut self, span: Span) -> Res<Vec<u32>> {
        let Some(r) = self.record.as_mut() else {
            return self.err(span, "internal: action outside a clause record");
        };
        let i = r.next;
        r.next += 1;
        let base = r.base;
        let offs: Vec<u32> = r
            .sections
            .get(i)
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|o| base + o)
            .collect();
        // mask |= 1 << i
        let a = &mut self.asm;
        a.ldx(Size::DW, R1, R7, (base + 16) as i16);
        let bit = crate::layout::action_bit(i);
        if bit < 1 << 31 {
            a.alu_imm(Alu::Or, R1, bit as i32);
        } else {
            a.mov_imm(R2, bit as i64);
            a.alu(Alu::Or, R1, R2);
        }
        a.stx(Size::DW, R7, (base + 16) as i16, R1);
        Ok(offs)
    }

    /// Writes the value of `e` (of field kind `k`) at scratch offset `off`.
    pub(super) fn store_value(&mut self, e: &TExpr, k: &FieldKind, off: u32) -> Res<()> {
        match k {
            FieldKind::Str { len } if *len < self.strsize() => self.string_small(e, off, *len),
            FieldKind::Str { .. } => self.string(e, off),
            FieldKind::Stack { user, frames } => {
                self.zero(off, k.size());
                // A user stack's process id first (DTrace's ustack record), its frames after.
                let at = if *user {
                    self.store_tgid(off);
                    off + 8
                } else {
                    off
                };
                let a = &mut self.asm;
                a.mov(R1, R6);
                a.mov(R2, R7);
                a.alu_imm(Alu::Add, R2, at as i32);
                a.mov_imm(R3, (*frames * 8) as i64);
                a.mov_imm(R4, if *user { 256 } else { 0 });
                a.call(helper::GET_STACK);
                Ok(())
            }
            FieldKind::Sym(kind) if kind.is_user() => {
                self.int(e)?;
                self.asm.stx(Size::DW, R7, off as i16, R0);
                self.store_tgid(off + 8);
                Ok(())
            }
            _ => {
                self.int(e)?;
                self.asm.stx(Size::DW, R7, off as i16, R0);
                Ok(())
            }
        }
    }

    /// Writes the current process id (the tgid, upper half of `bpf_get_current_pid_tgid`) as 8
    /// bytes at scratch offset `off`.
    fn store_tgid(&mut self, off: u32) {
        let a = &mut self.asm;
        a.call(helper::GET_CURRENT_PID_TGID);
        a.alu_imm(Alu::Rsh, R0, 32);
        a.stx(Size::DW, R7, off as i16, R0);
    }

    /// Calls the memory-reading helper `helper` (its arguments in R1..R3) and raises DTrace's
    /// invalid-address fault for the address in stack slot `addr_slot` when it fails (R0 < 0).
    pub(super) fn call_or_fault(&mut self, helper: i32, addr_slot: i16, span: Span) -> Res<()> {
        self.asm.call(helper);
        let ok = self.asm.label();
        self.asm.jmp_imm(Cond::SGe, R0, 0, ok);
        self.fault(Fault::BadAddr, Some(addr_slot), span)?;
        self.asm.bind(ok);
        Ok(())
    }

    pub(super) fn fault(&mut self, fault: Fault, addr_slot: Option<i16>, span: Span) -> Res<()> {
        let kinds = vec![
            FieldKind::Int {
                bytes: 8,
                signed: false,
            },
            FieldKind::Int {
                bytes: 8,
                signed: false,
            },
        ];
        let mark = self.scratch_next;
        let (id, size, offs) = self.record_layout(vec![(RecordAction::Error, kinds)]);
        let base = self.scratch(size, span)?;
        self.write_header(base, id);
        self.asm.st_imm(Size::DW, R7, (base + 16) as i16, 1);
        self.asm.mov_imm(R0, fault as i64);
        self.asm.stx(Size::DW, R7, (base + offs[0][0]) as i16, R0);
        match addr_slot {
            Some(s) => self.asm.ldx(Size::DW, R0, R10, s),
            None => self.asm.mov_imm(R0, 0),
        }
        self.asm.stx(Size::DW, R7, (base + offs[0][1]) as i16, R0);
        self.submit(base, size);
        self.stat_inc(Stat::Errors);
        self.scratch_next = mark;
        let end = self.clause_end.expect("inside a clause");
        self.asm.ja(end);
        Ok(())
    }
}
