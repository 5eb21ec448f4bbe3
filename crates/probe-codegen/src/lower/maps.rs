//! Maps: the sizes of keys, values and strings, and the maps a program needs (globals, associative
//! arrays, thread-locals, aggregations, scratch, the ring buffer and the stats).

use super::*;
use std::collections::HashMap;

/// The most bytes a string expression's value can take (NUL included), when that is known to be
/// less than `strsize`: literals, `execname` (the 16-byte comm) and choices between them.
pub(super) fn str_cap(e: &TExpr, strsize: u32) -> u32 {
    let c = match &e.kind {
        TExprKind::Str(s) => (s.len() as u32 + 1).min(strsize),
        TExprKind::Builtin(Builtin::Execname) => 16,
        TExprKind::Ternary(_, a, b) => str_cap(a, strsize).max(str_cap(b, strsize)),
        TExprKind::Cast(inner) => str_cap(inner, strsize),
        _ => strsize,
    };
    c.min(strsize)
}

/// For every aggregation (indexed by id), the capacity of each key position: the largest
/// [`str_cap`] over every update of it in the program (strsize for non-string keys; unused then).
/// One walk of the program for all aggregations: a walk per aggregation made compilation quadratic
/// in the program size (issue 22).
fn agg_key_caps(prog: &CheckedProgram, strsize: u32) -> Vec<Vec<u32>> {
    fn walk(stmts: &[TStmt], caps: &mut [Vec<u32>], strsize: u32) {
        for s in stmts {
            match s {
                TStmt::Aggregate { agg, keys, .. } => {
                    if let Some(caps) = caps.get_mut(agg.0 as usize) {
                        for (c, k) in caps.iter_mut().zip(keys) {
                            *c = (*c).max(str_cap(k, strsize));
                        }
                    }
                }
                TStmt::If { then, els, .. } => {
                    walk(then, caps, strsize);
                    walk(els, caps, strsize);
                }
                _ => {}
            }
        }
    }
    let n = prog
        .aggregations
        .iter()
        .map(|a| a.id.0 as usize + 1)
        .max()
        .unwrap_or(0);
    let mut caps = vec![Vec::new(); n];
    for a in &prog.aggregations {
        caps[a.id.0 as usize] = vec![1u32; a.keys.len()];
    }
    for c in &prog.clauses {
        walk(&c.body, &mut caps, strsize);
    }
    // Round up to whole 8-byte words (the key layout's unit).
    for c in caps.iter_mut().flatten() {
        *c = ((*c + 7) & !7).min(strsize.max(8));
    }
    caps
}

/// The ring-buffer data size used for a `bufsize` of `bytes`: the next power of two, kept
/// between 16 KiB and 1 GiB (the kernel wants a power-of-two multiple of the page size).
pub fn ringbuf_size(bytes: u64) -> u32 {
    bytes.clamp(16 << 10, 1 << 30).next_power_of_two() as u32
}

pub(super) fn value_kind(ty: &Type, strsize: u32) -> FieldKind {
    match ty {
        Type::String => FieldKind::Str { len: strsize },
        Type::Stack { user, frames } => FieldKind::Stack {
            user: *user,
            frames: *frames,
        },
        Type::Symbol(k) => FieldKind::Sym(*k),
        Type::Int { bytes, signed } => FieldKind::Int {
            bytes: *bytes,
            signed: *signed,
        },
        // A variable of struct or union type is stored as its bytes; only its members are read
        // and written (the analysis keeps struct values out of records and keys).
        Type::Struct { size, .. } => FieldKind::Str { len: *size },
        // So is a fixed-size array variable (`int a[5];`), read and written by element.
        Type::Array(elem, n) => FieldKind::Str {
            len: elem.size(strsize) * n,
        },
        _ => FieldKind::Int {
            bytes: 8,
            signed: false,
        },
    }
}

/// Adds `name` to the comma-separated variable names of a shared map's role.
fn add_name(role: &mut MapRole, name: &str) {
    if let MapRole::Assoc(names) | MapRole::ThreadLocal(names) = role {
        if !names.is_empty() {
            names.push(',');
        }
        names.push_str(name);
    }
}

fn entries_for(space: u64, entry_bytes: u32) -> u32 {
    let n = space / (entry_bytes as u64 + 64);
    n.clamp(1024, 1 << 20) as u32
}

impl Builder<'_> {
    pub(super) fn add_map(&mut self, spec: MapSpec) -> usize {
        self.layout.maps.push(spec);
        self.layout.maps.len() - 1
    }

    pub(super) fn build_maps(&mut self) -> Res<()> {
        let rb = ringbuf_size(self.opts.bufsize.unwrap_or(16 << 10));
        self.layout.ringbuf = self.add_map(MapSpec {
            name: "sl_records".into(),
            kind: MapKind::RingBuf,
            key_size: 0,
            value_size: 0,
            max_entries: rb,
            no_prealloc: false,
            role: MapRole::Records,
        });
        self.layout.stats = self.add_map(MapSpec {
            name: "sl_stats".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: 8,
            max_entries: STAT_COUNT,
            no_prealloc: false,
            role: MapRole::Stats,
        });
        let strsize = self.strsize;
        let mut thread_maps: HashMap<u32, usize> = HashMap::new();
        let mut assoc_maps: HashMap<(u32, u32), usize> = HashMap::new();
        for (var_index, v) in self.prog.variables.iter().enumerate() {
            let var_index = var_index as u32;
            let vk = value_kind(&v.ty, strsize);
            let home = match v.scope {
                VarScope::Clause => VarHome::ClauseLocal,
                VarScope::Thread => {
                    // One map per value size for all thread-locals, keyed by (tid, variable): a map
                    // each put 200 thread-locals over the kernel's 64 maps per program (issue 22);
                    // DTrace keeps them all in one dynamic-variable space.
                    let value_size = vk.size();
                    let map = match thread_maps.get(&value_size) {
                        Some(&m) => m,
                        None => {
                            let m = self.add_map(MapSpec {
                                name: format!("sl_self_{value_size}"),
                                kind: MapKind::Hash,
                                key_size: 16,
                                value_size,
                                max_entries: entries_for(self.opts.dynvarsize, 16 + value_size),
                                no_prealloc: true,
                                role: MapRole::ThreadLocal(String::new()),
                            });
                            thread_maps.insert(value_size, m);
                            m
                        }
                    };
                    add_name(&mut self.layout.maps[map].role, &v.name);
                    VarHome::ThreadLocal { map, id: var_index }
                }
                VarScope::Global if v.is_assoc() => {
                    let key_fields: Vec<FieldKind> =
                        v.keys.iter().map(|t| value_kind(t, strsize)).collect();
                    // Arrays with the same key and value sizes share one map, keyed by the
                    // variable's number and then the tuple (as thread-locals, above).
                    let key_size: u32 = 8 + key_fields.iter().map(FieldKind::size).sum::<u32>();
                    let value_size = vk.size();
                    let map = match assoc_maps.get(&(key_size, value_size)) {
                        Some(&m) => m,
                        None => {
                            let m = self.add_map(MapSpec {
                                name: format!("sl_a_{key_size}_{value_size}"),
                                kind: MapKind::Hash,
                                key_size,
                                value_size,
                                max_entries: entries_for(
                                    self.opts.dynvarsize,
                                    key_size + value_size,
                                ),
                                no_prealloc: true,
                                role: MapRole::Assoc(String::new()),
                            });
                            assoc_maps.insert((key_size, value_size), m);
                            m
                        }
                    };
                    add_name(&mut self.layout.maps[map].role, &v.name);
                    VarHome::Map {
                        map,
                        key_fields,
                        id: var_index,
                    }
                }
                VarScope::Global => {
                    let offset = self.globals_size;
                    self.globals_size += vk.size();
                    self.layout.globals.push(GlobalVar {
                        name: v.name.clone(),
                        offset,
                        kind: vk,
                    });
                    VarHome::Global { offset }
                }
            };
            self.homes.push(home);
        }
        if self.globals_size > 0 {
            self.globals_map = Some(self.add_map(MapSpec {
                name: "sl_globals".into(),
                kind: MapKind::Array,
                key_size: 4,
                value_size: self.globals_size,
                max_entries: 1,
                no_prealloc: false,
                role: MapRole::Globals,
            }));
        }
        let all_caps = agg_key_caps(self.prog, strsize);
        let mut agg_maps: HashMap<(bool, u32, u32), (usize, u32)> = HashMap::new();
        for a in &self.prog.aggregations {
            // String keys take only the room their values can need (e.g. 16 bytes for execname),
            // which makes hashing and copying the key cheaper than a full strsize buffer.
            let caps = &all_caps[a.id.0 as usize];
            let keys: Vec<FieldKind> = a
                .keys
                .iter()
                .zip(caps)
                .map(|(t, cap)| match value_kind(t, strsize) {
                    FieldKind::Str { .. } => FieldKind::Str { len: *cap },
                    k => k,
                })
                .collect();
            let mut off = 0;
            let mut fields = Vec::new();
            for k in keys {
                let sz = k.size();
                fields.push(Field {
                    offset: off,
                    kind: k,
                });
                off += sz;
            }
            let func = a.func;
            let value_size = func.nwords() as u32 * 8;
            self.agg_value_max = self.agg_value_max.max(value_size);
            let keyed = !fields.is_empty();
            let key_size = if keyed { off } else { 4 };
            let id = self.layout.aggs.len();
            // Aggregations of one shape share a map, as DTrace keeps one aggregation buffer:
            // keyed ones of one key and value size a hash keyed by (number, keys), unkeyed ones of
            // one value size an array indexed by number. A map each put 62 aggregations over the
            // kernel's 64 maps per program (issue 22).
            let class = (keyed, key_size, value_size);
            let (map, number) = match agg_maps.get_mut(&class) {
                Some((m, n)) => {
                    *n += 1;
                    (*m, *n - 1)
                }
                None => {
                    let m = self.add_map(MapSpec {
                        name: if keyed {
                            format!("sl_agg_{}_{value_size}", key_size + 8)
                        } else {
                            format!("sl_agg_{value_size}")
                        },
                        kind: if keyed {
                            MapKind::PercpuHash
                        } else {
                            MapKind::PercpuArray
                        },
                        key_size: if keyed { key_size + 8 } else { 4 },
                        value_size,
                        max_entries: if keyed {
                            entries_for(self.opts.aggsize, key_size + 8 + value_size)
                        } else {
                            1
                        },
                        no_prealloc: keyed,
                        role: MapRole::Aggregations(Vec::new()),
                    });
                    agg_maps.insert(class, (m, 1));
                    (m, 0)
                }
            };
            let spec = &mut self.layout.maps[map];
            if !keyed {
                spec.max_entries = number + 1;
            }
            if let MapRole::Aggregations(ids) = &mut spec.role {
                ids.push(id);
            }
            self.layout.aggs.push(AggDesc {
                name: a.name.clone(),
                func,
                keys: fields,
                key_size,
                map,
                number,
            });
        }
        Ok(())
    }
}
