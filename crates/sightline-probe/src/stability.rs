//! Probe stability (DTrace guide, chapter "Stability"): every probe's attributes — a name
//! stability, a data stability and a dependency class for its provider, module, function, name and
//! arguments — and the `amin` check that refuses a program using probes less stable than asked.
//!
//! The values follow each DTrace provider's "Stability" section (dtrace, profile, syscall, proc,
//! pid, USDT). Linux tracepoints (their categories, `sched` among them, are providers here and
//! are not DTrace's sched or io providers) have no DTrace counterpart: the kernel documents them
//! as not a stable interface, so their names and data are `Unstable` with the `Common` class
//! (`Private` module and function, as DTrace's sdt provider). USDT probes not declaring their
//! stability are `Private/Private/Unknown` (a user-defined provider's default); a
//! `sightline-usdt` provider's declared attributes (its `.note.sightline` note, docs/usdt.md) are
//! its provider's, name's and arguments' (module and function stay `Private/Private/Unknown`, as in
//! the DTrace guide's USDT example).
//!
//! ```
//! use sightline_probe::stability::{Attr, DepClass, Stability};
//! let a: Attr = "Evolving/Evolving/Common".parse().unwrap();
//! assert_eq!(a, Attr::new(Stability::Evolving, Stability::Evolving, DepClass::Common));
//! assert!(Attr::new(Stability::Private, Stability::Private, DepClass::Isa) < a);
//! ```

use std::fmt;

use probe_sema::{ProbeArgs, ProbeDescPattern, ProbeInfo, ProbeKind};

/// A stability level, least stable first (DTrace's `dtrace_stability_t` order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stability {
    /// The implementation's private business.
    Internal,
    /// Private to the product; may change at any time.
    Private,
    /// Obsolete; to be removed.
    Obsolete,
    /// Controlled by an outside party (a kernel's own tracepoints, a language runtime).
    External,
    /// Unstable: may change in any release.
    Unstable,
    /// Evolving: changes in minor releases only, with notice.
    Evolving,
    /// Stable: changes in major releases only.
    Stable,
    /// An industry standard.
    Standard,
}

/// A dependency class: what the interface depends on, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DepClass {
    /// Unknown.
    Unknown,
    /// Specific to one CPU model.
    Cpu,
    /// Specific to a hardware platform.
    Platform,
    /// Specific to a group of platforms.
    Group,
    /// Specific to an instruction set architecture (system call numbers and arguments).
    Isa,
    /// Common to every platform.
    Common,
}

const STABILITY_NAMES: [(Stability, &str); 8] = [
    (Stability::Internal, "Internal"),
    (Stability::Private, "Private"),
    (Stability::Obsolete, "Obsolete"),
    (Stability::External, "External"),
    (Stability::Unstable, "Unstable"),
    (Stability::Evolving, "Evolving"),
    (Stability::Stable, "Stable"),
    (Stability::Standard, "Standard"),
];

const CLASS_NAMES: [(DepClass, &str); 6] = [
    (DepClass::Unknown, "Unknown"),
    (DepClass::Cpu, "CPU"),
    (DepClass::Platform, "Platform"),
    (DepClass::Group, "Group"),
    (DepClass::Isa, "ISA"),
    (DepClass::Common, "Common"),
];

impl fmt::Display for Stability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = STABILITY_NAMES.iter().find(|(s, _)| s == self).map(|p| p.1);
        f.write_str(n.unwrap_or("Unknown"))
    }
}

impl fmt::Display for DepClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = CLASS_NAMES.iter().find(|(s, _)| s == self).map(|p| p.1);
        f.write_str(n.unwrap_or("Unknown"))
    }
}

/// One attribute triple: name stability / data stability / dependency class. Ordered as
/// DTrace compares them against `amin`: lower when any part is lower ([`Attr::at_least`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attr {
    /// How stable the names are.
    pub name: Stability,
    /// How stable the data's meaning is.
    pub data: Stability,
    /// What it depends on.
    pub class: DepClass,
}

impl Attr {
    /// The triple `name/data/class`.
    pub const fn new(name: Stability, data: Stability, class: DepClass) -> Attr {
        Attr { name, data, class }
    }

    /// Each part the lower of `self`'s and `other`'s (dt_attr_min).
    pub fn min(self, other: Attr) -> Attr {
        Attr {
            name: self.name.min(other.name),
            data: self.data.min(other.data),
            class: self.class.min(other.class),
        }
    }

    /// True when every part is at least `min`'s part.
    pub fn at_least(self, min: Attr) -> bool {
        self.name >= min.name && self.data >= min.data && self.class >= min.class
    }
}

impl PartialOrd for Attr {
    /// `a < b` when `a` is not [`Attr::at_least`] `b` but `b` is at least `a`; incomparable
    /// (`None`) when each is higher in some part.
    fn partial_cmp(&self, other: &Attr) -> Option<std::cmp::Ordering> {
        use std::cmp::Ordering::*;
        match (self.at_least(*other), other.at_least(*self)) {
            (true, true) => Some(Equal),
            (true, false) => Some(Greater),
            (false, true) => Some(Less),
            (false, false) => None,
        }
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.name, self.data, self.class)
    }
}

/// An `amin` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid attributes {0:?}: expected NAME[/DATA[/CLASS]] of Internal, Private, Obsolete, External, Unstable, Evolving, Stable, Standard and Unknown, CPU, Platform, Group, ISA, Common"
)]
pub struct AttrError(pub String);

impl std::str::FromStr for Attr {
    type Err = AttrError;

    /// `Name/Data/Class`, case-insensitive; missing parts are the lowest (`Evolving` is
    /// `Evolving/Internal/Unknown`), as dtrace's `-x amin` reads it (dt_opt_amin).
    fn from_str(s: &str) -> Result<Attr, AttrError> {
        let bad = || AttrError(s.to_string());
        let mut parts = s.split('/');
        let stab = |p: Option<&str>| -> Result<Stability, AttrError> {
            match p {
                None | Some("") => Ok(Stability::Internal),
                Some(p) => STABILITY_NAMES
                    .iter()
                    .find(|(_, n)| n.eq_ignore_ascii_case(p))
                    .map(|(s, _)| *s)
                    .ok_or_else(bad),
            }
        };
        let name = stab(parts.next())?;
        let data = stab(parts.next())?;
        let class = match parts.next() {
            None | Some("") => DepClass::Unknown,
            Some(p) => CLASS_NAMES
                .iter()
                .find(|(_, n)| n.eq_ignore_ascii_case(p))
                .map(|(c, _)| *c)
                .ok_or_else(bad)?,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Attr { name, data, class })
    }
}

/// A provider's five attribute triples (DTrace's `dtrace_pattr_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeStability {
    /// The provider name's.
    pub provider: Attr,
    /// The module name's.
    pub module: Attr,
    /// The function name's.
    pub function: Attr,
    /// The probe name's.
    pub name: Attr,
    /// The arguments'.
    pub args: Attr,
}

impl ProbeStability {
    /// The description's attributes, as `dtrace -l -v` prints them under "Probe Description
    /// Attributes": the minimum of the provider's and the name's, and of the module's and the
    /// function's when the probe has one (a `BEGIN` is `Stable`, a `syscall::read:entry` is as
    /// stable as its private function name).
    pub fn description(&self, info: &ProbeInfo) -> Attr {
        let mut a = self.provider.min(self.name);
        if !info.module.is_empty() {
            a = a.min(self.module);
        }
        if !info.function.is_empty() {
            a = a.min(self.function);
        }
        a
    }
}

impl ProbeStability {
    /// The attributes of a probe description as the script wrote it, which `-x amin` compares
    /// (dt_cc.c and dt_probe_info in DTrace): the provider's, lowered by the module's, function's
    /// and name's for each of those fields written out in full. A field left empty or written
    /// as a glob adds nothing. A description whose provider is left empty or written as a glob
    /// (`BEGIN`, `sys*:::entry`) is DTrace's default, `Unstable/Unstable/Common` for every field.
    pub fn written(&self, pattern: &ProbeDescPattern) -> Attr {
        fn spelled(field: &str) -> bool {
            !field.is_empty() && !field.contains(['*', '?', '[', '\\'])
        }
        if !spelled(&pattern.provider) {
            return DEFAULT_PROVIDER;
        }
        let mut a = self.provider;
        for (field, attr) in [
            (&pattern.module, self.module),
            (&pattern.function, self.function),
            (&pattern.name, self.name),
        ] {
            if spelled(field) {
                a = a.min(attr);
            }
        }
        a
    }
}

/// DTrace's attributes for a description whose provider is not named (`_dtrace_prvdesc`).
const DEFAULT_PROVIDER: Attr =
    Attr::new(Stability::Unstable, Stability::Unstable, DepClass::Common);

use DepClass as C;
use Stability as S;

const fn p(provider: Attr, module: Attr, function: Attr, name: Attr, args: Attr) -> ProbeStability {
    ProbeStability {
        provider,
        module,
        function,
        name,
        args,
    }
}

const fn a(name: Stability, data: Stability, class: DepClass) -> Attr {
    Attr::new(name, data, class)
}

/// The probe's attributes (see the module documentation for their sources).
pub fn of(info: &ProbeInfo) -> ProbeStability {
    const PRIV: Attr = a(S::Private, S::Private, C::Unknown);
    match &info.kind {
        ProbeKind::Uprobe { .. } => p(a(S::Evolving, S::Evolving, C::Isa), PRIV, PRIV, PRIV, PRIV),
        ProbeKind::Usdt { .. } => {
            // The typed note's declaration; one that does not parse counts as none.
            let declared = match &info.args {
                ProbeArgs::Usdt {
                    stability: Some(s), ..
                } => s.parse::<Attr>().ok(),
                _ => None,
            };
            let d = declared.unwrap_or(PRIV);
            p(d, PRIV, PRIV, d, d)
        }
        _ => match info.provider.as_str() {
            "dtrace" => p(
                a(S::Stable, S::Stable, C::Common),
                PRIV,
                PRIV,
                a(S::Stable, S::Stable, C::Common),
                a(S::Stable, S::Stable, C::Common),
            ),
            "profile" => p(
                a(S::Evolving, S::Evolving, C::Common),
                a(S::Unstable, S::Unstable, C::Unknown),
                PRIV,
                a(S::Evolving, S::Evolving, C::Common),
                a(S::Evolving, S::Evolving, C::Common),
            ),
            "syscall" => p(
                a(S::Evolving, S::Evolving, C::Common),
                PRIV,
                a(S::Private, S::Private, C::Isa),
                a(S::Evolving, S::Evolving, C::Common),
                a(S::Private, S::Private, C::Isa),
            ),
            // DTrace's proc provider (Sightline's `proc` mirrors it); Linux's `sched` and
            // other categories are kernel tracepoints below.
            "proc" => p(
                a(S::Evolving, S::Evolving, C::Isa),
                PRIV,
                PRIV,
                a(S::Evolving, S::Evolving, C::Isa),
                a(S::Evolving, S::Evolving, C::Isa),
            ),
            // Linux tracepoints (categories as providers).
            _ => p(
                a(S::Unstable, S::Unstable, C::Common),
                PRIV,
                PRIV,
                a(S::Unstable, S::Unstable, C::Common),
                a(S::Unstable, S::Unstable, C::Common),
            ),
        },
    }
}

/// The argument types `dtrace -l -v` lists under "Argument Types": `args[N]: type` per typed
/// argument (`args->field: type` for a tracepoint's fields); empty when the probe has none.
pub fn argument_types(info: &ProbeInfo) -> Vec<String> {
    match &info.args {
        ProbeArgs::SyscallEntry { args, nargs } if args.is_empty() => {
            (0..*nargs).map(|i| format!("args[{i}]: int64_t")).collect()
        }
        ProbeArgs::SyscallEntry { args, .. } => args
            .iter()
            .enumerate()
            .map(|(i, f)| format!("args[{i}]: {} {}", f.c_type, f.name))
            .collect(),
        ProbeArgs::SyscallReturn => vec!["args[0]: int64_t".into(), "args[1]: int64_t".into()],
        ProbeArgs::Tracepoint { fields } => fields
            .iter()
            .map(|f| {
                let arr = f.array.map(|n| format!("[{n}]")).unwrap_or_default();
                format!("args->{}: {}{arr}", f.name, f.c_type)
            })
            .collect(),
        ProbeArgs::Profile => vec!["args[0]: uint64_t".into(), "args[1]: uint64_t".into()],
        // A typed note's argument shows its Rust type and name (`args[0]: &str request_path`).
        ProbeArgs::Usdt { args, .. } => args
            .iter()
            .enumerate()
            .map(|(i, u)| match &u.typed {
                Some(t) => format!("args[{i}]: {} {}", t.rust_type, t.name),
                None => {
                    let s = if u.signed { "" } else { "u" };
                    format!("args[{i}]: {s}int{}_t", u32::from(u.size) * 8)
                }
            })
            .collect(),
        ProbeArgs::Uprobe { .. } | ProbeArgs::None | ProbeArgs::DtraceError => Vec::new(),
    }
}

/// The `dtrace -l -v` block of one probe (after its ID line): the description's and the
/// arguments' attributes, then the argument types (`None` when it has none), each section
/// indented by a tab and its lines by two, as dt_list.c prints them.
pub fn describe(info: &ProbeInfo) -> String {
    let st = of(info);
    let d = st.description(info);
    let mut s = String::new();
    let block = |s: &mut String, title: &str, a: Attr| {
        s.push_str(&format!(
            "\n\t{title}\n\t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n",
            a.name, a.data, a.class
        ));
    };
    block(&mut s, "Probe Description Attributes", d);
    block(&mut s, "Argument Attributes", st.args);
    s.push_str("\n\tArgument Types\n");
    let types = argument_types(info);
    if types.is_empty() {
        s.push_str("\t\tNone\n");
    }
    for t in types {
        s.push_str(&format!("\t\t{t}\n"));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe_sema::DtraceProbe;

    fn info(provider: &str, function: &str, name: &str, kind: ProbeKind) -> ProbeInfo {
        ProbeInfo {
            provider: provider.into(),
            module: String::new(),
            function: function.into(),
            name: name.into(),
            args: ProbeArgs::None,
            kind,
        }
    }

    /// A USDT probe with a typed note: its declared stability for provider, name and arguments,
    /// its arguments' Rust types and names; without a note (or with an unparsable stability),
    /// `Private/Private/Unknown` and C integer types.
    #[test]
    fn usdt_typed_note_sets_stability_and_argument_types() {
        use probe_sema::{UsdtArg, UsdtArgType};
        let usdt = |stability: Option<&str>, typed: bool| ProbeInfo {
            provider: "webserver42".into(),
            module: "usdt-typed".into(),
            function: "main".into(),
            name: "request".into(),
            args: ProbeArgs::Usdt {
                args: vec![
                    UsdtArg {
                        size: 8,
                        signed: false,
                        typed: typed.then(|| UsdtArgType {
                            name: "request_path".into(),
                            rust_type: "&str".into(),
                        }),
                    },
                    UsdtArg::untyped(2, false),
                ],
                stability: stability.map(String::from),
            },
            kind: ProbeKind::Usdt {
                path: "/x/usdt-typed".into(),
                offset: 0,
                semaphore: None,
                arg_specs: vec![],
                pid: Some(42),
            },
        };
        let declared = usdt(Some("Evolving/Evolving/Common"), true);
        let st = of(&declared);
        let evolving = a(S::Evolving, S::Evolving, C::Common);
        let private = a(S::Private, S::Private, C::Unknown);
        assert_eq!(
            (st.provider, st.module, st.function, st.name, st.args),
            (evolving, private, private, evolving, evolving)
        );
        // Module and function are named: the description is as stable as the least of them.
        assert_eq!(st.description(&declared), private);
        assert_eq!(
            argument_types(&declared),
            ["args[0]: &str request_path", "args[1]: uint16_t"]
        );
        for plain in [usdt(None, false), usdt(Some("Solid/Rock/ISA"), false)] {
            let st = of(&plain);
            assert_eq!((st.provider, st.name, st.args), (private, private, private));
            assert_eq!(
                argument_types(&plain),
                ["args[0]: uint64_t", "args[1]: uint16_t"]
            );
        }
    }

    #[test]
    fn parsing_fills_missing_parts_with_the_lowest() {
        assert_eq!(
            "evolving".parse::<Attr>().unwrap(),
            a(S::Evolving, S::Internal, C::Unknown)
        );
        assert_eq!(
            "Stable/Evolving/ISA".parse::<Attr>().unwrap(),
            a(S::Stable, S::Evolving, C::Isa)
        );
        assert!("Stable/Solid".parse::<Attr>().is_err());
        assert!("a/b/c/d".parse::<Attr>().is_err());
    }

    #[test]
    fn descriptions_take_the_minimum_of_the_parts_they_name() {
        let begin = info("dtrace", "", "BEGIN", ProbeKind::Dtrace(DtraceProbe::Begin));
        assert_eq!(
            of(&begin).description(&begin),
            a(S::Stable, S::Stable, C::Common)
        );
        let read = info(
            "syscall",
            "read",
            "entry",
            ProbeKind::Syscall { nr: 0, entry: true },
        );
        let d = of(&read).description(&read);
        assert_eq!(d, a(S::Private, S::Private, C::Isa));
        assert!(!d.at_least("Evolving".parse().unwrap()));
        assert!(d.at_least("Private/Private/ISA".parse().unwrap()));
        let text = describe(&begin);
        assert!(
            text.contains(
                "\tProbe Description Attributes\n\t\tIdentifier Names: Stable\n\t\tData Semantics:   Stable\n\t\tDependency Class: Common\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("\tArgument Types\n\t\tNone\n\n"), "{text:?}");
    }
}
