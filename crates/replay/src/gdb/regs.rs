//! The amd64 registers gdb is sent: their target description (`qXfer:features:read:target.xml`)
//! and the `g`/`p` packet encoding. The layout follows gdb's own amd64 Linux description
//! (gdb/features/i386/64bit-core.xml, 64bit-sse.xml, 64bit-linux.xml, 64bit-segments.xml): 60
//! registers, numbered as there, each sent little-endian in its size.

use replay_ptrace::{FpRegs, Regs};

/// One register of the description.
struct Reg {
    name: &'static str,
    bits: u32,
    ty: &'static str,
    group: Option<&'static str>,
}

const fn reg(name: &'static str, bits: u32, ty: &'static str) -> Reg {
    Reg {
        name,
        bits,
        ty,
        group: None,
    }
}

const fn float(name: &'static str, bits: u32, ty: &'static str) -> Reg {
    Reg {
        name,
        bits,
        ty,
        group: Some("float"),
    }
}

/// The features and their registers, in register-number order.
const FEATURES: [(&str, &[Reg]); 4] = [
    (
        "org.gnu.gdb.i386.core",
        &[
            reg("rax", 64, "int64"),
            reg("rbx", 64, "int64"),
            reg("rcx", 64, "int64"),
            reg("rdx", 64, "int64"),
            reg("rsi", 64, "int64"),
            reg("rdi", 64, "int64"),
            reg("rbp", 64, "data_ptr"),
            reg("rsp", 64, "data_ptr"),
            reg("r8", 64, "int64"),
            reg("r9", 64, "int64"),
            reg("r10", 64, "int64"),
            reg("r11", 64, "int64"),
            reg("r12", 64, "int64"),
            reg("r13", 64, "int64"),
            reg("r14", 64, "int64"),
            reg("r15", 64, "int64"),
            reg("rip", 64, "code_ptr"),
            reg("eflags", 32, "i386_eflags"),
            reg("cs", 32, "int32"),
            reg("ss", 32, "int32"),
            reg("ds", 32, "int32"),
            reg("es", 32, "int32"),
            reg("fs", 32, "int32"),
            reg("gs", 32, "int32"),
            reg("st0", 80, "i387_ext"),
            reg("st1", 80, "i387_ext"),
            reg("st2", 80, "i387_ext"),
            reg("st3", 80, "i387_ext"),
            reg("st4", 80, "i387_ext"),
            reg("st5", 80, "i387_ext"),
            reg("st6", 80, "i387_ext"),
            reg("st7", 80, "i387_ext"),
            float("fctrl", 32, "int"),
            float("fstat", 32, "int"),
            float("ftag", 32, "int"),
            float("fiseg", 32, "int"),
            float("fioff", 32, "int"),
            float("foseg", 32, "int"),
            float("fooff", 32, "int"),
            float("fop", 32, "int"),
        ],
    ),
    (
        "org.gnu.gdb.i386.sse",
        &[
            reg("xmm0", 128, "vec128"),
            reg("xmm1", 128, "vec128"),
            reg("xmm2", 128, "vec128"),
            reg("xmm3", 128, "vec128"),
            reg("xmm4", 128, "vec128"),
            reg("xmm5", 128, "vec128"),
            reg("xmm6", 128, "vec128"),
            reg("xmm7", 128, "vec128"),
            reg("xmm8", 128, "vec128"),
            reg("xmm9", 128, "vec128"),
            reg("xmm10", 128, "vec128"),
            reg("xmm11", 128, "vec128"),
            reg("xmm12", 128, "vec128"),
            reg("xmm13", 128, "vec128"),
            reg("xmm14", 128, "vec128"),
            reg("xmm15", 128, "vec128"),
            Reg {
                name: "mxcsr",
                bits: 32,
                ty: "i386_mxcsr",
                group: Some("vector"),
            },
        ],
    ),
    ("org.gnu.gdb.i386.linux", &[reg("orig_rax", 64, "int")]),
    (
        "org.gnu.gdb.i386.segments",
        &[reg("fs_base", 64, "int"), reg("gs_base", 64, "int")],
    ),
];

/// Number of registers sent.
pub const COUNT: usize = 60;
/// Register numbers gdb uses for rip and orig_rax.
pub const RIP: usize = 16;

/// The flag type of the core feature (gdb's 64bit-core.xml).
const CORE_TYPES: &str = r#"<flags id="i386_eflags" size="4">
  <field name="CF" start="0" end="0"/><field name="" start="1" end="1"/>
  <field name="PF" start="2" end="2"/><field name="AF" start="4" end="4"/>
  <field name="ZF" start="6" end="6"/><field name="SF" start="7" end="7"/>
  <field name="TF" start="8" end="8"/><field name="IF" start="9" end="9"/>
  <field name="DF" start="10" end="10"/><field name="OF" start="11" end="11"/>
  <field name="NT" start="14" end="14"/><field name="RF" start="16" end="16"/>
  <field name="VM" start="17" end="17"/><field name="AC" start="18" end="18"/>
  <field name="VIF" start="19" end="19"/><field name="VIP" start="20" end="20"/>
  <field name="ID" start="21" end="21"/>
</flags>
"#;

/// The vector and flag types of the SSE feature (gdb's 64bit-sse.xml; types are per feature).
const SSE_TYPES: &str = r#"<vector id="v4f" type="ieee_single" count="4"/>
<vector id="v2d" type="ieee_double" count="2"/>
<vector id="v16i8" type="int8" count="16"/>
<vector id="v8i16" type="int16" count="8"/>
<vector id="v4i32" type="int32" count="4"/>
<vector id="v2i64" type="int64" count="2"/>
<union id="vec128">
  <field name="v4_float" type="v4f"/><field name="v2_double" type="v2d"/>
  <field name="v16_int8" type="v16i8"/><field name="v8_int16" type="v8i16"/>
  <field name="v4_int32" type="v4i32"/><field name="v2_int64" type="v2i64"/>
  <field name="uint128" type="uint128"/>
</union>
<flags id="i386_mxcsr" size="4">
  <field name="IE" start="0" end="0"/><field name="DE" start="1" end="1"/>
  <field name="ZE" start="2" end="2"/><field name="OE" start="3" end="3"/>
  <field name="UE" start="4" end="4"/><field name="PE" start="5" end="5"/>
  <field name="DAZ" start="6" end="6"/><field name="IM" start="7" end="7"/>
  <field name="DM" start="8" end="8"/><field name="ZM" start="9" end="9"/>
  <field name="OM" start="10" end="10"/><field name="UM" start="11" end="11"/>
  <field name="PM" start="12" end="12"/><field name="FZ" start="15" end="15"/>
</flags>
"#;

/// The target description: architecture `i386:x86-64`, OS ABI GNU/Linux, the 60 registers.
pub fn target_xml() -> String {
    let mut x = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target version=\"1.0\">\n<architecture>i386:x86-64</architecture>\n<osabi>GNU/Linux</osabi>\n",
    );
    let mut n = 0;
    for (i, (name, regs)) in FEATURES.iter().enumerate() {
        x.push_str(&format!("<feature name=\"{name}\">\n"));
        match i {
            0 => x.push_str(CORE_TYPES),
            1 => x.push_str(SSE_TYPES),
            _ => {}
        }
        for r in *regs {
            x.push_str(&format!(
                "<reg name=\"{}\" bitsize=\"{}\" type=\"{}\" regnum=\"{n}\"{}/>\n",
                r.name,
                r.bits,
                r.ty,
                r.group
                    .map(|g| format!(" group=\"{g}\""))
                    .unwrap_or_default()
            ));
            n += 1;
        }
        x.push_str("</feature>\n");
    }
    x.push_str("</target>\n");
    x
}

/// The general registers in gdb's order 0–23, then 57–59 (orig_rax, fs_base, gs_base).
fn gprs(r: &Regs) -> [u64; 27] {
    [
        r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11, r.r12,
        r.r13, r.r14, r.r15, r.rip, r.eflags, r.cs, r.ss, r.ds, r.es, r.fs, r.gs, r.orig_rax,
        r.fs_base, r.gs_base,
    ]
}

/// The full x87 tag word from FXSAVE's abridged one (bit set: register valid → tag 00, else
/// empty → 11).
fn full_tag(abridged: u16) -> u32 {
    (0..8).fold(0u32, |t, i| {
        if abridged & (1 << i) != 0 {
            t
        } else {
            t | (0b11 << (2 * i))
        }
    })
}

/// Register `n`'s bytes (its size, little-endian); `None` for a number beyond [`COUNT`].
pub fn register(n: usize, r: &Regs, f: &FpRegs) -> Option<Vec<u8>> {
    let g = gprs(r);
    let word = |i: usize| f.st_space[i].to_le_bytes();
    Some(match n {
        0..=16 => g[n].to_le_bytes().to_vec(),
        17..=23 => (g[n] as u32).to_le_bytes().to_vec(),
        24..=31 => {
            let k = (n - 24) * 4;
            let mut b: Vec<u8> = (k..k + 4).flat_map(word).collect();
            b.truncate(10);
            b
        }
        32 => u32::from(f.cwd).to_le_bytes().to_vec(),
        33 => u32::from(f.swd).to_le_bytes().to_vec(),
        34 => full_tag(f.ftw).to_le_bytes().to_vec(),
        35 => ((f.rip >> 32) as u32).to_le_bytes().to_vec(),
        36 => (f.rip as u32).to_le_bytes().to_vec(),
        37 => ((f.rdp >> 32) as u32).to_le_bytes().to_vec(),
        38 => (f.rdp as u32).to_le_bytes().to_vec(),
        39 => u32::from(f.fop).to_le_bytes().to_vec(),
        40..=55 => {
            let k = (n - 40) * 4;
            (k..k + 4)
                .flat_map(|i| f.xmm_space[i].to_le_bytes())
                .collect()
        }
        56 => f.mxcsr.to_le_bytes().to_vec(),
        57..=59 => g[n - 57 + 24].to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// All registers, concatenated (the `g` reply's bytes).
pub fn all(r: &Regs, f: &FpRegs) -> Vec<u8> {
    (0..COUNT)
        .flat_map(|n| register(n, r, f).expect("in range"))
        .collect()
}

/// Sets general register `n` (0–23, 57–59) from its bytes; false for the x87/SSE registers
/// (not written) or a wrong size.
pub fn set_register(n: usize, bytes: &[u8], r: &mut Regs) -> bool {
    let v = match bytes.len() {
        8 => u64::from_le_bytes(bytes.try_into().expect("8")),
        4 => u64::from(u32::from_le_bytes(bytes.try_into().expect("4"))),
        _ => return false,
    };
    let slot = match n {
        0 => &mut r.rax,
        1 => &mut r.rbx,
        2 => &mut r.rcx,
        3 => &mut r.rdx,
        4 => &mut r.rsi,
        5 => &mut r.rdi,
        6 => &mut r.rbp,
        7 => &mut r.rsp,
        8 => &mut r.r8,
        9 => &mut r.r9,
        10 => &mut r.r10,
        11 => &mut r.r11,
        12 => &mut r.r12,
        13 => &mut r.r13,
        14 => &mut r.r14,
        15 => &mut r.r15,
        16 => &mut r.rip,
        17 => &mut r.eflags,
        18 => &mut r.cs,
        19 => &mut r.ss,
        20 => &mut r.ds,
        21 => &mut r.es,
        22 => &mut r.fs,
        23 => &mut r.gs,
        57 => &mut r.orig_rax,
        58 => &mut r.fs_base,
        59 => &mut r.gs_base,
        _ => return false,
    };
    let want = if (17..=23).contains(&n) { 4 } else { 8 };
    if bytes.len() != want {
        return false;
    }
    *slot = v;
    true
}

/// Size in bytes of register `n`.
pub fn size(n: usize) -> usize {
    match n {
        0..=16 | 57..=59 => 8,
        24..=31 => 10,
        40..=55 => 16,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zero_regs() -> (Regs, FpRegs) {
        // SAFETY: both are plain integer structs; all-zero is a valid value.
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) }
    }

    #[test]
    fn the_description_numbers_sixty_registers_in_gdb_order() {
        let x = target_xml();
        assert_eq!(x.matches("<reg ").count(), COUNT);
        assert!(x.contains(r#"<reg name="rip" bitsize="64" type="code_ptr" regnum="16"/>"#));
        assert!(x.contains(r#"name="xmm0" bitsize="128" type="vec128" regnum="40""#));
        assert!(x.contains(r#"<reg name="orig_rax" bitsize="64" type="int" regnum="57"/>"#));
        assert!(x.contains(r#"<reg name="gs_base" bitsize="64" type="int" regnum="59"/>"#));
        // Each feature defines the types its registers use (gdb scopes types by feature).
        let sse = &x[x.find("org.gnu.gdb.i386.sse").unwrap()..];
        assert!(sse[..sse.find("</feature>").unwrap()].contains(r#"<union id="vec128">"#));
    }

    #[test]
    fn g_bytes_follow_the_sizes_and_place_rip_and_xmm() {
        let (mut r, mut f) = zero_regs();
        r.rip = 0x5555_5555_1234;
        r.eflags = 0x246;
        r.gs_base = 7;
        f.xmm_space[4] = 0xdead_beef; // xmm1's low word
        f.ftw = 0x01;
        let g = all(&r, &f);
        let total: usize = (0..COUNT).map(size).sum();
        assert_eq!(g.len(), total);
        assert_eq!(&g[16 * 8..17 * 8], &0x5555_5555_1234u64.to_le_bytes());
        assert_eq!(&g[17 * 8..17 * 8 + 4], &0x246u32.to_le_bytes());
        let xmm1 = 17 * 8 + 7 * 4 + 8 * 10 + 8 * 4 + 16;
        assert_eq!(&g[xmm1..xmm1 + 4], &0xdead_beefu32.to_le_bytes());
        assert_eq!(&g[total - 8..], &7u64.to_le_bytes());
        // st0 valid, st1..st7 empty.
        assert_eq!(register(34, &r, &f).unwrap(), 0xfffcu32.to_le_bytes());
    }

    #[test]
    fn general_registers_are_set_and_others_refused() {
        let (mut r, _) = zero_regs();
        assert!(set_register(3, &42u64.to_le_bytes(), &mut r));
        assert_eq!(r.rdx, 42);
        assert!(set_register(17, &0x202u32.to_le_bytes(), &mut r));
        assert_eq!(r.eflags, 0x202);
        assert!(!set_register(40, &[0; 16], &mut r));
        assert!(!set_register(3, &[0; 4], &mut r));
    }
}
