//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to find structure member offsets,
//! for built-ins that read the current task (`ppid`, `vtimestamp`).
//!
//! Format: Documentation/bpf/btf.rst and include/uapi/linux/btf.h: a header (`magic` 0xeB9F,
//! version, flags, `hdr_len`, then `type_off`/`type_len`/`str_off`/`str_len` relative to the end of
//! the header), a type section of `struct btf_type` records (12 bytes: `name_off`, `info` with
//! `vlen` in bits 0..16, `kind` in bits 24..29 and `kind_flag` in bit 31, then `size`/`type`),
//! each followed by kind-specific data, and a string section. Type ids start at 1.

use probe_codegen::lower::TaskOffsets;

/// One parsed type: kind, name, and for structs/unions the members (name, type id, bit offset).
#[derive(Debug, Clone)]
struct BtfType {
    kind: u32,
    name: String,
    members: Vec<(String, u32, u32)>,
}

/// Parsed BTF types (index = type id - 1).
#[derive(Debug, Default)]
pub struct Btf {
    types: Vec<BtfType>,
}

/// Errors reading BTF: what was wrong with the blob.
#[derive(Debug, thiserror::Error)]
#[error("BTF: {0}")]
pub struct BtfError(pub String);

impl Btf {
    /// Reads and parses `/sys/kernel/btf/vmlinux` (Linux 5.4+ with CONFIG_DEBUG_INFO_BTF).
    pub fn vmlinux() -> Result<Btf, BtfError> {
        let data = std::fs::read("/sys/kernel/btf/vmlinux")
            .map_err(|e| BtfError(format!("/sys/kernel/btf/vmlinux: {e}")))?;
        Btf::parse(&data)
    }

    /// Parses a BTF blob (little-endian).
    pub fn parse(data: &[u8]) -> Result<Btf, BtfError> {
        let u16at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let u32at = |o: usize| {
            data.get(o..o + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if u16at(0) != Some(0xeb9f) {
            return Err(BtfError("bad magic".into()));
        }
        let err = || BtfError("truncated header".into());
        let hdr_len = u32at(4).ok_or_else(err)? as usize;
        let type_off = u32at(8).ok_or_else(err)? as usize + hdr_len;
        let type_len = u32at(12).ok_or_else(err)? as usize;
        let str_off = u32at(16).ok_or_else(err)? as usize + hdr_len;
        let str_len = u32at(20).ok_or_else(err)? as usize;
        let strings = data
            .get(str_off..str_off + str_len)
            .ok_or_else(|| BtfError("string section out of range".into()))?;
        let name = |off: u32| -> String {
            let s = strings.get(off as usize..).unwrap_or(&[]);
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };
        let mut types = Vec::new();
        let mut p = type_off;
        let end = type_off + type_len;
        while p + 12 <= end {
            let name_off = u32at(p).ok_or_else(err)?;
            let info = u32at(p + 4).ok_or_else(err)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kflag = info >> 31 == 1;
            p += 12;
            let mut members = Vec::new();
            let extra = match kind {
                1 => 4,  // INT
                3 => 12, // ARRAY
                4 | 5 => {
                    // STRUCT / UNION
                    for i in 0..vlen {
                        let m = p + i * 12;
                        let mname = name(u32at(m).ok_or_else(err)?);
                        let mtype = u32at(m + 4).ok_or_else(err)?;
                        let off = u32at(m + 8).ok_or_else(err)?;
                        let bits = if kflag { off & 0xff_ffff } else { off };
                        members.push((mname, mtype, bits));
                    }
                    vlen * 12
                }
                6 => vlen * 8,   // ENUM
                13 => vlen * 8,  // FUNC_PROTO
                14 => 4,         // VAR
                15 => vlen * 12, // DATASEC
                17 => 4,         // DECL_TAG
                19 => vlen * 12, // ENUM64
                _ => 0, // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
            };
            p += extra;
            types.push(BtfType {
                kind,
                name: name(name_off),
                members,
            });
        }
        Ok(Btf { types })
    }

    fn get(&self, id: u32) -> Option<&BtfType> {
        self.types.get((id as usize).checked_sub(1)?)
    }

    fn struct_named(&self, name: &str) -> Option<&BtfType> {
        self.types
            .iter()
            .find(|t| t.kind == 4 && t.name == name && !t.members.is_empty())
    }

    /// Byte offset of member `field` in struct `ty` (looking into anonymous struct/union members)
    /// and the member's type id.
    pub fn member_offset(&self, ty: &str, field: &str) -> Option<(u32, u32)> {
        let t = self.struct_named(ty)?;
        self.find_member(t, field, 0)
    }

    fn find_member(&self, t: &BtfType, field: &str, base_bits: u32) -> Option<(u32, u32)> {
        for (n, ty, bits) in &t.members {
            if n == field {
                return Some(((base_bits + bits) / 8, *ty));
            }
        }
        for (n, ty, bits) in &t.members {
            if n.is_empty()
                && let Some(inner) = self.get(*ty)
                && matches!(inner.kind, 4 | 5)
                && let Some(r) = self.find_member(inner, field, base_bits + bits)
            {
                return Some(r);
            }
        }
        None
    }

    /// The `task_struct` offsets the code generator needs.
    pub fn task_offsets(&self) -> Option<TaskOffsets> {
        let (real_parent, _) = self.member_offset("task_struct", "real_parent")?;
        let (tgid, _) = self.member_offset("task_struct", "tgid")?;
        let (se, _) = self.member_offset("task_struct", "se")?;
        let (sum, _) = self.member_offset("sched_entity", "sum_exec_runtime")?;
        Some(TaskOffsets {
            real_parent,
            tgid,
            sum_exec_runtime: se + sum,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_blob_without_the_magic() {
        assert!(Btf::parse(&[0u8; 32]).is_err());
    }

    #[test]
    fn finds_task_struct_offsets_in_vmlinux() {
        let Ok(btf) = Btf::vmlinux() else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        };
        let t = btf.task_offsets().expect("task_struct offsets");
        // tgid follows pid (both pid_t) and real_parent comes later in struct task_struct.
        let (pid, _) = btf.member_offset("task_struct", "pid").expect("pid");
        assert_eq!(t.tgid, pid + 4);
        assert!(t.real_parent > t.tgid);
    }
}
