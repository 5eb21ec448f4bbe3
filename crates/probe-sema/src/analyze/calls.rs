//! Subroutine calls in expressions (`strlen`, `copyinstr`, `stringof`, ...: DTrace guide, "Actions
//! and Subroutines" > "Subroutines").

use super::*;
use probe_syntax::ErrTag;

impl Analyzer<'_> {
    pub(super) fn call(
        &mut self,
        func: &str,
        func_span: Span,
        args: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        if ACTIONS.contains(&func) {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_CG_EXPR,
                    format!("`{func}()` is an action and has no value"),
                    func_span,
                )
                .with_hint(format!("call {func}() as a statement of its own")),
            ));
        }
        if AGG_FUNCS.contains(&func) {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_FUNC_IDKIND,
                    format!("`{func}()` is an aggregating function"),
                    func_span,
                )
                .with_hint(format!(
                    "assign it to an aggregation: @name[keys] = {func}(...);"
                )),
            ));
        }
        let n = args.len();
        let mut targs = Vec::new();
        for a in args {
            targs.push(self.expr(a, cx)?);
        }
        // The string subroutines take a `char *` as DTrace's do (their prototypes say
        // `const char *`): the characters at a kernel pointer, as stringof() reads them.
        if STRING_SUBROUTINES.contains(&func) {
            for t in &mut targs {
                if matches!(&t.ty, Type::Ptr(inner) if matches!(**inner, Type::Int { bytes: 1, .. }))
                {
                    let sp = t.span;
                    let arg = std::mem::replace(t, mk(TExprKind::Int(0), Type::INT, sp));
                    *t = self.stringof(arg, sp)?;
                }
            }
        }
        let arity = |this: &mut Self, want: &str, usage: &str| -> Reported {
            this.arity_error(func, want, n, span, usage)
        };
        let need_int = |this: &mut Self, t: &TExpr, what: &str| -> R<()> {
            if t.ty.is_integral() {
                Ok(())
            } else {
                Err(this.report(Diagnostic::tagged(
                    ErrTag::D_PROTO_ARG,
                    format!("{func}() {what} must be an integer, not `{}`", t.ty),
                    t.span,
                )))
            }
        };
        let need_str = |this: &mut Self, t: &TExpr, what: &str| -> R<()> {
            if t.ty == Type::String {
                Ok(())
            } else {
                Err(this.report(Diagnostic::tagged(
                    ErrTag::D_PROTO_ARG,
                    format!("{func}() {what} must be a string, not `{}`", t.ty),
                    t.span,
                )))
            }
        };
        if LOCK_SUBROUTINES.contains(&func) {
            if n != 1 {
                let usage = format!("{func}(lock)");
                return Err(arity(self, "one argument", &usage));
            }
            let lock = targs.pop().expect("one argument");
            return self.lock_subroutine(func, lock, span);
        }
        let call = |s: Subr, args: Vec<TExpr>, ty: Type| mk(TExprKind::Call(s, args), ty, span);
        match func {
            "copyinstr" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(
                        self,
                        "one or two arguments",
                        "copyinstr(address [, maxlen])",
                    ));
                }
                need_int(self, &targs[0], "address")?;
                if n == 2 {
                    need_int(self, &targs[1], "length")?;
                }
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Copyinstr, v, Type::String))
            }
            "copyin" => {
                self.clause_scratch = true;
                if n != 2 {
                    return Err(arity(self, "two arguments", "copyin(address, size)"));
                }
                need_int(self, &targs[0], "address")?;
                need_int(self, &targs[1], "size")?;
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Copyin, v, Type::Ptr(Box::new(Type::Void))))
            }
            "strlen" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "strlen(string)"));
                }
                need_str(self, &targs[0], "argument")?;
                Ok(call(Subr::Strlen, targs, Type::U64))
            }
            "stringof" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "stringof(expr)"));
                }
                let [t] = <[TExpr; 1]>::try_from(targs).map_err(|_| Reported)?;
                self.stringof(t, span)
            }
            "strjoin" | "strstr" => {
                if n != 2 {
                    return Err(arity(
                        self,
                        "two arguments",
                        &format!("{func}(string, string)"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_str(self, &targs[1], "second argument")?;
                Ok(call(
                    if func == "strjoin" {
                        Subr::Strjoin
                    } else {
                        Subr::Strstr
                    },
                    targs,
                    Type::String,
                ))
            }
            "strtoll" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(
                        self,
                        "one or two arguments",
                        "strtoll(string [, base])",
                    ));
                }
                need_str(self, &targs[0], "argument")?;
                let base = match targs.get(1) {
                    None => 10,
                    Some(b) => match const_eval(b) {
                        Some(k) if (2..=36).contains(&k) => k as u64,
                        Some(k) => {
                            return Err(self.err_at(
                                ErrTag::D_PROTO_ARG,
                                format!("strtoll() base {k} is not between 2 and 36"),
                                b.span,
                            ));
                        }
                        None => {
                            return Err(self.err_at(
                                ErrTag::D_PROTO_ARG,
                                "strtoll()'s base must be an integer constant",
                                b.span,
                            ));
                        }
                    },
                };
                let s = targs.into_iter().next().expect("one argument");
                let span = s.span;
                Ok(call(
                    Subr::Strtoll,
                    vec![s, mk(TExprKind::Int(base), Type::INT, span)],
                    Type::I64,
                ))
            }
            "strtok" => {
                // Oracle's dt_cg_subr_strtok: only the constant NULL (an integer constant 0)
                // continues the previous string; any other first argument is a string to split.
                if n != 2 {
                    return Err(arity(self, "two arguments", "strtok(string, delimiters)"));
                }
                let cont = matches!(targs[0].kind, TExprKind::Int(0)) && targs[0].ty.is_integral();
                if !cont {
                    need_str(self, &targs[0], "first argument")?;
                }
                need_str(self, &targs[1], "second argument")?;
                self.clause_strtok = true;
                Ok(call(Subr::Strtok, targs, Type::String))
            }
            "toupper" | "tolower" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(string)")));
                }
                need_str(self, &targs[0], "argument")?;
                Ok(call(
                    if func == "toupper" {
                        Subr::Toupper
                    } else {
                        Subr::Tolower
                    },
                    targs,
                    Type::String,
                ))
            }
            "basename" | "dirname" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(string)")));
                }
                need_str(self, &targs[0], "argument")?;
                Ok(call(
                    if func == "basename" {
                        Subr::Basename
                    } else {
                        Subr::Dirname
                    },
                    targs,
                    Type::String,
                ))
            }
            "substr" => {
                if !(2..=3).contains(&n) {
                    return Err(arity(
                        self,
                        "two or three arguments",
                        "substr(string, index [, length])",
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_int(self, &targs[1], "index")?;
                if n == 3 {
                    need_int(self, &targs[2], "length")?;
                }
                // The string stays; index and length are int64_t.
                let v = targs
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| if i == 0 { t } else { convert(t, &Type::I64) })
                    .collect();
                Ok(call(Subr::Substr, v, Type::String))
            }
            "strchr" | "strrchr" => {
                if n != 2 {
                    return Err(arity(
                        self,
                        "two arguments",
                        &format!("{func}(string, char)"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_int(self, &targs[1], "character")?;
                let [s, c] = <[TExpr; 2]>::try_from(targs).map_err(|_| Reported)?;
                let subr = if func == "strchr" {
                    Subr::Strchr
                } else {
                    Subr::Strrchr
                };
                Ok(call(subr, vec![s, convert(c, &Type::CHAR)], Type::String))
            }
            "index" | "rindex" => {
                // DTrace's `int index(const char *s, const char *subs [, int start])` (and rindex):
                // the position is converted to `int64_t` as dtrace_dif_subr reads it.
                if !(2..=3).contains(&n) {
                    return Err(arity(
                        self,
                        "two or three arguments",
                        &format!("{func}(string, string [, start])"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_str(self, &targs[1], "second argument")?;
                if n == 3 {
                    need_int(self, &targs[2], "start position")?;
                }
                let v = targs
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| if i < 2 { t } else { convert(t, &Type::I64) })
                    .collect();
                Ok(call(
                    if func == "index" {
                        Subr::Index
                    } else {
                        Subr::Rindex
                    },
                    v,
                    Type::INT,
                ))
            }
            "lltostr" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(
                        self,
                        "one or two arguments",
                        "lltostr(integer [, base])",
                    ));
                }
                need_int(self, &targs[0], "argument")?;
                if let Some(b) = targs.get(1) {
                    match const_eval(b) {
                        Some(k) if (2..=36).contains(&k) => {}
                        Some(k) => {
                            return Err(self.err_at(
                                ErrTag::D_PROTO_ARG,
                                format!("lltostr() base {k} is not between 2 and 36"),
                                b.span,
                            ));
                        }
                        None => {
                            return Err(self.err_at(
                                ErrTag::D_PROTO_ARG,
                                "lltostr()'s base must be an integer constant",
                                b.span,
                            ));
                        }
                    }
                }
                let mut it = targs.into_iter();
                let mut v = vec![convert(it.next().expect("one argument"), &Type::I64)];
                if let Some(b) = it.next() {
                    let k = const_eval(&b).unwrap_or(10) as u64;
                    if k != 10 {
                        v.push(mk(TExprKind::Int(k), Type::INT, b.span));
                    }
                }
                Ok(call(Subr::Lltostr, v, Type::String))
            }
            "rand" | "speculation" => {
                if n != 0 {
                    return Err(arity(self, "no arguments", &format!("{func}()")));
                }
                Ok(call(
                    if func == "rand" {
                        Subr::Rand
                    } else {
                        Subr::Speculation
                    },
                    targs,
                    Type::INT,
                ))
            }
            "progenyof" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "progenyof(pid)"));
                }
                need_int(self, &targs[0], "pid")?;
                let v = targs.into_iter().map(|t| convert(t, &Type::INT)).collect();
                Ok(call(Subr::Progenyof, v, Type::INT))
            }
            "getmajor" | "getminor" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(dev_t)")));
                }
                need_int(self, &targs[0], "device")?;
                // The kernel's dev_t (the type of BTF fields such as `i_rdev`, `bd_dev`):
                // major in the bits from 20 up, minor in the low 20 (`MINORBITS`,
                // include/linux/kdev_t.h). The value is D's `major_t`/`minor_t`, 32 bits.
                let dev = convert(targs.into_iter().next().expect("one argument"), &Type::U64);
                let int = |v: u64| mk(TExprKind::Int(v), Type::U64, span);
                let (op, k) = if func == "getmajor" {
                    (BinaryOp::Shr, 20)
                } else {
                    (BinaryOp::BitAnd, 0xf_ffff)
                };
                let v = mk(
                    TExprKind::Binary(op, Box::new(dev), Box::new(int(k))),
                    Type::U64,
                    span,
                );
                Ok(convert(v, &Type::UINT))
            }
            "htons" | "ntohs" | "htonl" | "ntohl" | "htonll" | "ntohll" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(integer)")));
                }
                need_int(self, &targs[0], "argument")?;
                let (s, ty) = match func {
                    "htons" | "ntohs" => (
                        Subr::Htons,
                        Type::Int {
                            bytes: 2,
                            signed: false,
                        },
                    ),
                    "htonl" | "ntohl" => (Subr::Htonl, Type::UINT),
                    _ => (Subr::Htonll, Type::U64),
                };
                let v = targs.into_iter().map(|t| convert(t, &ty)).collect();
                Ok(call(s, v, ty))
            }
            "alloca" => {
                self.clause_scratch = true;
                if n != 1 {
                    return Err(arity(self, "one argument", "alloca(size)"));
                }
                need_int(self, &targs[0], "size")?;
                if let Some(k) = const_eval(&targs[0])
                    && !(0..=1024).contains(&(k as i64))
                {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        format!(
                            "alloca() size {} is out of range: sightline allocates 0 to 1024 bytes",
                            k as i64
                        ),
                        targs[0].span,
                    ));
                }
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Alloca, v, Type::Ptr(Box::new(Type::Void))))
            }
            "bcopy" => {
                if n != 3 {
                    return Err(arity(self, "three arguments", "bcopy(src, dest, size)"));
                }
                let pointer = |t: &TExpr| t.ty.is_integral() || matches!(t.ty, Type::Ptr(_));
                // A string source copies the string's bytes (D strings are char arrays).
                for (t, what) in targs.iter().zip(["source", "destination"]) {
                    if !(pointer(t) || (what == "source" && t.ty == Type::String)) {
                        return Err(self.err_at(
                            ErrTag::D_PROTO_ARG,
                            format!("bcopy() {what} must be a pointer, not `{}`", t.ty),
                            t.span,
                        ));
                    }
                }
                need_int(self, &targs[2], "size")?;
                match const_eval(&targs[2]) {
                    Some(k) if (1..=1024).contains(&(k as i64)) => {}
                    _ => {
                        return Err(self.err_at(
                            ErrTag::D_PROTO_ARG,
                            "bcopy() size must be an integer constant from 1 to 1024",
                            targs[2].span,
                        ));
                    }
                }
                let v = targs
                    .into_iter()
                    .map(|t| {
                        if t.ty == Type::String {
                            t
                        } else {
                            convert(t, &Type::U64)
                        }
                    })
                    .collect();
                Ok(call(Subr::Bcopy, v, Type::Void))
            }
            "copyinto" => {
                if n != 3 {
                    return Err(arity(
                        self,
                        "three arguments",
                        "copyinto(uaddr, size, dest)",
                    ));
                }
                need_int(self, &targs[0], "address")?;
                need_int(self, &targs[1], "size")?;
                if !matches!(targs[2].ty, Type::Ptr(_)) {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        format!(
                            "copyinto() destination must be a pointer to alloca() memory, not `{}`",
                            targs[2].ty
                        ),
                        targs[2].span,
                    ));
                }
                match const_eval(&targs[1]) {
                    Some(k) if (0..=1024).contains(&(k as i64)) => {}
                    _ => {
                        return Err(self.err_at(
                            ErrTag::D_PROTO_ARG,
                            "copyinto() size must be an integer constant from 0 to 1024",
                            targs[1].span,
                        ));
                    }
                }
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Copyinto, v, Type::Void))
            }
            "inet_ntoa" | "inet_ntoa6" | "inet_ntop" => {
                let (want, usage, addr_at): (&[usize], &str, usize) = match func {
                    "inet_ntoa" => (&[1], "inet_ntoa(ipaddr_t *addr)", 0),
                    "inet_ntoa6" => (&[1, 2], "inet_ntoa6(struct in6_addr *addr [, strict])", 0),
                    _ => (&[2], "inet_ntop(int af, void *addr)", 1),
                };
                if !want.contains(&n) {
                    let w = match want {
                        [1] => "one argument",
                        [2] => "two arguments",
                        _ => "one or two arguments",
                    };
                    return Err(arity(self, w, usage));
                }
                let a = &targs[addr_at];
                if !(a.ty.is_integral() || matches!(a.ty, Type::Ptr(_))) {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        format!("{func}() address must be a pointer, not `{}`", a.ty),
                        a.span,
                    ));
                }
                if func == "inet_ntop" {
                    need_int(self, &targs[0], "address family")?;
                }
                let strict = match targs.get(1).filter(|_| func == "inet_ntoa6") {
                    None => 0,
                    Some(t) => match const_eval(t) {
                        Some(k) => u64::from(k != 0),
                        None => {
                            return Err(self.err_at(
                                ErrTag::D_PROTO_ARG,
                                "inet_ntoa6()'s second argument (strict) must be an integer constant",
                                t.span,
                            ));
                        }
                    },
                };
                let mut it = targs.into_iter();
                let v = match func {
                    "inet_ntop" => {
                        let af = convert(it.next().expect("af"), &Type::I64);
                        vec![af, convert(it.next().expect("addr"), &Type::U64)]
                    }
                    "inet_ntoa6" => vec![
                        convert(it.next().expect("addr"), &Type::U64),
                        mk(TExprKind::Int(strict), Type::INT, span),
                    ],
                    _ => vec![convert(it.next().expect("addr"), &Type::U64)],
                };
                let s = match func {
                    "inet_ntoa" => Subr::InetNtoa,
                    "inet_ntoa6" => Subr::InetNtoa6,
                    _ => Subr::InetNtop,
                };
                Ok(call(s, v, Type::String))
            }
            "stack" | "ustack" => {
                let user = func == "ustack";
                let max = if user { 2 } else { 1 };
                if n > max {
                    return Err(arity(
                        self,
                        if user {
                            "at most two arguments"
                        } else {
                            "at most one argument"
                        },
                        &format!("{func}([frames])"),
                    ));
                }
                // ustack()'s second argument, the string space for its frames (Oracle's
                // dt_cg: an integer constant, else D_PROTO_ARG); sightline symbolizes in the
                // consumer and needs no such space.
                if let Some(t) = targs.get(1).filter(|t| const_eval(t).is_none()) {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        "ustack()'s second argument (string space) must be an integer constant",
                        t.span,
                    ));
                }
                if let Some(t) = targs.get(1)
                    && const_eval(t).is_some_and(|v| v < 0)
                {
                    return Err(self.err_at(
                        ErrTag::D_USTACK_STRSIZE,
                        "ustack()'s string space must not be negative",
                        t.span,
                    ));
                }
                if let Some(t) = targs.first().filter(|t| !t.ty.is_integral()) {
                    // Oracle's dt_cg: a frame count that is not an integer is D_PROTO_ARG.
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        format!("{func}()'s frame count must be an integer, not `{}`", t.ty),
                        t.span,
                    ));
                }
                let frames = match targs.first() {
                    Some(t) => match const_eval(t) {
                        Some(v) if (1..=1024).contains(&v) => v as u32,
                        _ => return Err(self.err_at(
                            // Oracle's dt_cg: ustack()'s frames are D_USTACK_FRAMES.
                            if user {
                                ErrTag::D_USTACK_FRAMES
                            } else {
                                ErrTag::D_STACK_SIZE
                            },
                            format!(
                                "{func}() frame count must be an integer constant from 1 to 1024"
                            ),
                            t.span,
                        )),
                    },
                    None => {
                        if user {
                            self.options.ustackframes
                        } else {
                            self.options.stackframes
                        }
                    }
                };
                Ok(mk(
                    TExprKind::Stack { user, frames },
                    Type::Stack { user, frames },
                    span,
                ))
            }
            "sym" | "func" | "mod" | "usym" | "ufunc" | "umod" | "uaddr" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(address)")));
                }
                need_int(self, &targs[0], "address")?;
                let kind = match func {
                    "sym" | "func" => SymKind::Sym,
                    "mod" => SymKind::Mod,
                    "usym" | "ufunc" => SymKind::Usym,
                    "umod" => SymKind::Umod,
                    _ => SymKind::Uaddr,
                };
                let [a] = <[TExpr; 1]>::try_from(targs).map_err(|_| Reported)?;
                let a = convert(a, &Type::U64);
                Ok(mk(
                    TExprKind::Symbol(kind, Box::new(a)),
                    Type::Symbol(kind),
                    span,
                ))
            }
            _ => {
                let mut all: Vec<&str> = SUBROUTINES.to_vec();
                all.extend_from_slice(ACTIONS);
                all.extend_from_slice(AGG_FUNCS);
                let sugg = nearest(func, all, 3);
                let mut d = Diagnostic::tagged(
                    ErrTag::D_FUNC_UNDEF,
                    format!("unknown function `{func}`"),
                    func_span,
                );
                if let Some(h) = did_you_mean(&sugg) {
                    d = d.with_hint(h);
                }
                Err(self.report(d))
            }
        }
    }
}

/// Subroutines whose string arguments may be given as a `char *` (see [`Analyzer::call`]).
const STRING_SUBROUTINES: &[&str] = &[
    "strlen", "strjoin", "basename", "dirname", "substr", "strchr", "strrchr", "strstr", "index",
    "rindex", "toupper", "tolower", "strtoll", "strtok",
];

/// Oracle DTrace's lock subroutines (dt_open.c prototypes): `mutex_owned`, `mutex_owner`,
/// `mutex_type_adaptive`, `mutex_type_spin` take a `struct mutex *`; `rw_read_held`,
/// `rw_write_held`, `rw_iswriter` a `rwlock_t *`.
const LOCK_SUBROUTINES: &[&str] = &[
    "mutex_owned",
    "mutex_owner",
    "mutex_type_adaptive",
    "mutex_type_spin",
    "rw_read_held",
    "rw_write_held",
    "rw_iswriter",
];

/// The flag bits in the low bits of `struct mutex`'s `owner` word (Linux
/// kernel/locking/mutex.h `MUTEX_FLAGS`); the rest is the owning task.
const MUTEX_FLAGS: i64 = 0x07;
/// `struct qrwlock`'s `cnts` (include/asm-generic/qrwlock.h): `_QW_LOCKED`, a writer holds it.
const QW_LOCKED: i64 = 0xff;
/// `_QW_WMASK`: a writer holds it or waits; the bits above count readers.
const QW_WMASK: i64 = 0x1ff;

impl Analyzer<'_> {
    /// One of [`LOCK_SUBROUTINES`] of `lock` (a pointer or an integer address), as Linux keeps
    /// locks (Oracle DTrace's semantics): `mutex_owned(m)` is whether `m->owner` (less its flag
    /// bits) is the current task, `mutex_owner(m)` that task (`struct task_struct *`, NULL when
    /// free), `mutex_type_adaptive(m)` 1 and `mutex_type_spin(m)` 0 (Linux mutexes are
    /// adaptive); `rw_write_held(l)`, `rw_iswriter(l)` and `rw_read_held(l)` are non-zero when
    /// a writer holds the lock, a writer holds it or waits, and readers hold it (the lock's
    /// `cnts` word). Another argument type is `D_PROTO_ARG`.
    fn lock_subroutine(&mut self, func: &str, lock: TExpr, span: Span) -> R<TExpr> {
        if !(lock.ty.is_integral() || matches!(lock.ty, Type::Ptr(_))) {
            return Err(self.err_at(
                ErrTag::D_PROTO_ARG,
                format!("{func}() takes a pointer to a lock, not `{}`", lock.ty),
                lock.span,
            ));
        }
        let int = |v: i64| mk(TExprKind::Int(v as u64), Type::I64, span);
        match func {
            "mutex_type_adaptive" => return Ok(mk(TExprKind::Int(1), Type::INT, span)),
            "mutex_type_spin" => return Ok(mk(TExprKind::Int(0), Type::INT, span)),
            _ => {}
        }
        let word = |this: &mut Self, off: u32, ty: Type| -> R<TExpr> {
            let addr = this.binary_typed(
                BinaryOp::Add,
                convert(lock.clone(), &Type::U64),
                mk(TExprKind::Int(u64::from(off)), Type::U64, span),
                span,
            )?;
            let ptr = convert(addr, &Type::Ptr(Box::new(ty.clone())));
            Ok(mk(TExprKind::Deref(Box::new(ptr)), ty, span))
        };
        if func.starts_with("mutex_") {
            let btf = self.btf.as_ref();
            let Some(off) = btf.and_then(|b| b.member_offset("mutex", &["owner"])) else {
                return Err(self.err_at(
                    ErrTag::D_PROTO_ARG,
                    format!("{func}(): the kernel's BTF has no `struct mutex` with an `owner`"),
                    span,
                ));
            };
            let owner = word(self, off, Type::U64)?;
            let task = self.binary_typed(BinaryOp::BitAnd, owner, int(!MUTEX_FLAGS), span)?;
            if func == "mutex_owner" {
                let ty = self
                    .btf
                    .as_ref()
                    .and_then(|b| b.struct_id("task_struct").map(|id| b.d_type(id)))
                    .unwrap_or(Type::Void);
                return Ok(convert(task, &Type::Ptr(Box::new(ty))));
            }
            let me = mk(
                TExprKind::Builtin(Builtin::Curthread),
                Type::Ptr(Box::new(Type::Void)),
                span,
            );
            return self.binary_typed(BinaryOp::Eq, task, convert(me, &Type::U64), span);
        }
        // rwlock_t's first member is its arch lock, whose first word is `cnts`.
        let cnts = word(self, 0, Type::UINT)?;
        let mask = match func {
            "rw_write_held" => QW_LOCKED,
            "rw_iswriter" => QW_WMASK,
            _ => !QW_WMASK & 0xffff_ffff,
        };
        let bits = self.binary_typed(BinaryOp::BitAnd, cnts, int(mask), span)?;
        Ok(convert(bits, &Type::INT))
    }
}
