//! Kernel type information from BTF, for D's structure member access (`curthread->comm`,
//! `args->prev->pid` style expressions on kernel pointers).
//!
//! BTF is the kernel's compact type format, exposed at `/sys/kernel/btf/vmlinux` (Linux 5.4+ built
//! with `CONFIG_DEBUG_INFO_BTF`). The layout follows the kernel's `Documentation/bpf/btf.rst`
//! ("BTF Type and String Encoding"): a header (`magic 0xEB9F`, version 1, flags, `hdr_len`, then
//! `type_off`/`type_len`/`str_off`/`str_len` relative to the end of the header), a type section of
//! `struct btf_type` records (`name_off`, `info` = vlen | kind << 24 | kind_flag << 31, `size`/`type`)
//! each followed by kind-specific data, and a string section. Type id 0 is `void`; ids count from 1
//! in section order.
//!
//! This module is pure: the caller reads the file and hands the bytes to [`Btf::parse`].

use crate::types::Type;
use std::collections::HashMap;

/// BTF kinds (btf.rst § 2.1).
mod kind {
    pub const INT: u32 = 1;
    pub const PTR: u32 = 2;
    pub const ARRAY: u32 = 3;
    pub const STRUCT: u32 = 4;
    pub const UNION: u32 = 5;
    pub const ENUM: u32 = 6;
    pub const FWD: u32 = 7;
    pub const TYPEDEF: u32 = 8;
    pub const VOLATILE: u32 = 9;
    pub const CONST: u32 = 10;
    pub const RESTRICT: u32 = 11;
    pub const FUNC: u32 = 12;
    pub const FUNC_PROTO: u32 = 13;
    pub const VAR: u32 = 14;
    pub const DATASEC: u32 = 15;
    pub const FLOAT: u32 = 16;
    pub const DECL_TAG: u32 = 17;
    pub const TYPE_TAG: u32 = 18;
    pub const ENUM64: u32 = 19;
}

/// Why a BTF blob could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    /// The blob does not start with the BTF magic `0xEB9F` (little endian).
    #[error("not BTF data (bad magic {0:#06x})")]
    BadMagic(u16),
    /// A header offset or a type record runs past the end of the data.
    #[error("BTF data truncated at byte {0}")]
    Truncated(usize),
    /// A type record has a kind this parser does not know (a newer kernel).
    #[error("unknown BTF kind {kind} for type id {id}")]
    UnknownKind {
        /// The kind number.
        kind: u32,
        /// The type id.
        id: u32,
    },
}

/// One member of a struct or union.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BtfMember {
    /// Name (empty for an anonymous struct/union member).
    pub name: String,
    /// Type id.
    pub ty: u32,
    /// Offset from the start of the struct, in bits.
    pub bit_offset: u32,
    /// Bitfield width in bits (0: not a bitfield).
    pub bitfield_size: u32,
}

/// A parsed BTF type (only what D needs is kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtfType {
    /// `void` (id 0), and kinds D has no use for (functions, variables, sections, tags).
    Void,
    /// An integer of `size` bytes.
    Int {
        /// Name (`int`, `unsigned long`, `_Bool`).
        name: String,
        /// Size in bytes.
        size: u32,
        /// Signed?
        signed: bool,
        /// A `_Bool`.
        bool_: bool,
    },
    /// A pointer to `ty`.
    Ptr(u32),
    /// An array of `len` elements of `elem`.
    Array {
        /// Element type id.
        elem: u32,
        /// Number of elements.
        len: u32,
    },
    /// A struct (`union == false`) or union.
    Struct {
        /// Name (empty when anonymous).
        name: String,
        /// Size in bytes.
        size: u32,
        /// Union?
        union: bool,
        /// Members in declaration order.
        members: Vec<BtfMember>,
    },
    /// An enum of `size` bytes.
    Enum {
        /// Name.
        name: String,
        /// Size in bytes.
        size: u32,
        /// Signed?
        signed: bool,
        /// Enumerators: name and value, in declaration order.
        values: Vec<(String, i64)>,
    },
    /// A forward declaration (`struct foo;` with no body here).
    Fwd {
        /// Name.
        name: String,
    },
    /// A `typedef`: stands for `ty`.
    Alias {
        /// Typedef name.
        name: String,
        /// The aliased type id.
        ty: u32,
    },
    /// `const`, `volatile`, `restrict` or a type tag (`word` empty) on `ty`: stands for `ty`.
    Qualified {
        /// The qualifier as C spells it (empty for a type tag).
        word: &'static str,
        /// The qualified type id.
        ty: u32,
    },
    /// A floating-point type of `size` bytes (D cannot compute with it).
    Float {
        /// Size in bytes.
        size: u32,
    },
}

/// Kernel types parsed from BTF, with an index of struct and union names.
#[derive(Clone, Debug, Default)]
pub struct Btf {
    types: Vec<BtfType>,
    structs: HashMap<String, u32>,
    funcs: HashMap<String, u32>,
    /// Kernel variables (`VAR` records): name → type id.
    vars: HashMap<String, u32>,
}

fn u32_at(b: &[u8], off: usize) -> Result<u32, BtfError> {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(BtfError::Truncated(off))
}

fn cstr(strings: &[u8], off: u32) -> String {
    let s = strings.get(off as usize..).unwrap_or(&[]);
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    String::from_utf8_lossy(&s[..end]).into_owned()
}

impl Btf {
    /// Parses a little-endian BTF blob (the contents of `/sys/kernel/btf/vmlinux`).
    ///
    /// Errors: bad magic, truncated data, or an unknown kind.
    pub fn parse(b: &[u8]) -> Result<Btf, BtfError> {
        let magic = b
            .get(0..2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]))
            .ok_or(BtfError::Truncated(0))?;
        if magic != 0xEB9F {
            return Err(BtfError::BadMagic(magic));
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let type_off = u32_at(b, 8)? as usize;
        let type_len = u32_at(b, 12)? as usize;
        let str_off = u32_at(b, 16)? as usize;
        let str_len = u32_at(b, 20)? as usize;
        let types_start = hdr_len + type_off;
        let types_end = types_start + type_len;
        let strings = b
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or(BtfError::Truncated(hdr_len + str_off))?;
        if types_end > b.len() {
            return Err(BtfError::Truncated(types_end));
        }
        let mut types = vec![BtfType::Void];
        let mut structs = HashMap::new();
        let mut funcs = HashMap::new();
        let mut vars = HashMap::new();
        let mut off = types_start;
        while off < types_end {
            let id = types.len() as u32;
            let name_off = u32_at(b, off)?;
            let info = u32_at(b, off + 4)?;
            let size_or_type = u32_at(b, off + 8)?;
            off += 12;
            let vlen = (info & 0xffff) as usize;
            let k = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let name = cstr(strings, name_off);
            let t = match k {
                kind::INT => {
                    let enc = u32_at(b, off)?;
                    off += 4;
                    let encoding = (enc >> 24) & 0xf;
                    BtfType::Int {
                        name,
                        size: size_or_type,
                        signed: encoding & 1 != 0,
                        bool_: encoding & 4 != 0,
                    }
                }
                kind::PTR => BtfType::Ptr(size_or_type),
                kind::ARRAY => {
                    let elem = u32_at(b, off)?;
                    let len = u32_at(b, off + 8)?;
                    off += 12;
                    BtfType::Array { elem, len }
                }
                kind::STRUCT | kind::UNION => {
                    let mut members = Vec::with_capacity(vlen);
                    for _ in 0..vlen {
                        let m_name = cstr(strings, u32_at(b, off)?);
                        let ty = u32_at(b, off + 4)?;
                        let raw = u32_at(b, off + 8)?;
                        off += 12;
                        let (bit_offset, bitfield_size) = if kind_flag {
                            (raw & 0xff_ffff, raw >> 24)
                        } else {
                            (raw, 0)
                        };
                        members.push(BtfMember {
                            name: m_name,
                            ty,
                            bit_offset,
                            bitfield_size,
                        });
                    }
                    if !name.is_empty() {
                        // Keep the first complete definition of a name.
                        structs.entry(name.clone()).or_insert(id);
                    }
                    BtfType::Struct {
                        name,
                        size: size_or_type,
                        union: k == kind::UNION,
                        members,
                    }
                }
                kind::ENUM | kind::ENUM64 => {
                    let wide = k == kind::ENUM64;
                    let mut values = Vec::with_capacity(vlen);
                    for _ in 0..vlen {
                        let v_name = cstr(strings, u32_at(b, off)?);
                        let lo = u32_at(b, off + 4)?;
                        let v = if wide {
                            (u64::from(u32_at(b, off + 8)?) << 32 | u64::from(lo)) as i64
                        } else if kind_flag {
                            i64::from(lo as i32)
                        } else {
                            i64::from(lo)
                        };
                        off += if wide { 12 } else { 8 };
                        values.push((v_name, v));
                    }
                    BtfType::Enum {
                        name,
                        size: size_or_type,
                        signed: kind_flag,
                        values,
                    }
                }
                kind::FWD => BtfType::Fwd { name },
                kind::TYPEDEF => BtfType::Alias {
                    name,
                    ty: size_or_type,
                },
                kind::VOLATILE | kind::CONST | kind::RESTRICT | kind::TYPE_TAG => {
                    BtfType::Qualified {
                        word: match k {
                            kind::CONST => "const",
                            kind::VOLATILE => "volatile",
                            kind::RESTRICT => "restrict",
                            _ => "",
                        },
                        ty: size_or_type,
                    }
                }
                kind::FUNC => {
                    funcs.entry(name).or_insert(id);
                    BtfType::Void
                }
                kind::FUNC_PROTO => {
                    off += 8 * vlen;
                    BtfType::Void
                }
                kind::VAR => {
                    off += 4;
                    vars.entry(name).or_insert(size_or_type);
                    BtfType::Void
                }
                kind::DATASEC => {
                    off += 12 * vlen;
                    BtfType::Void
                }
                kind::FLOAT => BtfType::Float { size: size_or_type },
                kind::DECL_TAG => {
                    off += 4;
                    BtfType::Void
                }
                other => return Err(BtfError::UnknownKind { kind: other, id }),
            };
            types.push(t);
        }
        if off != types_end {
            return Err(BtfError::Truncated(off));
        }
        Ok(Btf {
            types,
            structs,
            funcs,
            vars,
        })
    }

    /// Number of types (void included).
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// True when only `void` is known.
    pub fn is_empty(&self) -> bool {
        self.types.len() <= 1
    }

    /// The type with id `id` (`Void` for an unknown id).
    pub fn get(&self, id: u32) -> &BtfType {
        self.types.get(id as usize).unwrap_or(&BtfType::Void)
    }

    /// The id of the struct (or union) named `name` (`task_struct`).
    pub fn struct_id(&self, name: &str) -> Option<u32> {
        self.structs.get(name).copied()
    }

    /// The type id of the function (`FUNC`) named `name`, as a kfunc call's immediate
    /// (`bpf_iter_num_new`); the first one when several share the name.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.funcs.get(name).copied()
    }

    /// The type id of the kernel variable `name` (BTF `VAR`: `max_pfn`, `jiffies`), if BTF
    /// describes it.
    pub fn var_type(&self, name: &str) -> Option<u32> {
        self.vars.get(name).copied()
    }

    /// Follows typedefs and qualifiers to the underlying type id (at most 64 steps).
    pub fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..64 {
            match self.get(id) {
                BtfType::Alias { ty, .. } | BtfType::Qualified { ty, .. } => id = *ty,
                BtfType::Fwd { name } => match self.structs.get(name) {
                    Some(&s) => return s,
                    None => return id,
                },
                _ => return id,
            }
        }
        id
    }

    /// Finds member `name` of the struct/union `id`, descending into anonymous struct and union
    /// members. Returns the member and its offset in bits from the start of `id`.
    pub fn member(&self, id: u32, name: &str) -> Option<(BtfMember, u32)> {
        let BtfType::Struct { members, .. } = self.get(self.resolve(id)) else {
            return None;
        };
        for m in members {
            if m.name == name {
                return Some((m.clone(), m.bit_offset));
            }
        }
        for m in members.iter().filter(|m| m.name.is_empty()) {
            if let Some((found, off)) = self.member(m.ty, name) {
                return Some((found, m.bit_offset + off));
            }
        }
        None
    }

    /// Byte offset, from the start of struct (or union) `struct_name`, of the member reached by
    /// `path` (`["se", "sum_exec_runtime"]` is `task_struct.se.sum_exec_runtime`), descending into
    /// anonymous members as [`Btf::member`] does. `None` when the struct or a member is missing.
    pub fn member_offset(&self, struct_name: &str, path: &[&str]) -> Option<u32> {
        let mut id = self.struct_id(struct_name)?;
        let mut bits = 0u32;
        for field in path {
            let (m, off) = self.member(id, field)?;
            bits = bits.checked_add(off)?;
            id = m.ty;
        }
        Some(bits / 8)
    }

    /// The names of all bit-field members of all structs and unions of the table (one pass over
    /// it): a member access whose name is not among them needs no bit-field handling.
    pub fn bitfield_member_names(&self) -> std::collections::HashSet<String> {
        let mut out = std::collections::HashSet::new();
        for t in &self.types {
            if let BtfType::Struct { members, .. } = t {
                for m in members.iter().filter(|m| m.bitfield_size != 0) {
                    out.insert(m.name.clone());
                }
            }
        }
        out
    }

    /// Names of the members of struct/union `id` (anonymous members flattened), for suggestions.
    pub fn member_names(&self, id: u32) -> Vec<String> {
        let BtfType::Struct { members, .. } = self.get(self.resolve(id)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for m in members {
            if m.name.is_empty() {
                out.extend(self.member_names(m.ty));
            } else {
                out.push(m.name.clone());
            }
        }
        out
    }

    /// Size in bytes of type `id` (0 for void and functions).
    pub fn size_of(&self, id: u32) -> u32 {
        match self.get(self.resolve(id)) {
            BtfType::Int { size, .. } | BtfType::Enum { size, .. } | BtfType::Float { size } => {
                *size
            }
            BtfType::Struct { size, .. } => *size,
            BtfType::Ptr(_) => 8,
            BtfType::Array { elem, len } => self.size_of(*elem).saturating_mul(*len),
            _ => 0,
        }
    }

    /// Alignment in bytes of type `id` (C's natural alignment on x86-64 and arm64: an integer,
    /// enum or float its size, a pointer 8, an array its element's, a struct or union its
    /// widest member's; at least 1).
    pub fn align_of(&self, id: u32) -> u32 {
        match self.get(self.resolve(id)) {
            BtfType::Int { size, .. } | BtfType::Enum { size, .. } | BtfType::Float { size } => {
                (*size).clamp(1, 8)
            }
            BtfType::Ptr(_) => 8,
            BtfType::Array { elem, .. } => self.align_of(*elem),
            BtfType::Struct { members, .. } => members
                .iter()
                .map(|m| self.align_of(m.ty))
                .max()
                .unwrap_or(1),
            _ => 1,
        }
    }

    /// Appends a type and returns its id (a table without `void` gets it first, so ids count
    /// from 1 as in BTF). Used for the types a D program defines.
    pub fn push(&mut self, t: BtfType) -> u32 {
        if self.types.is_empty() {
            self.types.push(BtfType::Void);
        }
        self.types.push(t);
        (self.types.len() - 1) as u32
    }

    /// Defines struct (or union, `union`) `name` with `members` (name and type id, in order),
    /// laid out as a C compiler does: each member at the next multiple of its alignment (a union's
    /// all at 0), the size rounded up to the widest alignment. The name then refers to this
    /// definition (it shadows a kernel type of that name). Returns its id.
    pub fn define_struct(&mut self, name: &str, union: bool, members: &[(String, u32)]) -> u32 {
        let fields: Vec<(String, u32, u32)> =
            members.iter().map(|(n, t)| (n.clone(), *t, 0)).collect();
        self.define_struct_bits(name, union, &fields)
    }

    /// [`Btf::define_struct`] with bit-fields: each member is (name, type id, width in bits, 0
    /// for a member that is not a bit-field). A struct with a bit-field is laid out as DTrace's
    /// CTF library lays out the types D declares (`ctf_add_member`): a bit-field's storage is
    /// an integer of its width rounded up to 1, 2, 4 or 8 bytes, aligned to that size; each
    /// member starts at the first byte after the previous member's last bit, rounded up to its
    /// alignment; the struct ends at its last member's storage (no padding after it). So
    /// `struct { int a : 1; int b : 3; }` is 2 bytes, `a` at byte 0 and `b` at byte 1.
    pub fn define_struct_bits(
        &mut self,
        name: &str,
        union: bool,
        members: &[(String, u32, u32)],
    ) -> u32 {
        if members.iter().any(|m| m.2 != 0) {
            return self.define_struct_ctf(name, union, members);
        }
        let members: Vec<(String, u32)> = members.iter().map(|(n, t, _)| (n.clone(), *t)).collect();
        let mut off = 0u32;
        let mut size = 0u32;
        let mut align = 1u32;
        let mut out = Vec::with_capacity(members.len());
        for (mname, ty) in &members {
            let (msize, malign) = (self.size_of(*ty), self.align_of(*ty));
            align = align.max(malign);
            let at = if union {
                0
            } else {
                off.div_ceil(malign) * malign
            };
            out.push(BtfMember {
                name: mname.clone(),
                ty: *ty,
                bit_offset: at.saturating_mul(8),
                bitfield_size: 0,
            });
            off = at.saturating_add(msize);
            size = size.max(off);
        }
        let size = size.div_ceil(align) * align;
        let id = self.push(BtfType::Struct {
            name: name.to_string(),
            size,
            union,
            members: out,
        });
        self.structs.insert(name.to_string(), id);
        id
    }

    /// The CTF layout of [`Btf::define_struct_bits`] (a struct or union with bit-fields).
    fn define_struct_ctf(
        &mut self,
        name: &str,
        union: bool,
        members: &[(String, u32, u32)],
    ) -> u32 {
        let mut end_bits = 0u32;
        let mut size = 0u32;
        let mut out = Vec::with_capacity(members.len());
        for (mname, ty, bits) in members {
            let (msize, malign) = if *bits != 0 {
                let s = bits.div_ceil(8).next_power_of_two();
                (s, s)
            } else {
                (self.size_of(*ty), self.align_of(*ty).max(1))
            };
            let at = if union {
                0
            } else {
                end_bits.div_ceil(8).div_ceil(malign) * malign
            };
            out.push(BtfMember {
                name: mname.clone(),
                ty: *ty,
                bit_offset: at.saturating_mul(8),
                bitfield_size: *bits,
            });
            if !union {
                let width = if *bits != 0 {
                    *bits
                } else {
                    msize.saturating_mul(8)
                };
                end_bits = at.saturating_mul(8).saturating_add(width);
            }
            size = size.max(at.saturating_add(msize));
        }
        let id = self.push(BtfType::Struct {
            name: name.to_string(),
            size,
            union,
            members: out,
        });
        self.structs.insert(name.to_string(), id);
        id
    }

    /// Declares struct `name` without a definition (a forward declaration, BTF `FWD`), unless a
    /// struct of that name exists: the name then resolves to it until a definition replaces it.
    /// Returns the type id the name refers to.
    pub fn declare_forward(&mut self, name: &str) -> u32 {
        if let Some(id) = self.struct_id(name) {
            return id;
        }
        let id = self.push(BtfType::Fwd {
            name: name.to_string(),
        });
        self.structs.insert(name.to_string(), id);
        id
    }

    /// True when `id` is a 1-byte integer (`char`, `unsigned char`, `u8`): arrays of it are strings.
    pub fn is_char(&self, id: u32) -> bool {
        matches!(
            self.get(self.resolve(id)),
            BtfType::Int {
                size: 1,
                bool_: false,
                ..
            }
        )
    }

    /// The C name of type `id` as DTrace prints it (`ctf_type_name`): `int`, `char [5]`,
    /// `struct page *`, `const char *`, `enum eh`; an anonymous struct or union is `struct` or
    /// `union`; a name D gave an anonymous type of its own (`<anon N>`) counts as anonymous.
    pub fn c_name(&self, id: u32) -> String {
        self.c_name_depth(id, 0)
    }

    fn c_name_depth(&self, id: u32, depth: u32) -> String {
        if depth > 32 {
            return "?".into();
        }
        let tagged = |kw: &str, name: &str| {
            if name.is_empty() || name.starts_with("<anon") {
                kw.to_string()
            } else {
                format!("{kw} {name}")
            }
        };
        let pointerish = |inner: String, suffix: &str| {
            if inner.ends_with('*') {
                format!("{inner}{suffix}")
            } else {
                format!("{inner} {suffix}")
            }
        };
        match self.get(id) {
            BtfType::Void => "void".into(),
            BtfType::Int { name, .. } | BtfType::Alias { name, .. } => name.clone(),
            BtfType::Float { size } => match size {
                4 => "float".into(),
                8 => "double".into(),
                _ => "long double".into(),
            },
            BtfType::Ptr(to) => pointerish(self.c_name_depth(*to, depth + 1), "*"),
            BtfType::Array { elem, len } => {
                pointerish(self.c_name_depth(*elem, depth + 1), &format!("[{len}]"))
            }
            BtfType::Struct { name, union, .. } => {
                tagged(if *union { "union" } else { "struct" }, name)
            }
            BtfType::Enum { name, .. } => tagged("enum", name),
            BtfType::Fwd { name } => tagged("struct", name),
            BtfType::Qualified { word, ty } => {
                let inner = self.c_name_depth(*ty, depth + 1);
                if word.is_empty() {
                    inner
                } else if inner.ends_with('*') {
                    format!("{inner} {word}")
                } else {
                    format!("{word} {inner}")
                }
            }
        }
    }

    /// The description `print()` prints a value of type `id` with
    /// ([`probe_format::print::PrintType`]): names, sizes, members, enumerators, nested to
    /// [`probe_format::print::MAX_DEPTH`] levels (deeper values are `Deep`).
    pub fn print_type(&self, id: u32) -> probe_format::print::PrintType {
        self.print_type_depth(id, 0)
    }

    fn print_type_depth(&self, id: u32, depth: usize) -> probe_format::print::PrintType {
        use probe_format::print::{MAX_DEPTH, PrintKind, PrintMember, PrintType};
        let name = self.c_name(id);
        let rid = self.resolve(id);
        let size = self.size_of(rid);
        if depth >= MAX_DEPTH {
            return PrintType {
                name,
                size,
                kind: PrintKind::Deep,
            };
        }
        let kind = match self.get(rid) {
            BtfType::Int { signed, bool_, .. } => PrintKind::Int {
                signed: *signed && !*bool_,
                char_: name == "char",
            },
            BtfType::Enum { signed, values, .. } => PrintKind::Enum {
                signed: *signed,
                values: values.clone(),
            },
            BtfType::Ptr(_) => PrintKind::Pointer,
            BtfType::Array { elem, len } => PrintKind::Array {
                elem: Box::new(self.print_type_depth(*elem, depth + 1)),
                len: *len,
            },
            BtfType::Struct { union, members, .. } => PrintKind::Record {
                union: *union,
                members: members
                    .iter()
                    .map(|m| PrintMember {
                        name: m.name.clone(),
                        bit_offset: m.bit_offset,
                        bit_size: m.bitfield_size,
                        ty: self.print_type_depth(m.ty, depth + 1),
                    })
                    .collect(),
            },
            _ => PrintKind::Opaque,
        };
        PrintType { name, size, kind }
    }

    /// The D type of a value of BTF type `id`: integers and enums as integers, pointers as
    /// pointers (to [`Type::Struct`] for structs and unions), structs as [`Type::Struct`],
    /// arrays of char as `string`, other arrays as arrays, anything else `void`.
    pub fn d_type(&self, id: u32) -> Type {
        let rid = self.resolve(id);
        match self.get(rid) {
            BtfType::Int {
                size,
                signed,
                bool_,
                ..
            } => {
                let bytes = match size {
                    1 | 2 | 4 | 8 => *size as u8,
                    _ => 8,
                };
                Type::Int {
                    bytes,
                    signed: *signed && !*bool_,
                }
            }
            BtfType::Enum { size, signed, .. } => Type::Int {
                bytes: if matches!(size, 1 | 2 | 4 | 8) {
                    *size as u8
                } else {
                    4
                },
                signed: *signed,
            },
            BtfType::Ptr(to) => Type::Ptr(Box::new(self.d_type(*to))),
            BtfType::Struct { name, size, .. } => Type::Struct {
                name: name.clone(),
                id: rid,
                size: *size,
            },
            BtfType::Fwd { name } => Type::Struct {
                name: name.clone(),
                id: rid,
                size: 0,
            },
            BtfType::Array { elem, len } => {
                if self.is_char(*elem) {
                    Type::String
                } else {
                    Type::Array(Box::new(self.d_type(*elem)), *len)
                }
            }
            BtfType::Void
            | BtfType::Float { .. }
            | BtfType::Alias { .. }
            | BtfType::Qualified { .. } => Type::Void,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a BTF blob by hand: `struct point { int x; unsigned char name[8]; struct point *next; }`
    /// with an anonymous union holding `long y`, as the kernel would encode it.
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0point\0x\0name\0next\0unsigned char\0y\0long\0u32_t\0".to_vec();
        let s = |name: &str| -> u32 {
            let pos = strings
                .windows(name.len() + 1)
                .position(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0);
            pos.unwrap() as u32
        };
        let mut t: Vec<u8> = Vec::new();
        let mut rec = |words: &[u32]| {
            for w in words {
                t.extend_from_slice(&w.to_le_bytes());
            }
        };
        // 1: int (signed, 32 bits)
        rec(&[s("int"), kind::INT << 24, 4, (1 << 24) | 32]);
        // 2: unsigned char
        rec(&[s("unsigned char"), kind::INT << 24, 1, 8]);
        // 3: unsigned char[8] (index type 1)
        rec(&[0, kind::ARRAY << 24, 0, 2, 1, 8]);
        // 4: struct point * (pointer to 5)
        rec(&[0, kind::PTR << 24, 5]);
        // 5: struct point { int x @0; unsigned char name[8] @32; struct point *next @128; union {..} @192 }
        rec(&[s("point"), (kind::STRUCT << 24) | 4, 32]);
        rec(&[s("x"), 1, 0]);
        rec(&[s("name"), 3, 32]);
        rec(&[s("next"), 4, 128]);
        rec(&[0, 6, 192]);
        // 6: anonymous union { long y; }
        rec(&[0, (kind::UNION << 24) | 1, 8]);
        rec(&[s("y"), 7, 0]);
        // 7: long
        rec(&[s("long"), kind::INT << 24, 8, (1 << 24) | 64]);
        // 8: typedef u32_t -> const int
        rec(&[s("u32_t"), kind::TYPEDEF << 24, 9]);
        // 9: const int
        rec(&[0, kind::CONST << 24, 1]);
        let mut b = Vec::new();
        b.extend_from_slice(&0xEB9Fu16.to_le_bytes());
        b.push(1);
        b.push(0);
        b.extend_from_slice(&24u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(t.len() as u32).to_le_bytes());
        b.extend_from_slice(&(t.len() as u32).to_le_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        b.extend_from_slice(&t);
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn parses_a_hand_built_blob() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.len(), 10);
        let p = btf.struct_id("point").unwrap();
        assert_eq!(p, 5);
        let (x, off) = btf.member(p, "x").unwrap();
        assert_eq!((off, btf.d_type(x.ty)), (0, Type::INT));
        let (name, off) = btf.member(p, "name").unwrap();
        assert_eq!((off, btf.d_type(name.ty)), (32, Type::String));
        let (next, off) = btf.member(p, "next").unwrap();
        assert_eq!(off, 128);
        assert_eq!(
            btf.d_type(next.ty),
            Type::Ptr(Box::new(Type::Struct {
                name: "point".into(),
                id: 5,
                size: 32
            }))
        );
        // `y` lives in an anonymous union at bit 192.
        let (y, off) = btf.member(p, "y").unwrap();
        assert_eq!((off, btf.d_type(y.ty)), (192, Type::I64));
        assert_eq!(btf.member_names(p), vec!["x", "name", "next", "y"]);
        assert_eq!(btf.d_type(8), Type::INT, "typedef of const int");
        assert_eq!(btf.size_of(3), 8);
        assert!(btf.member(p, "nope").is_none());
    }

    #[test]
    fn member_offsets_follow_paths_and_anonymous_members_in_bytes() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.member_offset("point", &["next"]), Some(16));
        assert_eq!(btf.member_offset("point", &["y"]), Some(24), "in the union");
        assert_eq!(btf.member_offset("point", &[]), Some(0));
        // `next` is a pointer: no member to descend into.
        assert_eq!(btf.member_offset("point", &["next", "x"]), None);
        assert_eq!(btf.member_offset("point", &["nope"]), None);
        assert_eq!(btf.member_offset("nostruct", &["x"]), None);
    }

    #[test]
    fn defined_structs_are_laid_out_as_c_does() {
        let mut btf = Btf::default();
        let int = |b: &mut Btf, size, signed| {
            b.push(BtfType::Int {
                name: String::new(),
                size,
                signed,
                bool_: false,
            })
        };
        let c = int(&mut btf, 1, true);
        let i = int(&mut btf, 4, true);
        let l = int(&mut btf, 8, true);
        assert_eq!(i, 2, "void is id 0, the first pushed type 1");
        let arr = btf.push(BtfType::Array { elem: c, len: 5 });
        let fwd = btf.push(BtfType::Fwd {
            name: "node".into(),
        });
        let next = btf.push(BtfType::Ptr(fwd));
        let fields = [
            ("c".to_string(), c),
            ("l".to_string(), l),
            ("name".to_string(), arr),
            ("i".to_string(), i),
            ("next".to_string(), next),
        ];
        let node = btf.define_struct("node", false, &fields);
        // c@0, l@8, name@16..21, i@24, next@32: size 40.
        assert_eq!(btf.size_of(node), 40);
        assert_eq!(btf.align_of(node), 8);
        let offs: Vec<u32> = ["c", "l", "name", "i", "next"]
            .iter()
            .map(|m| btf.member_offset("node", &[m]).unwrap())
            .collect();
        assert_eq!(offs, vec![0, 8, 16, 24, 32]);
        // The forward declaration resolves to the definition.
        assert_eq!(btf.resolve(fwd), node);
        let u = btf.define_struct(
            "u",
            true,
            &[("c".into(), c), ("a".into(), arr), ("i".into(), i)],
        );
        assert_eq!(
            (btf.size_of(u), btf.member_offset("u", &["i"])),
            (8, Some(0))
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            Btf::parse(&[0, 0, 0, 0]).unwrap_err(),
            BtfError::BadMagic(0)
        );
        let mut b = sample();
        b.truncate(40);
        assert!(matches!(Btf::parse(&b), Err(BtfError::Truncated(_))));
    }
}
