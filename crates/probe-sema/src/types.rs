//! D's types as the analysis infers them, and C's integer conversions.
//!
//! Follows the DTrace guide, "Types, Operators, and Expressions" (integer types, D's `string`
//! type, "Arithmetic Conversions" which are ISO C's integer promotions and usual arithmetic
//! conversions) with the LP64 data model (`long` and pointers are 8 bytes).

use std::fmt;

/// The type of a D expression, variable, aggregation key or probe argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A C integer of `bytes` (1, 2, 4 or 8) and signedness. `char` is `Int { bytes: 1, signed: true }`.
    Int {
        /// Width in bytes.
        bytes: u8,
        /// Signed?
        signed: bool,
    },
    /// A pointer (8 bytes). Arithmetic treats it as `uintptr_t`; `*p` reads the pointee from memory.
    Ptr(Box<Type>),
    /// D's `string`: NUL-terminated, stored in `strsize` bytes (option `strsize`, default 256).
    String,
    /// A kernel (`user == false`, from `stack()`) or user (`ustack()`) stack: an array of return
    /// addresses printed symbolized. `frames` is the number of frames recorded.
    Stack {
        /// User stack?
        user: bool,
        /// Frames recorded.
        frames: u32,
    },
    /// An address printed as a symbol (`sym()`, `func()`, `mod()`, `usym()`, `ufunc()`, `umod()`,
    /// `uaddr()`): held as a 64-bit address.
    Symbol(SymKind),
    /// A fixed-size array (a tracepoint field such as `u32 args[6]`); elements by constant index.
    Array(Box<Type>, u32),
    /// A kernel structure or union known from BTF (see [`crate::btf`]). Only ever the pointee of a
    /// [`Type::Ptr`] (`curthread` is `struct task_struct *`): D reads members through it, never the
    /// whole structure, so to the code generator such a pointer is just an address.
    Struct {
        /// Name (`task_struct`).
        name: String,
        /// BTF type id.
        id: u32,
        /// Size in bytes.
        size: u32,
    },
    /// No value (an action such as `trace()` used as an expression is an error).
    Void,
}

/// How a [`Type::Symbol`] address is printed (DTrace guide, "Actions and Subroutines").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymKind {
    /// `sym(addr)` / `func(addr)`: kernel ``module`symbol`` (no offset).
    Sym,
    /// `mod(addr)`: kernel module name.
    Mod,
    /// `usym(addr)` / `ufunc(addr)`: user ``object`symbol``.
    Usym,
    /// `umod(addr)`: user object name.
    Umod,
    /// `uaddr(addr)`: user ``object`symbol+0xoff``.
    Uaddr,
}

impl SymKind {
    /// True for the kinds of user addresses (`usym`, `ufunc`, `umod`, `uaddr`), which are
    /// resolved in the mappings of the process they were taken in.
    pub fn is_user(self) -> bool {
        matches!(self, SymKind::Usym | SymKind::Umod | SymKind::Uaddr)
    }
}

impl Type {
    /// `int` (4 bytes, signed).
    pub const INT: Type = Type::Int {
        bytes: 4,
        signed: true,
    };
    /// `unsigned int`.
    pub const UINT: Type = Type::Int {
        bytes: 4,
        signed: false,
    };
    /// `int64_t` / `long`.
    pub const I64: Type = Type::Int {
        bytes: 8,
        signed: true,
    };
    /// `uint64_t` / `unsigned long` / `size_t` / `uintptr_t`.
    pub const U64: Type = Type::Int {
        bytes: 8,
        signed: false,
    };
    /// `char`.
    pub const CHAR: Type = Type::Int {
        bytes: 1,
        signed: true,
    };

    /// True for integers and pointers (the scalar types arithmetic accepts).
    pub fn is_integral(&self) -> bool {
        matches!(self, Type::Int { .. } | Type::Ptr(_))
    }

    /// True for [`Type::Int`].
    pub fn is_int(&self) -> bool {
        matches!(self, Type::Int { .. })
    }

    /// True for [`Type::String`].
    pub fn is_string(&self) -> bool {
        matches!(self, Type::String)
    }

    /// Size in bytes of a value of this type when stored in a map or record (`strsize` for strings).
    pub fn size(&self, strsize: u32) -> u32 {
        match self {
            Type::Int { bytes, .. } => *bytes as u32,
            Type::Ptr(_) | Type::Symbol(_) => 8,
            Type::String => strsize,
            // A user stack is recorded after the process id it was taken in.
            Type::Stack { user: true, frames } => 8 * (frames + 1),
            Type::Stack { frames, .. } => 8 * frames,
            Type::Array(t, n) => t.size(strsize) * n,
            Type::Struct { size, .. } => *size,
            Type::Void => 0,
        }
    }

    /// The integer view of an integral type: pointers are `uintptr_t`; other types `None`.
    pub fn as_int(&self) -> Option<(u8, bool)> {
        match self {
            Type::Int { bytes, signed } => Some((*bytes, *signed)),
            Type::Ptr(_) | Type::Symbol(_) => Some((8, false)),
            _ => None,
        }
    }

    /// C's integer promotion: types narrower than `int` become `int`; others are unchanged
    /// (ISO C 6.3.1.1; pointers become `uintptr_t`).
    pub fn promoted(&self) -> Option<Type> {
        let (bytes, signed) = self.as_int()?;
        Some(if bytes < 4 {
            Type::INT
        } else {
            Type::Int { bytes, signed }
        })
    }
}

/// The usual arithmetic conversions of ISO C 6.3.1.8 for two integral operand types: the common
/// type both are converted to before a binary operation. `None` if either is not integral.
///
/// With ranks by width (LP64: `long` and `long long` share a rank): after promotion, the same
/// signedness takes the wider type; otherwise an unsigned type of rank >= the signed one wins; a
/// signed type wider than the unsigned one wins; else the unsigned version of the signed type.
pub fn usual_arithmetic(a: &Type, b: &Type) -> Option<Type> {
    let (ab, asg) = a.promoted()?.as_int()?;
    let (bb, bsg) = b.promoted()?.as_int()?;
    let (bytes, signed) = if asg == bsg {
        (ab.max(bb), asg)
    } else {
        let (sb, ub) = if asg { (ab, bb) } else { (bb, ab) };
        if ub >= sb { (ub, false) } else { (sb, true) }
    };
    Some(Type::Int { bytes, signed })
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Int { bytes, signed } => {
                let s = match (bytes, signed) {
                    (1, true) => "char",
                    (1, false) => "uint8_t",
                    (2, true) => "short",
                    (2, false) => "uint16_t",
                    (4, true) => "int",
                    (4, false) => "uint32_t",
                    (8, true) => "int64_t",
                    (8, false) => "uint64_t",
                    _ => return write!(f, "int{}{}", if *signed { "" } else { "u" }, bytes * 8),
                };
                f.write_str(s)
            }
            Type::Ptr(t) => write!(f, "{t} *"),
            Type::String => f.write_str("string"),
            Type::Stack { user: false, .. } => f.write_str("stack"),
            Type::Stack { user: true, .. } => f.write_str("ustack"),
            Type::Symbol(k) => f.write_str(match k {
                SymKind::Sym => "symbol",
                SymKind::Mod => "module",
                SymKind::Usym => "user symbol",
                SymKind::Umod => "user module",
                SymKind::Uaddr => "user address",
            }),
            Type::Array(t, n) => write!(f, "{t}[{n}]"),
            Type::Struct { name, .. } => write!(f, "struct {name}"),
            Type::Void => f.write_str("void"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(bytes: u8, signed: bool) -> Type {
        Type::Int { bytes, signed }
    }

    #[test]
    fn usual_arithmetic_conversions_follow_c() {
        // char + char -> int (promotion).
        assert_eq!(usual_arithmetic(&Type::CHAR, &Type::CHAR), Some(Type::INT));
        // int + unsigned int -> unsigned int.
        assert_eq!(usual_arithmetic(&Type::INT, &Type::UINT), Some(Type::UINT));
        // int64 + uint32 -> int64 (signed is wider).
        assert_eq!(usual_arithmetic(&Type::I64, &Type::UINT), Some(Type::I64));
        // int64 + uint64 -> uint64.
        assert_eq!(usual_arithmetic(&Type::I64, &Type::U64), Some(Type::U64));
        // unsigned short + int -> int.
        assert_eq!(
            usual_arithmetic(&int(2, false), &Type::INT),
            Some(Type::INT)
        );
        assert_eq!(usual_arithmetic(&Type::String, &Type::INT), None);
    }
}
