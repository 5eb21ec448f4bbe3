//! Program structure: one BPF program per attach point with its prologue, each clause with its
//! predicate, the system-call number filter, and the memory helpers clauses share.

use super::*;

impl Builder<'_> {
    pub(super) fn program(
        &mut self,
        g: GroupKey,
        members: Vec<(usize, Vec<ProbeInfo>)>,
    ) -> Res<()> {
        let (kind, attach) = match &g {
            GroupKey::Begin => (ProgKind::RawTracepoint, Attach::Begin),
            GroupKey::End => (ProgKind::RawTracepoint, Attach::End),
            GroupKey::Error => (ProgKind::RawTracepoint, Attach::Error),
            GroupKey::SysEnter => (ProgKind::RawTracepoint, Attach::SysEnter),
            GroupKey::SysExit => (ProgKind::RawTracepoint, Attach::SysExit),
            GroupKey::Tracepoint(c, e) => (
                ProgKind::Tracepoint,
                Attach::Tracepoint {
                    category: c.clone(),
                    event: e.clone(),
                },
            ),
            GroupKey::Profile(p, e) => (
                ProgKind::PerfEvent,
                Attach::Profile {
                    period_ns: *p,
                    every_cpu: *e,
                },
            ),
            GroupKey::Uprobe(path, offset, ret, pid, semaphore) => (
                ProgKind::Kprobe,
                Attach::Uprobe {
                    path: path.clone(),
                    offset: *offset,
                    ret: *ret,
                    pid: *pid,
                    semaphore: *semaphore,
                },
            ),
            GroupKey::UprobeMulti(path, pid, _) => {
                let mut sites = Vec::new();
                for p in members.first().map(|m| &m.1[..]).unwrap_or(&[]) {
                    if let ProbeKind::Uprobe { offset, .. } = p.kind {
                        let full = p.full_name();
                        let shown = self.opts.probe_id.map_or(0, |f| f(&full));
                        let id = match self.probe_index.get(&full) {
                            Some(&i) => i,
                            None => {
                                self.layout.probes.push(ProbeRef { name: full.clone() });
                                self.probe_index.insert(full, self.layout.probes.len() - 1);
                                self.layout.probes.len() - 1
                            }
                        };
                        // The cookie: the probe's index (the record's probe key) in its low
                        // 32 bits, its display id (`id`) in the high ones.
                        sites.push((offset, id as u64 | (u64::from(shown) << 32)));
                    }
                }
                // An offset with two probes (`entry` and `0`) is one site: its first probe.
                sites.sort_unstable();
                sites.dedup_by_key(|s| s.0);
                (
                    ProgKind::Kprobe,
                    Attach::UprobeMulti {
                        path: path.clone(),
                        pid: *pid,
                        sites,
                    },
                )
            }
        };
        let name = match &g {
            GroupKey::Begin => "sl_begin".to_string(),
            GroupKey::End => "sl_end".into(),
            GroupKey::Error => "sl_error".into(),
            GroupKey::SysEnter => "sl_sys_enter".into(),
            GroupKey::SysExit => "sl_sys_exit".into(),
            GroupKey::Tracepoint(_, e) => format!("sl_{e}"),
            GroupKey::Profile(..) => "sl_profile".into(),
            GroupKey::Uprobe(..) | GroupKey::UprobeMulti(..) => "sl_uprobe".into(),
        };
        let scratch_map = self.add_map(MapSpec {
            name: format!("sl_scr{}", self.layout.programs.len()),
            kind: MapKind::Array,
            key_size: 4,
            value_size: 8, // fixed below once the program's use is known
            max_entries: self.opts.ncpus.max(1),
            no_prealloc: false,
            role: MapRole::Scratch,
        });
        let mut probe_ids = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (_, probes) in &members {
            for p in probes {
                let full = p.full_name();
                let id = match self.probe_index.get(&full) {
                    Some(&i) => i,
                    None => {
                        self.layout.probes.push(ProbeRef { name: full.clone() });
                        self.probe_index.insert(full, self.layout.probes.len() - 1);
                        self.layout.probes.len() - 1
                    }
                };
                if seen.insert(id) {
                    probe_ids.push(id);
                }
            }
        }
        let prog_index = self.layout.programs.len();
        let mut pg = ProgGen {
            b: self,
            prog_index,
            record: None,
            asm: Asm::new(),
            group: g.clone(),
            scratch_map,
            stack_next: SLOT_FIRST,
            scratch_next: 0,
            scratch_max: 0,
            pinned: 0,
            pin_lo: None,
            scratch_used: 0,
            clause: 0,
            clause_span: Span::new(0, 0),
            clause_end: None,
            probes: Vec::new(),
            clause_locals: BTreeMap::new(),
            zero_off: 0,
            sysnames_map: None,
            strtok_state: None,
            loop_cost: 0,
        };
        pg.prologue(&members)?;
        let mut used_maps = std::collections::HashSet::new();
        let mut refs_seen = 0;
        for (ci, probes) in &members {
            let clause = &pg.b.prog.clauses[*ci];
            pg.clause(*ci, clause, probes, &members)?;
            // Kernel limits, checked as each clause is added so the error names the one that
            // crosses them (issue 22: the loader's raw text had no location).
            used_maps.extend(pg.asm.map_refs[refs_seen..].iter().map(|r| r.map));
            refs_seen = pg.asm.map_refs.len();
            if used_maps.len() > MAX_MAPS_PER_PROGRAM {
                return Err(CodegenError {
                    clause: *ci,
                    span: clause.span,
                    message: format!(
                        "this clause makes its probe's BPF program use {} maps, above the kernel's limit of {MAX_MAPS_PER_PROGRAM} per program",
                        used_maps.len()
                    ),
                    hint: Some(
                        "each aggregation, associative array or thread-local of a different shape (key and value sizes, aggregating function and range) needs its own map: give them the same shape, use one aggregation with a key (`@a[\"x\"]`) instead of many, or spread the clauses over different probes".into(),
                    ),
                });
            }
            let branches = pg.asm.cond_jumps();
            if branches > MAX_PENDING_BRANCHES {
                return Err(CodegenError {
                    clause: *ci,
                    span: clause.span,
                    message: format!(
                        "this clause makes its probe's BPF program have {branches} conditional branches, above the verifier's limit of {MAX_PENDING_BRANCHES} pending ones"
                    ),
                    hint: Some(
                        "merge clauses (one clause can update several aggregations and variables) or spread them over different probes".into(),
                    ),
                });
            }
            let jump = pg.asm.longest_jump();
            if jump > i16::MAX as u64 {
                return Err(CodegenError {
                    clause: *ci,
                    span: clause.span,
                    message: format!(
                        "this clause compiles to a jump over {jump} BPF instructions, farther than a BPF jump reaches (32767)"
                    ),
                    hint: Some(
                        "split the clause into several clauses for the same probe (they run in order), or spread the work over different probes".into(),
                    ),
                });
            }
            let processed = pg.asm.len() as u64 + pg.loop_cost;
            if processed > MAX_PROCESSED_INSNS {
                return Err(CodegenError {
                    clause: *ci,
                    span: clause.span,
                    message: format!(
                        "this clause makes its probe's BPF program at least {processed} instructions for the verifier, above the kernel's limit of {MAX_PROCESSED_INSNS}"
                    ),
                    hint: Some(
                        "split the work over different probes, use fewer string operations, or lower strsize".into(),
                    ),
                });
            }
        }
        let out = pg.asm.label();
        pg.asm.bind(out);
        pg.asm.mov_imm(R0, 0);
        pg.asm.exit();
        if pg.asm.longest_jump() > i16::MAX as u64
            && let Some((ci, _)) = members.last()
        {
            return Err(CodegenError {
                clause: *ci,
                span: pg.b.prog.clauses[*ci].span,
                message: "the clauses of this probe compile to a program whose jumps reach farther than a BPF jump can (32767 instructions)".into(),
                hint: Some(
                    "spread the clauses over different probes, or make them smaller".into(),
                ),
            });
        }
        let scratch_size = (pg.scratch_max.max(8) + 7) & !7;
        let asm = std::mem::take(&mut pg.asm);
        drop(pg);
        self.layout.maps[scratch_map].value_size = scratch_size;
        let (insns, map_refs) = asm.finish();
        self.layout.programs.push(ProgSpec {
            name,
            kind,
            attach,
            insns,
            map_refs,
            clauses: members.iter().map(|(c, _)| *c).collect(),
            probes: probe_ids,
        });
        Ok(())
    }
}

impl ProgGen<'_, '_> {
    /// `dst = map_lookup_elem(map, &SLOT_KEY)`; returns 0 from the program when the lookup
    /// fails (it cannot for an array map's key 0 or a CPU index, but the verifier needs the check).
    fn lookup_or_return(&mut self, map: usize, dst: Reg) {
        let a = &mut self.asm;
        lookup_slot_key(a, map);
        let ok = a.label();
        a.jmp_imm(Cond::Ne, R0, 0, ok);
        a.mov_imm(R0, 0);
        a.exit();
        a.bind(ok);
        a.mov(dst, R0);
    }

    fn prologue(&mut self, members: &[(usize, Vec<ProbeInfo>)]) -> Res<()> {
        let a = &mut self.asm;
        a.mov(R6, R1);
        a.call(helper::GET_SMP_PROCESSOR_ID);
        a.stx(Size::W, R10, SLOT_KEY, R0);
        self.lookup_or_return(self.scratch_map, R7);
        let a = &mut self.asm;
        a.stx(Size::DW, R10, SLOT_SCRATCH_SPILL, R7);
        a.st_imm(Size::DW, R10, SLOT_SCRATCH_BASE, 0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, SLOT_SCRATCH_BASE as i32);
        a.mov_imm(R2, 8);
        a.mov(R3, R10);
        a.alu_imm(Alu::Add, R3, SLOT_SCRATCH_SPILL as i32);
        a.call(helper::PROBE_READ_KERNEL);
        // A zeroed region, never written, used to create aggregation entries.
        // Also the zeroes a struct-typed variable that does not exist yet reads as.
        let struct_max = (self.b.prog.variables.iter())
            .filter(|v| matches!(v.ty, Type::Struct { .. } | Type::Array(..)))
            .map(|v| (v.ty.size(self.strsize()) + 7) & !7)
            .max()
            .unwrap_or(0);
        let zsize = self.b.agg_value_max.max(8).max(struct_max);
        self.zero_off = self.scratch(zsize, Span::new(0, 0))?;
        // Clause-local variables live for the whole firing, shared by its clauses (DTrace guide,
        // "Variables" → "Clause-Local Variables"): slots for the program, zeroed per firing.
        let locals: std::collections::BTreeSet<u32> = (members.iter())
            .flat_map(|(ci, _)| self.b.prog.clauses[*ci].clause_locals.iter().map(|v| v.0))
            .collect();
        for v in locals {
            let ty = self.b.prog.var(probe_sema::checked::VarId(v)).ty.clone();
            let size = value_kind(&ty, self.strsize()).size();
            let off = self.scratch(size, Span::new(0, 0))?;
            self.zero(off, size);
            self.clause_locals.insert(v, off);
        }
        // strtok()'s state lives from the first clause to the last of one firing (Oracle's
        // DMEM_STRTOK, set to "no string" by the probe's prologue): the position word, then
        // the string (twice strsize wide: a token copy reads up to 2 * strsize - 2 bytes on).
        if members
            .iter()
            .any(|(ci, _)| self.b.prog.clauses[*ci].strtok)
        {
            let st = self.scratch(8 + 2 * self.ss8(), Span::new(0, 0))?;
            self.asm.st_imm(Size::DW, R7, st as i16, -1);
            self.strtok_state = Some(st);
        }
        let a = &mut self.asm;
        if let Some(g) = self.b.globals_map {
            a.st_imm(Size::W, R10, SLOT_KEY, 0);
            self.lookup_or_return(g, R8);
        }
        let a = &mut self.asm;
        match self.group {
            GroupKey::SysEnter => {
                a.ldx(Size::DW, R0, R6, 8);
                a.stx(Size::DW, R10, SLOT_NR, R0);
            }
            GroupKey::SysExit => {
                // nr = regs->orig_ax, read through the pt_regs pointer in ctx[0].
                a.st_imm(Size::DW, R10, SLOT_NR, -1);
                a.mov(R1, R10);
                a.alu_imm(Alu::Add, R1, SLOT_NR as i32);
                a.mov_imm(R2, 8);
                a.ldx(Size::DW, R3, R6, 0);
                a.alu_imm(Alu::Add, R3, pt_regs::ORIG_AX as i32);
                a.call(helper::PROBE_READ_KERNEL);
            }
            GroupKey::UprobeMulti(..) => {
                // The site's probe index (the cookie's low half), the record header's probe key.
                a.mov(R1, R6);
                a.call(helper::GET_ATTACH_COOKIE);
                a.zext(R0, 32);
                a.stx(Size::DW, R10, SLOT_NR, R0);
            }
            _ => {
                a.st_imm(Size::DW, R10, SLOT_NR, 0);
            }
        }
        let _ = members;
        Ok(())
    }

    pub(super) fn clause(
        &mut self,
        pos: usize,
        c: &CheckedClause,
        probes: &[ProbeInfo],
        _members: &[(usize, Vec<ProbeInfo>)],
    ) -> Res<()> {
        self.clause = pos;
        self.clause_span = c.span;
        self.probes = probes.to_vec();
        self.stack_next = SLOT_FIRST;
        let scratch_mark = self.scratch_next;
        self.pinned = 0;
        self.pin_lo = None;
        self.scratch_used = 0;
        let end = self.asm.label();
        self.clause_end = Some(end);
        if self.b.any_exit && !matches!(self.group, GroupKey::End | GroupKey::Error) {
            self.skip_after_exit(end);
        }
        if self.is_syscall() {
            self.syscall_filter(probes, end)?;
        }
        if let Some(p) = &c.predicate {
            self.int(p)?;
            self.asm.jmp_imm(Cond::Eq, R0, 0, end);
        }
        let mut shapes = Vec::new();
        self.collect_actions(&c.body, &mut shapes);
        self.record = None;
        if !shapes.is_empty() || c.body.is_empty() {
            let exit_sections: Vec<usize> = shapes
                .iter()
                .enumerate()
                .filter(|(_, (a, _))| *a == RecordAction::Exit)
                .map(|(i, _)| i)
                .collect();
            let (id, size, sections) = self.record_layout(shapes);
            let base = self.scratch(size, c.span)?;
            self.write_header(base, id);
            let exits = exit_sections
                .into_iter()
                .map(|i| (i, base + sections[i][0]))
                .collect();
            self.record = Some(CurRecord {
                base,
                size,
                sections,
                next: 0,
                exits,
            });
        }
        for s in &c.body {
            self.stmt(s)?;
        }
        if let Some(r) = self.record.take() {
            self.submit(r.base, r.size);
            for (section, status) in r.exits {
                self.flag_exit(r.base, section, status);
            }
        }
        self.asm.bind(end);
        self.scratch_next = scratch_mark;
        self.pinned = 0;
        self.pin_lo = None;
        Ok(())
    }

    fn syscall_filter(&mut self, probes: &[ProbeInfo], end: Label) -> Res<()> {
        let nrs: Vec<u32> = probes
            .iter()
            .filter_map(|p| match p.kind {
                ProbeKind::Syscall { nr, .. } => Some(nr),
                _ => None,
            })
            .collect();
        if nrs.len() >= self.b.opts.syscall_count {
            return Ok(()); // every system call: no filter
        }
        self.asm.ldx(Size::DW, R1, R10, SLOT_NR);
        let hit = self.asm.label();
        // A sorted compare chain; ranges of consecutive numbers collapse into one test.
        let mut sorted = nrs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i;
            while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
                j += 1;
            }
            if i == j {
                self.asm.jmp_imm(Cond::Eq, R1, sorted[i] as i32, hit);
            } else {
                let skip = self.asm.label();
                self.asm.jmp_imm(Cond::Lt, R1, sorted[i] as i32, skip);
                self.asm.jmp_imm(Cond::Le, R1, sorted[j] as i32, hit);
                self.asm.bind(skip);
            }
            i = j + 1;
        }
        self.asm.ja(end);
        self.asm.bind(hit);
        Ok(())
    }

    // ---- memory helpers ----

    pub(super) fn zero(&mut self, off: u32, len: u32) {
        let mut i = 0;
        while i < len {
            self.asm.st_imm(Size::DW, R7, (off + i) as i16, 0);
            i += 8;
        }
    }

    /// Copies `len` bytes (a multiple of 8) from `src + soff` to `dst + doff` through R1.
    pub(super) fn copy(&mut self, dst: Reg, doff: i32, src: Reg, soff: i32, len: u32) {
        let mut i = 0;
        while i < len {
            self.asm.ldx(Size::DW, R1, src, (soff + i as i32) as i16);
            self.asm.stx(Size::DW, dst, (doff + i as i32) as i16, R1);
            i += 8;
        }
    }

    /// After the record at scratch `base` was output (or dropped): when its `exit()` action
    /// `section` ran (its mask bit is set), writes [`EXIT_FLAG`] `|` the status at scratch offset
    /// `status` into this CPU's [`Stat::ExitStatus`] slot, the consumer's copy of `exit()` that
    /// no full ring buffer can drop.
    pub(super) fn flag_exit(&mut self, base: u32, section: usize, status: u32) {
        let a = &mut self.asm;
        let skip = a.label();
        a.ldx(Size::DW, R1, R7, (base + 16) as i16);
        let bit = crate::layout::action_bit(section);
        if bit < 1 << 31 {
            a.alu_imm(Alu::And, R1, bit as i32);
        } else {
            a.mov_imm(R2, bit as i64);
            a.alu(Alu::And, R1, R2);
        }
        a.jmp_imm(Cond::Eq, R1, 0, skip);
        a.st_imm(Size::W, R10, SLOT_KEY, Stat::ExitStatus as i32);
        lookup_slot_key(a, self.b.layout.stats);
        a.jmp_imm(Cond::Eq, R0, 0, skip);
        // The status's low 32 bits (little-endian), zero-extended by the 32-bit load.
        a.ldx(Size::W, R1, R7, status as i16);
        a.mov_imm(R2, 1);
        a.alu_imm(Alu::Lsh, R2, 32);
        a.alu(Alu::Or, R1, R2);
        a.stx(Size::DW, R0, 0, R1);
        a.bind(skip);
    }

    /// Jumps to `end` when this CPU's [`Stat::ExitStatus`] slot says `exit()` ran: as DTrace's
    /// activity check before each clause, nothing is recorded after `exit()` (the clauses after
    /// it in the same firing, and any later firing on this CPU; other CPUs stop when the
    /// consumer sees the status).
    fn skip_after_exit(&mut self, end: Label) {
        let a = &mut self.asm;
        let go = a.label();
        a.st_imm(Size::W, R10, SLOT_KEY, Stat::ExitStatus as i32);
        lookup_slot_key(a, self.b.layout.stats);
        a.jmp_imm(Cond::Eq, R0, 0, go);
        a.ldx(Size::DW, R1, R0, 0);
        a.alu_imm(Alu::Rsh, R1, 32);
        a.jmp_imm(Cond::Ne, R1, 0, end);
        a.bind(go);
    }

    pub(super) fn stat_inc(&mut self, stat: Stat) {
        let a = &mut self.asm;
        a.st_imm(Size::W, R10, SLOT_KEY, stat as i32);
        lookup_slot_key(a, self.b.layout.stats);
        let skip = a.label();
        a.jmp_imm(Cond::Eq, R0, 0, skip);
        a.ldx(Size::DW, R1, R0, 0);
        a.alu_imm(Alu::Add, R1, 1);
        a.stx(Size::DW, R0, 0, R1);
        a.bind(skip);
    }

    /// Normalizes R-register `r` to the representation of `ty` (truncate, then sign/zero extend).
    pub(super) fn normalize(&mut self, r: Reg, ty: &Type) {
        if let Type::Int { bytes, signed } = ty
            && *bytes < 8
        {
            if *signed {
                self.asm.movsx(r, r, (*bytes as i16) * 8);
            } else {
                self.asm.zext(r, *bytes as u32 * 8);
            }
        }
    }
}
