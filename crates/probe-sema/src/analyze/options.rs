//! Options: `#pragma D option` and `-x` (which win), their names, sizes and rates (DTrace guide,
//! "Options and Tunables").

use super::*;
use probe_syntax::ErrTag;

/// The largest `strsize`, in bytes: a string lives in the per-CPU scratch memory of a program
/// (32,000 bytes per clause, `probe-codegen`), and the string helpers copy at most a page
/// (`bpf_probe_read_str` on 4 KiB pages). docs/d-reference.md § 11a.
pub const STRSIZE_MAX: u32 = 4096;

/// The largest `stackframes`/`ustackframes`: the kernel's `bpf_get_stack` returns at most
/// `kernel.perf_event_max_stack` frames, 127 by default (`PERF_MAX_STACK_DEPTH`,
/// include/uapi/linux/perf_event.h). docs/d-reference.md § 11a.
pub const STACKFRAMES_MAX: u32 = 127;

/// Parses an option size (`4m`, `512k`, `1g`, plain bytes).
pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()?.to_ascii_lowercase() {
        'k' => (&v[..v.len() - 1], 1u64 << 10),
        'm' => (&v[..v.len() - 1], 1 << 20),
        'g' => (&v[..v.len() - 1], 1 << 30),
        't' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parses an option rate into a period in ns: `10hz`, `100ms`, `1s`, `500us`, `50ns`, suffixes in
/// any case; a bare number is nanoseconds (DTrace's dt_options.c `dt_opt_rate`: the multiplier
/// defaults to 1 and `hz` alone converts a frequency).
pub fn parse_rate(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let ns_per = match unit.to_ascii_lowercase().as_str() {
        "hz" => return 1_000_000_000u64.checked_div(n),
        "" | "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(ns_per)
}

enum OptKind {
    Bool,
    Size,
    Count,
    Rate,
    Text,
}

fn option_kind(name: &str) -> Option<OptKind> {
    use OptKind::*;
    Some(match name {
        "quiet" | "aggsortkey" | "aggsortrev" | "destructive" | "flowindent" | "rawbytes"
        | "defaultargs" | "argref" | "zdefs" | "aggzoom" | "aggpack" | "agghist" | "nolibs"
        | "verbose" | "empty" | "grabanon" | "temporal" => Bool,
        "bufsize" | "aggsize" | "dynvarsize" | "specsize" | "printsize" | "scratchsize" => Size,
        "strsize" | "nspec" | "stackframes" | "ustackframes" | "aggsortpos" | "aggsortkeypos"
        | "jstackframes" | "jstackstrsize" | "cpu" | "stackindent" => Count,
        "switchrate" | "aggrate" | "statusrate" | "cleanrate" => Rate,
        "bufpolicy" | "bufresize" | "dynvarpolicy" | "amin" | "encoding" => Text,
        _ => return None,
    })
}

const OPTION_NAMES: &[&str] = &[
    "quiet",
    "aggsortkey",
    "aggsortrev",
    "destructive",
    "flowindent",
    "rawbytes",
    "defaultargs",
    "argref",
    "zdefs",
    "aggzoom",
    "aggpack",
    "bufsize",
    "aggsize",
    "dynvarsize",
    "specsize",
    "printsize",
    "scratchsize",
    "strsize",
    "nspec",
    "stackframes",
    "ustackframes",
    "aggsortpos",
    "aggsortkeypos",
    "switchrate",
    "aggrate",
    "statusrate",
    "cleanrate",
    "bufpolicy",
    "bufresize",
    "dynvarpolicy",
    "cpu",
    "verbose",
    "stackindent",
    "empty",
    "nolibs",
    "jstackframes",
    "jstackstrsize",
    "agghist",
    "grabanon",
    "temporal",
    "amin",
    "encoding",
];

impl Analyzer<'_> {
    pub(super) fn options(&mut self, program: &ast::Program) {
        let pragmas: Vec<(String, Option<String>, Span)> = program
            .options()
            .map(|o| (o.name.clone(), o.value.clone(), o.span))
            .collect();
        for (n, v, s) in pragmas {
            self.set_option(&n, v.as_deref(), s);
        }
        let cli = self.opts.options.clone();
        for (n, v) in cli {
            self.set_option(&n, v.as_deref(), Span::DETACHED);
        }
    }

    fn set_option(&mut self, name: &str, value: Option<&str>, span: Span) {
        let where_ = if span == Span::DETACHED {
            " (from -x)"
        } else {
            ""
        };
        let Some(kind) = option_kind(name) else {
            let mut d = Diagnostic::tagged(
                ErrTag::D_PRAGMA_OPTSET,
                format!("unrecognized option `{name}`{where_}"),
                span,
            );
            if let Some(h) = did_you_mean(&nearest(name, OPTION_NAMES.iter().copied(), 3)) {
                d = d.with_hint(h);
            }
            self.report(d);
            return;
        };
        let bad = |this: &mut Self, what: &str| {
            this.report(Diagnostic::tagged(
                ErrTag::D_PRAGMA_OPTSET,
                format!("option `{name}` needs {what}{where_}"),
                span,
            ));
        };
        let o = &mut self.options;
        match kind {
            OptKind::Bool => {
                let on = match value {
                    None => true,
                    Some("1" | "true" | "on" | "yes") => true,
                    Some("0" | "false" | "off" | "no") => false,
                    Some(_) => return bad(self, "no value (or 0/1)"),
                };
                match name {
                    "quiet" => o.quiet = on,
                    "aggsortkey" => o.aggsortkey = on,
                    "aggsortrev" => o.aggsortrev = on,
                    "destructive" => o.destructive = on,
                    "defaultargs" => self.defaultargs = on,
                    "argref" => self.argref = on,
                    _ => o
                        .other
                        .push((name.to_string(), if on { "1" } else { "0" }.to_string())),
                }
            }
            OptKind::Size => {
                let Some(v) = value.and_then(parse_size) else {
                    return bad(self, "a size such as 4m, 512k or 65536");
                };
                match name {
                    "bufsize" => o.bufsize = Some(v),
                    "aggsize" => o.aggsize = Some(v),
                    "dynvarsize" => o.dynvarsize = Some(v),
                    // Oracle's dt_opt_printsize: out of 1..=65536 means the default; rounded up
                    // to a multiple of 8.
                    "printsize" => {
                        o.printsize = if (1..=65536).contains(&v) {
                            v.div_ceil(8) * 8
                        } else {
                            u64::from(probe_format::print::DEFAULT_PRINTSIZE)
                        }
                    }
                    "scratchsize" => o.scratchsize = Some(v),
                    _ => o.specsize = Some(v),
                }
            }
            OptKind::Count => {
                let Some(v) = value
                    .and_then(parse_size)
                    .and_then(|v| u32::try_from(v).ok())
                else {
                    return bad(self, "a number");
                };
                match name {
                    "strsize" => {
                        // Oracle's dt_opt_strsize: at least the empty string's 2 bytes.
                        if !(2..=STRSIZE_MAX).contains(&v) {
                            return bad(self, &format!("a size from 2 to {STRSIZE_MAX}"));
                        }
                        o.strsize = v;
                    }
                    "nspec" => o.nspec = Some(v as u64),
                    "stackframes" | "ustackframes" if v > STACKFRAMES_MAX => {
                        bad(self, &format!("a number of at most {STACKFRAMES_MAX}"))
                    }
                    "stackframes" => o.stackframes = v,
                    "ustackframes" => o.ustackframes = v,
                    "aggsortpos" => o.aggsortpos = Some(v),
                    "aggsortkeypos" => o.aggsortkeypos = Some(v),
                    _ => o.other.push((name.to_string(), v.to_string())),
                }
            }
            OptKind::Rate => {
                let Some(v) = value.and_then(parse_rate) else {
                    return bad(self, "a rate such as 10hz, 100ms or 1s");
                };
                match name {
                    "switchrate" => o.switchrate = Some(v),
                    "aggrate" => o.aggrate = Some(v),
                    "statusrate" => o.statusrate = Some(v),
                    _ => o.other.push((name.to_string(), v.to_string())),
                }
            }
            OptKind::Text => {
                let Some(v) = value else {
                    return bad(self, "a value");
                };
                // DTrace's buffer policies (guide, "Buffers and Buffering").
                if name == "bufpolicy" && !["switch", "fill", "ring"].contains(&v) {
                    return bad(self, "switch, fill or ring");
                }
                // illumos dt_opt_encoding: how aggpack draws its bars.
                if name == "encoding" && !["ascii", "utf8"].contains(&v) {
                    return bad(self, "ascii or utf8");
                }
                o.other.push((name.to_string(), v.to_string()));
            }
        }
    }

    /// DTrace rejects macro arguments the program never references (a mistyped `$N` or a stray
    /// word on the command line), unless `defaultargs` or `argref` is set (dt_cc.c
    /// `dt_compile`: "extraneous argument ... ($N is not referenced)").
    pub(super) fn check_extraneous_args(&mut self) {
        if self.defaultargs || self.argref {
            return;
        }
        for (i, value) in self.opts.macro_args.clone().iter().enumerate() {
            let n = i + 1;
            if !self.args_used.contains(&n) {
                self.report(
                    Diagnostic::tagged(
                        ErrTag::D_MACRO_UNUSED,
                        format!("extraneous argument `{value}` (${n} is not referenced)"),
                        Span::DETACHED,
                    )
                    .with_hint(
                        "remove the argument, or set `-x argref` (or `defaultargs`) to allow it",
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_sizes() {
        assert_eq!(parse_rate("10hz"), Some(100_000_000));
        assert_eq!(parse_rate("10"), Some(10));
        assert_eq!(parse_rate("97Hz"), Some(1_000_000_000 / 97));
        assert_eq!(parse_rate("100ms"), Some(100_000_000));
        assert_eq!(parse_rate("1s"), Some(1_000_000_000));
        assert_eq!(parse_rate("x"), None);
        assert_eq!(parse_size("4m"), Some(4 << 20));
        assert_eq!(parse_size("512K"), Some(512 << 10));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("4q"), None);
    }
}
