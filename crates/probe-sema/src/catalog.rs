//! The probe catalog interface: what probes exist, what their arguments are, and how probe
//! descriptions match them.
//!
//! A [`Catalog`] is the one catalog: [`Provider`]s plugged in, in order (the runtime's tracefs,
//! syscall table, profile/tick and dtrace providers, probe-user's pid and USDT providers). The
//! analysis sees it as a [`ProbeCatalog`] and only asks which probes a [`ProbeDescPattern`]
//! matches and, for "did you mean" suggestions, which probe names exist. Matching follows the DTrace guide,
//! "Program Structure" → "Probe Descriptions": each of the four fields is a shell-style glob (`*`,
//! `?`, `[set]`, `[!set]`, `\` escape), and an empty field matches everything.

use crate::types::Type;

/// A probe description after macro substitution: four glob patterns (empty = any).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeDescPattern {
    /// Provider pattern (e.g. `syscall`, `profile`, `sched`, `pid1234`).
    pub provider: String,
    /// Module pattern.
    pub module: String,
    /// Function pattern.
    pub function: String,
    /// Name pattern.
    pub name: String,
}

impl ProbeDescPattern {
    /// The pattern from four field strings.
    pub fn new(provider: &str, module: &str, function: &str, name: &str) -> ProbeDescPattern {
        ProbeDescPattern {
            provider: provider.into(),
            module: module.into(),
            function: function.into(),
            name: name.into(),
        }
    }

    /// True when all four fields match the probe's (an empty pattern field matches anything).
    pub fn matches(&self, provider: &str, module: &str, function: &str, name: &str) -> bool {
        field_matches(&self.provider, provider)
            && field_matches(&self.module, module)
            && field_matches(&self.function, function)
            && field_matches(&self.name, name)
    }

    /// True when the pattern matches this probe.
    pub fn matches_probe(&self, p: &ProbeInfo) -> bool {
        self.matches(&p.provider, &p.module, &p.function, &p.name)
    }

    /// True when no field has a glob character (the pattern names at most one probe).
    pub fn is_literal(&self) -> bool {
        [&self.provider, &self.module, &self.function, &self.name]
            .iter()
            .all(|f| !f.contains(['*', '?', '[', '\\']))
    }
}

impl std::fmt::Display for ProbeDescPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.provider, self.module, self.function, self.name
        )
    }
}

/// True when `text` matches the probe-description field `pattern`: empty matches everything,
/// otherwise a glob as [`glob_match`].
pub fn field_matches(pattern: &str, text: &str) -> bool {
    pattern.is_empty() || glob_match(pattern, text)
}

/// Shell-style glob match of the whole of `text` (DTrace's `gmatch(3GEN)` semantics): `*` any run of
/// characters (empty included), `?` any one character, `[abc]`, `[a-z]`, `[!a-z]` a set (a `]`
/// first in the set is literal), `\c` the literal `c`. A malformed set (no closing `]`) matches a
/// literal `[`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with single-star backtracking: linear-ish and no recursion.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_set(&p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == t[ti] {
                        pi += 2;
                        ti += 1;
                        continue;
                    }
                }
                c => {
                    if c == t[ti] {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last `*` swallow one more character, or fail.
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the set starting at `p[open] == '['`. Returns (matched, index after `]`), or
/// `None` if the set is not closed.
fn match_set(p: &[char], open: usize, c: char) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negate = i < p.len() && p[i] == '!';
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            let hi = p[i + 2];
            if lo <= c && c <= hi {
                matched = true;
            }
            i += 3;
        } else {
            if lo == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

/// One probe the catalog knows, with what the analysis needs to type its arguments and what the
/// runtime needs to attach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    /// Provider (e.g. `syscall`, `profile`, `dtrace`, `sched`, `proc`).
    pub provider: String,
    /// Module (empty for most kernel probes).
    pub module: String,
    /// Function (e.g. `read` for `syscall::read:entry`; empty for `BEGIN`).
    pub function: String,
    /// Name (e.g. `entry`, `return`, `tick-1s`, `BEGIN`, `sched_switch`).
    pub name: String,
    /// What `arg0..arg9`, `args[N]` and `args->field` mean at this probe.
    pub args: ProbeArgs,
    /// How the runtime attaches it; the analysis passes it through untouched.
    pub kind: ProbeKind,
}

impl ProbeInfo {
    /// `provider:module:function:name`.
    pub fn full_name(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.provider, self.module, self.function, self.name
        )
    }
}

/// The arguments a probe provides.
///
/// `arg0..arg9` are always `int64_t` (DTrace guide, "Variables" → "Built-in Variables"); an argument
/// the probe does not have reads as 0. `args[N]` is the typed N-th argument and `args->field` a
/// tracepoint field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeArgs {
    /// No arguments (`BEGIN`, `END`).
    None,
    /// `syscall::NAME:entry`: the system call's arguments in `arg0..arg5` (`nargs` of them). `args`
    /// optionally types them for `args[N]` (from tracefs `syscalls/sys_enter_NAME/format`, without
    /// `__syscall_nr`); empty means `args[N]` are `int64_t`.
    SyscallEntry {
        /// Number of arguments the system call takes (0..=6).
        nargs: u8,
        /// Typed arguments (may be empty).
        args: Vec<TpField>,
    },
    /// `syscall::NAME:return`: `arg0` and `arg1` are the return value (`int64_t`); `errno` is set
    /// when it is in `-4095..=-1`.
    SyscallReturn,
    /// A kernel tracepoint: `args->field` reads these fields (common fields excluded); `arg0..` read 0.
    Tracepoint {
        /// Fields in format-file order, `common_*` excluded.
        fields: Vec<TpField>,
    },
    /// `profile`/`tick` probes: `arg0` is the kernel PC (0 in user mode), `arg1` the user PC (0 in
    /// kernel mode), as in DTrace's profile provider.
    Profile,
    /// A uprobe on function entry (`ret == false`: arg0..arg5 are the integer argument registers) or
    /// return (`ret == true`: arg0 is the return value register, arg1 too).
    Uprobe {
        /// Return probe?
        ret: bool,
    },
    /// A USDT probe with `args.len()` arguments, each of `size` bytes and a signedness, and, when
    /// the binary has the probe's `.note.sightline` note (docs/usdt.md, "The typed-argument
    /// note"), their declared names and types and the provider's stability.
    Usdt {
        /// One entry per stapsdt note argument.
        args: Vec<UsdtArg>,
        /// The declared stability attributes `Name/Data/Class` from the typed note (for the
        /// provider, probe name and arguments), as written; `None` without a typed note.
        stability: Option<String>,
    },
    /// The dtrace provider's ERROR probe: arg1 = the faulting clause index, arg3 = fault kind,
    /// arg4 = the faulting address (DTrace guide, "dtrace Provider").
    DtraceError,
}

impl ProbeArgs {
    /// The tracepoint (or typed syscall) field called `name`.
    pub fn field(&self, name: &str) -> Option<&TpField> {
        match self {
            ProbeArgs::Tracepoint { fields } | ProbeArgs::SyscallEntry { args: fields, .. } => {
                fields.iter().find(|f| f.name == name)
            }
            _ => None,
        }
    }
}

/// One USDT argument's size and signedness (from its stapsdt argument spec, e.g. `-4@%eax`) and,
/// when the probe has a typed note, its declared name and Rust type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtArg {
    /// Size in bytes (1, 2, 4 or 8).
    pub size: u8,
    /// Signed?
    pub signed: bool,
    /// The declared name and type, from the probe's `.note.sightline` note; `None` for probes
    /// without one (sys/sdt.h programs).
    pub typed: Option<UsdtArgType>,
}

/// A USDT argument's declaration in the `.note.sightline` note (docs/usdt.md): `request_path` and
/// `&str` for the entry `request_path:&str`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtArgType {
    /// The declared name (`request_path`; the length of a `&[u8]` named `head` is `head.len`).
    pub name: String,
    /// The Rust type as the `provider!` macro stringified it (`&str`, `u16`, `Json<&Job>`).
    pub rust_type: String,
}

impl UsdtArg {
    /// An argument known only from its stapsdt spec.
    pub fn untyped(size: u8, signed: bool) -> UsdtArg {
        UsdtArg {
            size,
            signed,
            typed: None,
        }
    }

    /// True when the declared type is a pointer to NUL-terminated text: `&str` (the macro passes
    /// a bounded NUL-terminated copy), `&CStr` (by any path) and `Json<T>` (the JSON text), passed
    /// as an unsigned 8-byte value (a spec of another size is not a pointer: not a string).
    pub fn is_string(&self) -> bool {
        let Some(t) = &self.typed else { return false };
        if self.size != 8 || self.signed {
            return false;
        }
        let t = t.rust_type.replace(' ', "");
        let t = t.trim_start_matches('&');
        t == "str"
            || t == "CStr"
            || t.ends_with("::CStr")
            || t.starts_with("Json<")
            || t.contains("::Json<")
    }

    /// The D type of `args[N]` for this argument: `string` for [`UsdtArg::is_string`] arguments,
    /// otherwise the integer of the stapsdt size and signedness.
    pub fn d_type(&self) -> Type {
        if self.is_string() {
            Type::String
        } else {
            Type::Int {
                bytes: self.size.clamp(1, 8),
                signed: self.signed,
            }
        }
    }
}

/// One field of a tracepoint's record, from a tracefs `format` file (see
/// [`crate::parse_tracepoint_format`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpField {
    /// Field name (e.g. `prev_pid`).
    pub name: String,
    /// The C type as written, without the name or array suffix (e.g. `pid_t`, `const char *`,
    /// `char`, `__data_loc char[]`).
    pub c_type: String,
    /// Offset in bytes from the start of the record (the raw tracepoint's context).
    pub offset: u32,
    /// Size in bytes (for an array, of the whole array; for `__data_loc`, 4: the locator).
    pub size: u32,
    /// Signedness as the format file states it.
    pub signed: bool,
    /// `Some(n)` for a fixed array `type name[n]`.
    pub array: Option<u32>,
    /// A `__data_loc char[]` string: the 4-byte field holds `offset | (len << 16)` of the string
    /// within the record.
    pub data_loc_string: bool,
}

impl TpField {
    /// The D type of `args->name` for this field: `char[N]` and `__data_loc char[]` are `string`,
    /// pointers are pointers (`char *` to `char`), other arrays are arrays, the rest integers of the
    /// field's size and signedness.
    pub fn d_type(&self) -> Type {
        let base = self.c_type.trim();
        let is_char = |s: &str| {
            let s = s.trim_start_matches("const ").trim();
            matches!(s, "char" | "unsigned char" | "signed char" | "u8" | "s8")
        };
        if self.data_loc_string {
            return Type::String;
        }
        if let Some(n) = self.array {
            if is_char(base) {
                return Type::String;
            }
            let elem_size = self.size.checked_div(n).unwrap_or(self.size);
            return Type::Array(
                Box::new(Type::Int {
                    bytes: elem_size.clamp(1, 8) as u8,
                    signed: self.signed,
                }),
                n,
            );
        }
        if let Some(pointee) = base.strip_suffix('*') {
            let pointee = pointee.trim();
            let inner = if is_char(pointee) {
                Type::CHAR
            } else if pointee.ends_with("void") {
                Type::Void
            } else {
                Type::U64
            };
            return Type::Ptr(Box::new(inner));
        }
        // System call arguments are 8-byte slots typed by the C prototype (`unsigned int fd`):
        // the C type decides when it is narrower than the slot.
        if let Some((bytes, signed)) = c_int_type(base)
            && u32::from(bytes) <= self.size
        {
            return Type::Int { bytes, signed };
        }
        let bytes = match self.size {
            1 | 2 | 4 | 8 => self.size as u8,
            _ => 8,
        };
        Type::Int {
            bytes,
            signed: self.signed,
        }
    }
}

/// Width and signedness of common C and kernel integer type names (LP64), `const` ignored.
fn c_int_type(c_type: &str) -> Option<(u8, bool)> {
    let t = c_type.trim_start_matches("const ").trim();
    Some(match t {
        "char" | "signed char" | "s8" | "__s8" | "int8_t" => (1, true),
        "unsigned char" | "u8" | "__u8" | "uint8_t" | "bool" => (1, false),
        "short" | "short int" | "s16" | "__s16" | "int16_t" => (2, true),
        "unsigned short" | "unsigned short int" | "u16" | "__u16" | "uint16_t" | "umode_t" => {
            (2, false)
        }
        "int" | "signed int" | "s32" | "__s32" | "int32_t" | "pid_t" | "key_t" | "clockid_t"
        | "timer_t" | "mqd_t" => (4, true),
        "unsigned int" | "unsigned" | "u32" | "__u32" | "uint32_t" | "uid_t" | "gid_t"
        | "qid_t" | "rwf_t" => (4, false),
        "long" | "long int" | "long long" | "s64" | "__s64" | "int64_t" | "ssize_t" | "loff_t"
        | "off_t" | "time_t" => (8, true),
        "unsigned long" | "unsigned long int" | "unsigned long long" | "u64" | "__u64"
        | "uint64_t" | "size_t" | "aio_context_t" | "cap_user_header_t" | "cap_user_data_t" => {
            (8, false)
        }
        _ => return None,
    })
}

/// How a probe is attached. The runtime creates these in its catalog and reads them back from the
/// checked program; the analysis never inspects them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// `dtrace:::BEGIN`, `END`, `ERROR`.
    Dtrace(DtraceProbe),
    /// `profile:::tick-N` (`every_cpu == false`) or `profile:::profile-N` (every CPU), firing every
    /// `period_ns` nanoseconds.
    Profile {
        /// Period in nanoseconds.
        period_ns: u64,
        /// Fire on every CPU (`profile-`) rather than one (`tick-`).
        every_cpu: bool,
    },
    /// A system call entry or return, filtered by number inside a raw `sys_enter`/`sys_exit` program.
    Syscall {
        /// The system call number (x86-64 table).
        nr: u32,
        /// Entry (true) or return (false).
        entry: bool,
    },
    /// A kernel tracepoint `category:event` from tracefs.
    Tracepoint {
        /// tracefs category (`sched`).
        category: String,
        /// Event name (`sched_switch`).
        event: String,
    },
    /// A uprobe at a file offset.
    Uprobe {
        /// Path of the ELF object.
        path: String,
        /// File offset of the probed instruction.
        offset: u64,
        /// A return probe (uretprobe)?
        ret: bool,
        /// Only for this process (`None`: every process mapping `path`).
        pid: Option<u32>,
    },
    /// A USDT probe (stapsdt note) in an ELF object.
    Usdt {
        /// Path of the ELF object.
        path: String,
        /// File offset of the probe's `nop`.
        offset: u64,
        /// File offset of the semaphore to increment while attached, if any.
        semaphore: Option<u64>,
        /// The typed stapsdt argument specs, made relative to the probe site
        /// ([`crate::argspec::ArgSpec::at_site`]).
        arg_specs: Vec<crate::argspec::ArgSpec>,
        /// Only for this process (`None`: every process mapping `path`).
        pid: Option<u32>,
    },
    /// A probe kind private to the runtime, identified by a number it chose.
    Other(u64),
}

/// The dtrace provider's probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DtraceProbe {
    /// Fires once, before any other probe.
    Begin,
    /// Fires once, after all other probes, at exit.
    End,
    /// Fires when a clause faults at run time.
    Error,
}

/// One provider of probes (or a family of them) plugged into a [`Catalog`]: the runtime's
/// `dtrace`, `profile`, `syscall`, `proc` and tracepoint providers, probe-user's pid and USDT
/// providers, a fixed list in tests ([`StaticCatalog`]).
///
/// A provider answers only for the descriptions it owns (the syscall provider ignores
/// `sched:::sched_switch`) and has no side effects on other processes: it reads `/proc`, ELF
/// files and tracefs, never writes.
pub trait Provider: std::fmt::Debug {
    /// Appends the probes of this provider that match `desc` to `out`, in a stable order (the
    /// order the clause's probes fire and list in).
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>);

    /// Appends full names (`provider:module:function:name`) of probes worth suggesting when a
    /// description matches nothing; may be a subset for huge providers (none by default).
    fn suggestions(&self, out: &mut Vec<String>) {
        let _ = out;
    }

    /// Why `desc` matches nothing here, when this provider knows a reason worth more than a
    /// suggestion (a module path that is not an ELF file: "/dev/zero is not a regular file");
    /// `None` by default.
    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        let _ = desc;
        None
    }
}

/// The source of probes the analysis matches probe descriptions against: every [`Provider`]
/// (a [`Catalog`] of them, or one alone) is one.
pub trait ProbeCatalog {
    /// All probes matching `desc`, in a stable order (the order the clause's probes fire/list in).
    fn matching(&self, desc: &ProbeDescPattern) -> Vec<ProbeInfo>;

    /// Full names (`provider:module:function:name`) of probes worth suggesting when a description
    /// matches nothing. May be a subset for huge catalogs.
    fn names(&self) -> Vec<String>;

    /// Why `desc` matches nothing, when a provider knows ([`Provider::no_match_reason`]).
    fn why_no_match(&self, desc: &ProbeDescPattern) -> Option<String>;
}

impl<P: Provider + ?Sized> ProbeCatalog for P {
    fn matching(&self, desc: &ProbeDescPattern) -> Vec<ProbeInfo> {
        let mut out = Vec::new();
        self.probes(desc, &mut out);
        out
    }

    fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.suggestions(&mut out);
        out
    }

    fn why_no_match(&self, desc: &ProbeDescPattern) -> Option<String> {
        self.no_match_reason(desc)
    }
}

/// The probe catalog: providers asked in the order they were added; a description's probes are
/// each provider's matches, one provider after the other.
#[derive(Debug, Default)]
pub struct Catalog {
    providers: Vec<Box<dyn Provider + Send + Sync>>,
}

impl Catalog {
    /// A catalog without providers (it matches nothing).
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// The catalog with `provider` added after the others.
    pub fn with(mut self, provider: impl Provider + Send + Sync + 'static) -> Catalog {
        self.providers.push(Box::new(provider));
        self
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// True when there is no provider.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }
}

impl Provider for Catalog {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        for p in &self.providers {
            p.probes(desc, out);
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        for p in &self.providers {
            p.suggestions(out);
        }
    }

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        self.providers.iter().find_map(|p| p.no_match_reason(desc))
    }
}

/// A provider over a fixed list of probes (tests).
#[derive(Clone, Debug, Default)]
pub struct StaticCatalog {
    /// The probes.
    pub probes: Vec<ProbeInfo>,
}

impl Provider for StaticCatalog {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        out.extend(
            self.probes
                .iter()
                .filter(|p| desc.matches_probe(p))
                .cloned(),
        );
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        out.extend(self.probes.iter().map(ProbeInfo::full_name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_basics() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "read"));
        assert!(glob_match("read", "read"));
        assert!(!glob_match("read", "readv"));
        assert!(glob_match("read*", "readv"));
        assert!(glob_match("*read*", "pread64"));
        assert!(!glob_match("*read", "pread64"));
        assert!(glob_match("?read64", "pread64"));
        assert!(!glob_match("?read64", "read64"));
        assert!(glob_match("sys_[er]*", "sys_enter"));
        assert!(glob_match("sys_[er]*", "sys_read"));
        assert!(!glob_match("sys_[!er]*", "sys_read"));
        assert!(glob_match("sys_[!er]*", "sys_x"));
        assert!(glob_match("[a-c]x", "bx"));
        assert!(!glob_match("[a-c]x", "dx"));
        assert!(glob_match("[]]", "]"));
        assert!(glob_match("a\\*", "a*"));
        assert!(!glob_match("a\\*", "ab"));
        assert!(glob_match("a[b", "a[b"), "unclosed set is a literal [");
        assert!(glob_match("*a*b*c", "xxaybzzc"));
        assert!(!glob_match("*a*b*c", "xxaybzzcd"));
        assert!(glob_match("tick-*", "tick-1s"));
    }

    #[test]
    fn empty_field_matches_anything() {
        let p = ProbeDescPattern::new("syscall", "", "read", "");
        assert!(p.matches("syscall", "vmlinux", "read", "entry"));
        assert!(p.matches("syscall", "", "read", "return"));
        assert!(!p.matches("syscall", "", "readv", "return"));
        assert!(p.is_literal());
        assert!(!ProbeDescPattern::new("syscall", "", "read*", "").is_literal());
    }

    fn probe(provider: &str, name: &str) -> ProbeInfo {
        ProbeInfo {
            provider: provider.into(),
            module: String::new(),
            function: String::new(),
            name: name.into(),
            args: ProbeArgs::None,
            kind: ProbeKind::Other(0),
        }
    }

    #[test]
    fn a_catalog_asks_its_providers_in_order() {
        let a = StaticCatalog {
            probes: vec![probe("a", "x"), probe("a", "y")],
        };
        let b = StaticCatalog {
            probes: vec![probe("b", "x")],
        };
        let c = Catalog::new().with(b).with(a);
        assert_eq!(c.len(), 2);
        let names = |d: &ProbeDescPattern| -> Vec<String> {
            c.matching(d).iter().map(ProbeInfo::full_name).collect()
        };
        assert_eq!(
            names(&ProbeDescPattern::new("", "", "", "x")),
            vec!["b:::x", "a:::x"]
        );
        assert_eq!(names(&ProbeDescPattern::new("a", "", "", "")).len(), 2);
        assert_eq!(c.names(), vec!["b:::x", "a:::x", "a:::y"]);
        assert!(
            Catalog::new()
                .matching(&ProbeDescPattern::new("", "", "", ""))
                .is_empty()
        );
    }

    #[test]
    fn tp_field_types() {
        let f = |c_type: &str, size, signed, array, dl| TpField {
            name: "f".into(),
            c_type: c_type.into(),
            offset: 8,
            size,
            signed,
            array,
            data_loc_string: dl,
        };
        assert_eq!(f("char", 16, false, Some(16), false).d_type(), Type::String);
        assert_eq!(
            f("__data_loc char[]", 4, false, None, true).d_type(),
            Type::String
        );
        assert_eq!(f("pid_t", 4, true, None, false).d_type(), Type::INT);
        assert_eq!(
            f("const char *", 8, false, None, false).d_type(),
            Type::Ptr(Box::new(Type::CHAR))
        );
        assert_eq!(
            f("u32", 24, false, Some(6), false).d_type(),
            Type::Array(Box::new(Type::UINT), 6)
        );
        // A syscall slot of 8 bytes typed `unsigned int` by the prototype.
        assert_eq!(
            f("unsigned int", 8, false, None, false).d_type(),
            Type::UINT
        );
        assert_eq!(f("size_t", 8, false, None, false).d_type(), Type::U64);
        assert_eq!(f("long", 8, true, None, false).d_type(), Type::I64);
    }
}
