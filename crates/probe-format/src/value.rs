//! The values a probe record carries to user space, as the printers see them.
//!
//! A record field is one [`Value`]: an integer with its C width and signedness ([`Int`]), a string,
//! raw bytes, a symbolized address ([`Symbol`]) or a stack ([`Stack`]). The runtime decodes the
//! ring-buffer bytes into these using the record layout from the code generator; symbolization
//! (kernel `kallsyms`, user ELF symbols) happens before printing and fills [`Symbol::name`].

/// An integer as D typed it: raw bits, width in bytes (1, 2, 4 or 8) and signedness.
///
/// The width and signedness decide how DTrace prints it (`trace()` picks `%16lld`, `%8d`, `%5d`
/// or `%3d` by width; `printf("%d")` prints unsigned types as unsigned: dt_printf.c
/// `pfcheck_dint`). Bits above `bytes * 8` are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Int {
    /// The raw two's-complement bits (only the low `bytes * 8` are meaningful).
    pub bits: u64,
    /// Width of the C type in bytes: 1, 2, 4 or 8.
    pub bytes: u8,
    /// Whether the C type is signed.
    pub signed: bool,
}

impl Int {
    /// A signed 64-bit integer (`int64_t`, D's type for most built-ins and `long`).
    pub fn i64(v: i64) -> Self {
        Int {
            bits: v as u64,
            bytes: 8,
            signed: true,
        }
    }

    /// An unsigned 64-bit integer (`uint64_t`: `timestamp`, `count()` results).
    pub fn u64(v: u64) -> Self {
        Int {
            bits: v,
            bytes: 8,
            signed: false,
        }
    }

    /// A signed 32-bit integer (`int`: `pid`, `cpu`, `errno` in DTrace's typing).
    pub fn i32(v: i32) -> Self {
        Int {
            bits: v as u32 as u64,
            bytes: 4,
            signed: true,
        }
    }

    /// An unsigned 32-bit integer (`uint32_t`, `uid_t`).
    pub fn u32(v: u32) -> Self {
        Int {
            bits: v as u64,
            bytes: 4,
            signed: false,
        }
    }

    /// Width in bits, clamped to 8..=64 (an invalid width is treated as 8 bytes).
    pub fn width_bits(&self) -> u32 {
        match self.bytes {
            1 => 8,
            2 => 16,
            4 => 32,
            _ => 64,
        }
    }

    /// The value sign-extended from its width (as C converts a signed type to `long long`).
    pub fn as_i64(&self) -> i64 {
        let w = self.width_bits();
        if w == 64 {
            self.bits as i64
        } else {
            let shift = 64 - w;
            ((self.bits << shift) as i64) >> shift
        }
    }

    /// The value zero-extended from its width (as C converts an unsigned type).
    pub fn as_u64(&self) -> u64 {
        let w = self.width_bits();
        if w == 64 {
            self.bits
        } else {
            self.bits & ((1u64 << w) - 1)
        }
    }

    /// The value as its C type means it: sign-extended when signed, zero-extended otherwise.
    pub fn as_i128(&self) -> i128 {
        if self.signed {
            self.as_i64() as i128
        } else {
            self.as_u64() as i128
        }
    }
}

/// A code address with what symbolization found about it.
///
/// Printed by DTrace as ``module`name+0xoff`` (`%a`, `stack()`), ``module`name`` (`sym()`,
/// `func()`: no offset) or `0x<hex>` when no symbol is known (dt_consume.c `dt_print_sym`,
/// `dt_print_stack`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Symbol {
    /// The address (kernel or user virtual address).
    pub addr: u64,
    /// The containing module (`vmlinux`, a kernel module, or a user object's file name), if known.
    pub module: Option<String>,
    /// The symbol's name, if known.
    pub name: Option<String>,
    /// `addr` minus the symbol's start address, in bytes (0 when `name` is `None`).
    pub offset: u64,
}

impl Symbol {
    /// An address with nothing known about it.
    pub fn unknown(addr: u64) -> Self {
        Symbol {
            addr,
            ..Symbol::default()
        }
    }

    /// ``module` `` when the module is known, else empty.
    fn module_prefix(&self) -> String {
        self.module
            .as_deref()
            .map(|m| format!("{m}`"))
            .unwrap_or_default()
    }

    /// ``module`name+0xoff``, ``module`name`` when the offset is 0, ``module`0xaddr`` when only the
    /// module is known, `module` for a module alone ([`Symbol::is_module_only`]), `0xaddr` otherwise (dt_consume.c `dt_print_stack`, dtrace `%a`).
    pub fn with_offset(&self) -> String {
        let prefix = self.module_prefix();
        match &self.name {
            None if self.is_module_only() => self.module.clone().unwrap_or_default(),
            Some(n) if self.offset > 0 => format!("{prefix}{n}+0x{:x}", self.offset),
            Some(n) => format!("{prefix}{n}"),
            None => format!("{prefix}0x{:x}", self.addr),
        }
    }

    /// The aggregation key `sym()`/`func()`/`usym()`/`ufunc()` stand for: the symbol itself, i.e.
    /// its start address with offset 0, so that every address inside one function is one key
    /// (libdtrace `dt_aggregate.c`, `dt_aggregate_sym`/`dt_aggregate_usym` replace the address by
    /// the symbol's value before keys are compared). An address without a symbol stays as it is.
    pub fn function_key(&self) -> Symbol {
        if self.name.is_none() {
            return self.clone();
        }
        Symbol {
            addr: self.addr.wrapping_sub(self.offset),
            module: self.module.clone(),
            name: self.name.clone(),
            offset: 0,
        }
    }

    /// The aggregation key `mod()`/`umod()` stand for: the module alone (`dt_aggregate_mod`/
    /// `dt_aggregate_umod` key by the module), printed as its bare name (``vmlinux``, `libc.so.6`)
    /// as DTrace prints `mod()` (see [`Symbol::is_module_only`]). The address is 0 and the name
    /// `None` so that all addresses of one module are one key;
    /// an address without a known module stays as it is (printed `0x…`).
    pub fn module_key(&self) -> Symbol {
        match &self.module {
            Some(m) => Symbol {
                addr: 0,
                module: Some(m.clone()),
                name: None,
                offset: 0,
            },
            None => Symbol::unknown(self.addr),
        }
    }

    /// True for a module alone ([`Symbol::module_key`]): address 0, a module, no name. It prints
    /// as the module's bare name.
    pub fn is_module_only(&self) -> bool {
        self.addr == 0 && self.name.is_none() && self.module.is_some()
    }

    /// ``module`name`` without the offset, as `sym()`/`func()` print (dt_consume.c `dt_print_sym`).
    pub fn without_offset(&self) -> String {
        let prefix = self.module_prefix();
        match &self.name {
            None if self.is_module_only() => self.module.clone().unwrap_or_default(),
            Some(n) => format!("{prefix}{n}"),
            None => format!("{prefix}0x{:x}", self.addr),
        }
    }
}

/// A stack trace: `stack()` (kernel) or `ustack()` (user), innermost frame first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Stack {
    /// True for `ustack()` (user addresses), false for `stack()` (kernel addresses).
    pub user: bool,
    /// Frames, innermost first; a zero address ends the stack and is not stored.
    pub frames: Vec<Symbol>,
}

/// One field of a probe record or one aggregation key, decoded and symbolized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// An integer with its C width and signedness.
    Int(Int),
    /// A D string (`string` type), already cut at its NUL byte.
    Str(String),
    /// Raw bytes that are not a string (`tracemem()`, a non-string array); printed as a hex dump.
    Bytes(Vec<u8>),
    /// A kernel address printed as a symbol: `sym()`, `func()` (without offset) or `%a` (with).
    Sym(Symbol),
    /// A user address printed as a symbol: `usym()`, `ufunc()`, `%A`; `pid` is the process.
    Usym {
        /// The process the address belongs to (tgid).
        pid: u32,
        /// The symbolized address.
        sym: Symbol,
    },
    /// A kernel or user stack.
    Stack(Stack),
}

impl Value {
    /// Shorthand for a signed 64-bit [`Value::Int`].
    pub fn i64(v: i64) -> Self {
        Value::Int(Int::i64(v))
    }

    /// Shorthand for an unsigned 64-bit [`Value::Int`].
    pub fn u64(v: u64) -> Self {
        Value::Int(Int::u64(v))
    }

    /// Shorthand for a [`Value::Str`].
    pub fn str(s: impl Into<String>) -> Self {
        Value::Str(s.into())
    }
}

impl From<Int> for Value {
    fn from(i: Int) -> Self {
        Value::Int(i)
    }
}
