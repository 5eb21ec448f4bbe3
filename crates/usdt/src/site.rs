//! The probe site: the nop a tracer patches, and the SystemTap v3 note that describes it.
//!
//! Follows sys/sdt.h (systemtap-sdt-dev, `_SDT_ASM_BODY` and `_SDT_ASM_BASE`) and the SystemTap wiki
//! page "UserSpaceProbeImplementation". Per site, in the `.note.stapsdt` section (type `SHT_NOTE`,
//! not allocated):
//!
//! ```text
//! namesz=8  descsz=N  type=3  "stapsdt\0"  (padded to 4)
//! desc: pc (8 bytes)  .stapsdt.base address (8)  semaphore address (8)
//!       "provider\0"  "name\0"  "argspec argspec ...\0"            (note padded to 4)
//! ```
//!
//! plus one byte in the allocated `.stapsdt.base` section (shared by every site, a COMDAT group),
//! whose link-time address in the note lets a consumer detect prelink-style address shifts.
//!
//! Argument specs are `SIZE@REGISTER` (`-4@%edi`, `8@%rsi` on x86-64; `-4@w0`, `8@x1` on aarch64).
//! The register is whatever the compiler allocated for the `asm!` operand; the size comes from the
//! argument's [`Arg::SPEC`](crate::Arg::SPEC) through a `const` operand, and assembler `.if`
//! directives pick the register-name width matching it, as sys/sdt.h's assembler macros do.
//!
//! Next to it, once per probe (not per site), a `.note.sightline` note (owner `sightline`, type 1)
//! names the probe's arguments and their Rust types and carries the provider's stability, for
//! tracers that read it (docs/usdt.md, "The typed-argument note"):
//!
//! ```text
//! namesz=10  descsz=N  type=1  "sightline\0"  (padded to 4)
//! desc: "provider\0"  "name\0"  "Name/Data/Class\0"  "arg:type\0" ...   (note padded to 4)
//! ```
//!
//! Every site carries the note's text, but it is assembled once per object (an `.ifndef` on a
//! per-probe symbol) in a COMDAT group named after provider and probe, so the linker keeps one
//! copy per probe however many objects fire it.
//!
//! Differences from sys/sdt.h, on purpose:
//! - The x86-64 site is a 5-byte `nopl 0x0(%rax,%rax,1)` (`0f 1f 44 00 00`), emitted as bytes so the
//!   assembler cannot shorten it; sys/sdt.h emits a 1-byte `nop`. A uprobe on a 5-byte nop is
//!   emulated by the kernel without single-stepping an out-of-line copy.
//! - `.stapsdt.base` has `SHF_GNU_RETAIN` ("R"): rustc links with `--gc-sections`, and nothing
//!   allocated refers to the section, so without it lld drops the section and the note's base
//!   address becomes 0.
//! - Every probe has a semaphore and the site sits behind the semaphore test.

// ---------------------------------------------------------------------------------------------
// The typed-argument note (every target; only Linux x86-64 and aarch64 sites assemble it)
// ---------------------------------------------------------------------------------------------

/// The assembler text of one argument entry of the `.note.sightline` note: `.asciz "NAME:TYPE"`,
/// the type as `stringify!` prints it (`&str`, `Json<&Job>`).
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_note_arg {
    ($name:ident $t:ty) => {
        ::core::concat!(
            ".asciz \"",
            ::core::stringify!($name),
            ":",
            ::core::stringify!($t),
            "\"\n",
        )
    };
}

/// The entries of a `&[u8]` argument (two note arguments): `NAME:&[u8]` (the data pointer) and
/// `NAME.len:usize` (the length in bytes).
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_note_slice {
    ($name:ident) => {
        ::core::concat!(
            ".asciz \"",
            ::core::stringify!($name),
            ":&[u8]\"\n.asciz \"",
            ::core::stringify!($name),
            ".len:usize\"\n",
        )
    };
}

/// The assembler text of a probe's `.note.sightline` note (see the module docs), emitted once per
/// object file and kept once per linked file (COMDAT group `.note.sightline.PROVIDER.PROBE`).
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_typed_note {
    ($provider:ident $probe:ident $stability:literal [$($no:tt)*]) => {
        ::core::concat!(
            ".ifndef .Lsightline_usdt_note.", ::core::stringify!($provider), ".", ::core::stringify!($probe), "\n",
            ".pushsection .note.sightline, \"G\", \"note\", .note.sightline.",
            ::core::stringify!($provider), ".", ::core::stringify!($probe), ", comdat\n",
            ".balign 4\n",
            ".Lsightline_usdt_note.", ::core::stringify!($provider), ".", ::core::stringify!($probe), ":\n",
            ".4byte 982f-981f, 984f-983f, 1\n",
            "981: .asciz \"sightline\"\n",
            "982: .balign 4\n",
            "983: .asciz \"", ::core::stringify!($provider), "\"\n",
            ".asciz \"", ::core::stringify!($probe), "\"\n",
            ".asciz \"", $stability, "\"\n",
            $($no)*
            "984: .balign 4\n",
            ".popsection\n",
            ".endif\n",
        )
    };
}

// ---------------------------------------------------------------------------------------------
// x86-64 Linux
// ---------------------------------------------------------------------------------------------

/// The assembler text of one argument spec (x86-64): `.set` the size from the positional `const`
/// operand, then print `SIZE@%reg` with the register width that size calls for.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_arg {
    ($sep:literal $name:ident) => {
        ::core::concat!(
            ".ascii \"",
            $sep,
            "\"\n",
            ".set .Lsightline_usdt_spec, {}\n",
            ".if .Lsightline_usdt_spec == 1\n.ascii \"1@{",
            ::core::stringify!($name),
            ":l}\"\n",
            ".elseif .Lsightline_usdt_spec == -1\n.ascii \"-1@{",
            ::core::stringify!($name),
            ":l}\"\n",
            ".elseif .Lsightline_usdt_spec == 2\n.ascii \"2@{",
            ::core::stringify!($name),
            ":x}\"\n",
            ".elseif .Lsightline_usdt_spec == -2\n.ascii \"-2@{",
            ::core::stringify!($name),
            ":x}\"\n",
            ".elseif .Lsightline_usdt_spec == 4\n.ascii \"4@{",
            ::core::stringify!($name),
            ":e}\"\n",
            ".elseif .Lsightline_usdt_spec == -4\n.ascii \"-4@{",
            ::core::stringify!($name),
            ":e}\"\n",
            ".elseif .Lsightline_usdt_spec == -8\n.ascii \"-8@{",
            ::core::stringify!($name),
            ":r}\"\n",
            ".else\n.ascii \"8@{",
            ::core::stringify!($name),
            ":r}\"\n",
            ".endif\n",
        )
    };
}

/// The assembler text of a `&[u8]` argument (x86-64): pointer (named operand) and length
/// (positional operand), both unsigned 8-byte values.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_slice {
    ($sep:literal $name:ident) => {
        ::core::concat!(
            ".ascii \"",
            $sep,
            "8@{",
            ::core::stringify!($name),
            ":r} 8@{:r}\"\n",
        )
    };
}

/// The probe site (x86-64): the 5-byte nop, the note, and `.stapsdt.base`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_site {
    ([$provider:ident $probe:ident] [$($tm:tt)*] [$($po:tt)*] [$($na:tt)*] [$stability:literal [$($no:tt)*]]) => {
        // SAFETY: the template executes only a nop (`nopl 0x0(%rax,%rax,1)`); everything else is
        // assembler data in sections of their own (`.note.stapsdt`, `.stapsdt.base`), restored by
        // `.popsection`. The operands are plain integer inputs and the address of the semaphore
        // static; nothing is written, the stack and flags are untouched. Pointer arguments point
        // into staged values that live until after this block (`readonly` keeps their stores).
        unsafe {
            ::core::arch::asm!(
                ::core::concat!(
                    "990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n",
                    ".pushsection .note.stapsdt, \"\", \"note\"\n",
                    ".balign 4\n",
                    ".4byte 992f-991f, 994f-993f, 3\n",
                    "991: .asciz \"stapsdt\"\n",
                    "992: .balign 4\n",
                    "993: .8byte 990b\n",
                    ".8byte _.stapsdt.base\n",
                    ".8byte {__sightline_usdt_semaphores} + {}\n",
                    ".asciz \"", ::core::stringify!($provider), "\"\n",
                    ".asciz \"", ::core::stringify!($probe), "\"\n",
                    $($tm)*
                    ".byte 0\n",
                    "994: .balign 4\n",
                    ".popsection\n",
                    ".ifndef _.stapsdt.base\n",
                    ".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat\n",
                    ".weak _.stapsdt.base\n",
                    ".hidden _.stapsdt.base\n",
                    "_.stapsdt.base: .space 1\n",
                    ".size _.stapsdt.base, 1\n",
                    ".popsection\n",
                    ".endif\n",
                    $crate::__usdt_typed_note!($provider $probe $stability [$($no)*]),
                ),
                const ::core::mem::offset_of!(super::Semaphores, $probe),
                $($po)*
                $($na)*
                __sightline_usdt_semaphores = sym super::SEMAPHORES,
                options(att_syntax, nostack, preserves_flags, readonly),
            )
        }
    };
}

// ---------------------------------------------------------------------------------------------
// aarch64 Linux
// ---------------------------------------------------------------------------------------------

/// The assembler text of one argument spec (aarch64): `SIZE@wN` for 1-, 2- and 4-byte values,
/// `SIZE@xN` for 8-byte ones, as GCC's sys/sdt.h operands print.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_arg {
    ($sep:literal $name:ident) => {
        ::core::concat!(
            ".ascii \"",
            $sep,
            "\"\n",
            ".set .Lsightline_usdt_spec, {}\n",
            ".if .Lsightline_usdt_spec == 1\n.ascii \"1@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == -1\n.ascii \"-1@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == 2\n.ascii \"2@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == -2\n.ascii \"-2@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == 4\n.ascii \"4@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == -4\n.ascii \"-4@{",
            ::core::stringify!($name),
            ":w}\"\n",
            ".elseif .Lsightline_usdt_spec == -8\n.ascii \"-8@{",
            ::core::stringify!($name),
            ":x}\"\n",
            ".else\n.ascii \"8@{",
            ::core::stringify!($name),
            ":x}\"\n",
            ".endif\n",
        )
    };
}

/// The assembler text of a `&[u8]` argument (aarch64): pointer and length, 8 bytes each.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_slice {
    ($sep:literal $name:ident) => {
        ::core::concat!(
            ".ascii \"",
            $sep,
            "8@{",
            ::core::stringify!($name),
            ":x} 8@{:x}\"\n",
        )
    };
}

/// The probe site (aarch64): a `nop` (the architecture's only nop, 4 bytes), the note, and
/// `.stapsdt.base`.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_site {
    ([$provider:ident $probe:ident] [$($tm:tt)*] [$($po:tt)*] [$($na:tt)*] [$stability:literal [$($no:tt)*]]) => {
        // SAFETY: the template executes only a `nop`; everything else is assembler data in sections
        // of their own, restored by `.popsection`. The operands are integer inputs and the address
        // of the semaphore static; nothing is written, the stack and flags are untouched. Pointer
        // arguments point into staged values that live until after this block.
        unsafe {
            ::core::arch::asm!(
                ::core::concat!(
                    "990: nop\n",
                    ".pushsection .note.stapsdt, \"\", \"note\"\n",
                    ".balign 4\n",
                    ".4byte 992f-991f, 994f-993f, 3\n",
                    "991: .asciz \"stapsdt\"\n",
                    "992: .balign 4\n",
                    "993: .8byte 990b\n",
                    ".8byte _.stapsdt.base\n",
                    ".8byte {__sightline_usdt_semaphores} + {}\n",
                    ".asciz \"", ::core::stringify!($provider), "\"\n",
                    ".asciz \"", ::core::stringify!($probe), "\"\n",
                    $($tm)*
                    ".byte 0\n",
                    "994: .balign 4\n",
                    ".popsection\n",
                    ".ifndef _.stapsdt.base\n",
                    ".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat\n",
                    ".weak _.stapsdt.base\n",
                    ".hidden _.stapsdt.base\n",
                    "_.stapsdt.base: .space 1\n",
                    ".size _.stapsdt.base, 1\n",
                    ".popsection\n",
                    ".endif\n",
                    $crate::__usdt_typed_note!($provider $probe $stability [$($no)*]),
                ),
                const ::core::mem::offset_of!(super::Semaphores, $probe),
                $($po)*
                $($na)*
                __sightline_usdt_semaphores = sym super::SEMAPHORES,
                options(nostack, preserves_flags, readonly),
            )
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Everything else: no notes, no site. The probe compiles, `is_enabled()` stays false (nothing sets
// the semaphore), and `fire` does nothing.
// ---------------------------------------------------------------------------------------------

/// Unsupported target: no argument spec.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_arg {
    ($sep:literal $name:ident) => {
        ""
    };
}

/// Unsupported target: no argument spec.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_spec_slice {
    ($sep:literal $name:ident) => {
        ""
    };
}

/// Unsupported target: the staged values are only borrowed (so they count as used) and dropped.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_site {
    ([$provider:ident $probe:ident] [$($tm:tt)*] [$($po:tt)*]
     [$($name:ident = in(reg) $e:expr,)*] [$($note:tt)*]) => {
        $( let _ = &$name; )*
    };
}
