//! DTrace's error tags: the code every compile error carries (`error[D_SYNTAX]: ...`).
//!
//! DTrace's D compiler names each kind of compile error with a tag (`D_SYNTAX`, `D_AGG_REDEF`,
//! `D_IDENT_UNDEF`, ...; the `dt_errtag_t` enumeration of illumos and Oracle Linux DTrace). Sightline
//! uses the same names, so that a user can search for the tag DTrace's documentation and forums
//! use. The tags are listed, with their meaning, in `docs/d-reference.md` ("Error tags"); this
//! module holds the ones Sightline emits.

/// Defines [`ErrTag`] with one variant per `NAME => "meaning"` line.
macro_rules! err_tags {
    ($($name:ident => $meaning:literal,)*) => {
        /// One of DTrace's compile error tags (see the module docs). The variant is the tag's name.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrTag {
            $(
                #[doc = $meaning]
                $name,
            )*
        }

        impl ErrTag {
            /// Every tag, in declaration order.
            pub const ALL: &'static [ErrTag] = &[$(ErrTag::$name),*];

            /// The tag's name as DTrace spells it (`"D_SYNTAX"`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrTag::$name => stringify!($name),)*
                }
            }

            /// What the tag means, one line.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(ErrTag::$name => $meaning,)*
                }
            }
        }
    };
}

err_tags! {
    D_UNKNOWN => "an error with no more specific tag (e.g. a limit of the BPF back end)",
    D_SYNTAX => "the program does not follow D's grammar",
    D_TYPE_ERR => "a type name that no declaration or kernel type information defines",
    D_TYPE_MEMBER => "a structure, union or tracepoint has no member of that name",
    D_CG_EXPR => "an action (a function with no value) used inside an expression",
    D_PDESC_ZERO => "a probe description matches no probe",
    D_PDESC_INVAL => "a probe description is not valid",
    D_ATTR_MIN => "a probe description is less stable than the `-x amin` minimum",
    D_PRED_SCALAR => "a predicate is not of scalar (integer or pointer) type",
    D_FUNC_UNDEF => "a function or action name is not defined",
    D_FUNC_IDKIND => "a name is used as a kind of function it is not (e.g. an aggregating function in an expression)",
    D_OFFSETOF_TYPE => "offsetof() of a type that is not a structure or union",
    D_SIZEOF_TYPE => "sizeof() of a type that has no size (void, a function)",
    D_STRINGOF_TYPE => "stringof() of a value that cannot become a string",
    D_OP_INT => "an operator needs an integer operand",
    D_OP_SCALAR => "an operator needs a scalar (integer or pointer) operand",
    D_OP_ACT => "an action (a void value) as an operand of `?:`",
    D_OP_ARITH => "an operator needs an arithmetic operand",
    D_OP_WRITE => "the left side of an assignment cannot be written (a built-in, constant or inline)",
    D_OP_LVAL => "the left side of an assignment is not a variable or other lvalue",
    D_OP_INCOMPAT => "the operands or the assigned value have incompatible types",
    D_OP_ARRFUN => "an array or function used where a value is needed",
    D_OP_PTR => "an operator needs a pointer operand (`->`)",
    D_OP_SOU => "an operator needs a structure or union operand (`.`), or a structure used as a value",
    D_AGG_REDEF => "an aggregation used with a different aggregating function than before",
    D_AGG_FUNC => "an aggregation is assigned something other than an aggregating function",
    D_AGG_SCALAR => "an aggregating function's value or an aggregation used where a scalar is needed",
    D_AGG_NULL => "an aggregation named as a statement without an aggregating function (`@a;`)",
    D_ARR_BADREF => "a subscript applied to a value that is not an array, or out of its bounds",
    D_ARR_LOCAL => "an associative array of a kind the back end cannot hold",
    D_DIV_ZERO => "a constant division or modulo by zero",
    D_DEREF_NONPTR => "unary `*` applied to a value that is not a pointer",
    D_DEREF_VOID => "unary `*` applied to a `void *`",
    D_ADDROF_LVAL => "unary `&` applied to something that has no address",
    D_ADDROF_VAR => "unary `&` applied to a D variable (variables cannot be pointed at)",
    D_CAST_INVAL => "a cast between types D cannot convert",
    D_PRAGERR => "a `#pragma D error` directive: the program stops with its message",
    D_PRAGMA_INVAL => "an unknown D pragma, or invalid arguments to a known one (a class of `depends_on`, attributes)",
    D_PRAGMA_DEPEND => "a `#pragma D depends_on` dependency that is not there (provider, module, library)",
    D_PRAGMA_MALFORM => "a `#pragma` whose arguments are malformed",
    D_PRAGMA_OPTSET => "an option (`#pragma D option`, -x) is unknown or its value invalid",
    D_PRAGCTL_INVAL => "a preprocessor control line Sightline does not handle",
    D_MACRO_UNDEF => "a macro variable or argument ($1, $target, ...) is not defined",
    D_MACRO_UNUSED => "a macro argument is given but the program never uses it",
    D_INT_OFLOW => "an integer constant does not fit in 64 bits",
    D_INT_DIGIT => "an integer constant has a digit not valid in its base",
    D_STR_NL => "a string constant is not closed on its line",
    D_CHR_NL => "a character constant is not closed on its line",
    D_CHR_OFLOW => "a character constant holds more than 8 characters",
    D_IDENT_BADREF => "a name used as a kind of identifier it is not (an array as a scalar, a function as a variable)",
    D_IDENT_UNDEF => "a variable or other identifier is not defined",
    D_PROTO_LEN => "a function, array or aggregation given the wrong number of arguments or keys",
    D_PROTO_ARG => "a function argument or array key has the wrong type",
    D_PRINT_SIZE => "print() of a pointer to a type of size 0",
    D_ARGS_MULTI => "args[] has different types at the probes of one clause",
    D_ARGS_NONE => "the probe has no typed args[]",
    D_ARGS_TYPE => "args used in a way its type does not allow",
    D_ARGS_IDX => "an args[] subscript is not a valid constant index",
    D_KEY_TYPE => "an aggregation or associative array key has a type keys cannot have",
    D_PRINTF_AGG_CONV => "the `%@` conversion outside printa()",
    D_PRINTF_ARG_PROTO => "a conversion has no argument to print",
    D_PRINTF_DYN_PROTO => "a `*` width or precision has no argument",
    D_PRINTF_ARG_TYPE => "a conversion's argument has the wrong type",
    D_PRINTF_ARG_EXTRA => "more arguments than the format's conversions",
    D_PRINTF_ARG_FMT => "a format that is not a string constant, or a width or precision above the limit (a malformed conversion is D_SYNTAX, as in DTrace)",
    D_DECL_IDRED => "an identifier declared twice, or a built-in redeclared",
    D_DECL_TYPERED => "a struct, union or enum defined twice",
    D_DECL_LOCASSC => "a clause-local associative array",
    D_DECL_VOIDOBJ => "a variable, member or inline declared `void`",
    D_DECL_INCOMPLETE => "a member or variable of a struct or union type that is not (yet) defined",
    D_DECL_ARRBIG => "an array dimension that is too large",
    D_DECL_ARRSUB => "an array dimension that is not a positive integer constant",
    D_ARR_BOUNDS => "a constant array subscript outside the array's bounds",
    D_DECL_ENCONST => "an enumerator's value that is not an integer constant",
    D_DECL_ENOFLOW => "an enumerator's value that does not fit in an int",
    D_COMM_DREC => "commit() after a data-recording action",
    D_SPEC_SPEC => "a second speculate() in a clause",
    D_SPEC_COMM => "speculate() and commit() in one clause",
    D_SPEC_DREC => "speculate() after a data-recording action",
    D_AGG_SPEC => "an aggregation in a speculative clause",
    D_ACT_SPEC => "a destructive action in a speculative clause",
    EDT_DESTRUCTIVE => "a destructive action without -w or `#pragma D option destructive` (libdtrace's error, \"Destructive actions not allowed\")",
    D_EXIT_SPEC => "exit() in a speculative clause",
    D_DREC_COMM => "a data-recording action after commit()",
    D_AGG_COMM => "an aggregation after commit()",
    D_PRINTA_AGGARG => "printa(), clear(), trunc() or normalize() given something that is not an aggregation",
    D_PRINTA_AGGBAD => "an aggregation that the program never assigns",
    D_PRINTA_AGGKEY => "printa() of aggregations whose keys differ",
    D_PRINTA_AGGPROTO => "a printa() format whose key conversions do not match the aggregation",
    D_TRACE_VOID => "trace() of a void value",
    D_TRACE_DYN => "trace() of a value of a type it cannot record",
    D_TRACEMEM_SIZE => "tracemem()'s size is not a valid integer constant",
    D_STACK_SIZE => "stack()'s or ustack()'s frame count is not a valid integer constant",
    D_LQUANT_MISMATCH => "lquantize() or llquantize() parameters that do not describe buckets",
    D_LLQUANT_FACTORTYPE => "llquantize()'s factor is not an integer constant",
    D_LLQUANT_FACTORVAL => "llquantize()'s factor is not from 2 to 65535",
    D_LLQUANT_LMAGTYPE => "llquantize()'s low magnitude is not an integer constant",
    D_LLQUANT_LMAGVAL => "llquantize()'s low magnitude is not from 0 to 65535",
    D_LLQUANT_HMAGTYPE => "llquantize()'s high magnitude is not an integer constant",
    D_LLQUANT_HMAGVAL => "llquantize()'s high magnitude is out of range, below the low one, or makes factor^(high+1) overflow 64 bits",
    D_LLQUANT_STEPTYPE => "llquantize()'s steps are not a positive integer constant",
    D_LLQUANT_MATCHFACTOR => "an llquantize() aggregation used with another factor than before",
    D_LLQUANT_MATCHLMAG => "an llquantize() aggregation used with another low magnitude than before",
    D_LLQUANT_MATCHHMAG => "an llquantize() aggregation used with another high magnitude than before",
    D_LLQUANT_MATCHSTEPS => "an llquantize() aggregation used with other steps than before",
    D_LLQUANT_STEPVAL => "llquantize()'s steps are above 65535 or do not fit the factor (divide it, or be a multiple of it dividing factor^(low+1))",
    D_QUANT_PROTO => "an aggregating function's parameter is not an integer constant where one is needed",
    D_XLATE_SOU => "a translator whose output type is not a struct or union, or is not defined",
    D_XLATE_MEMB => "a translator defines a member its output type does not have",
    D_XLATE_INCOMPAT => "a translator member's value has a type the member cannot be assigned",
    D_XLATE_REDECL => "a second translator between the same input and output types",
    D_XLATE_NONE => "`xlate` with no translator from the value's type to the requested type",
    D_XLATE_NOCONV => "a member of a translated value that its translator does not define",
    D_DECL_COMBO => "a type name that combines type words C does not allow together (`char int`), or two types in a row",
    D_DECL_CHARATTR => "`short` or `long` with `char`",
    D_DECL_VOIDATTR => "`short`, `long`, `signed` or `unsigned` with `void`",
    D_DECL_LONGINT => "`long` with a struct, union or enum",
    D_DECL_SIGNINT => "`signed` or `unsigned` with a struct, union or enum",
    D_DECL_ARRNULL => "an array declaration without a dimension or key types (`int a[];`)",
    D_DECL_CLASS => "more than one storage class (`self this int x;`)",
    D_PRINTF_DYN_TYPE => "a `*` width or precision argument that is not an integer",
    D_LQUANT_STEPTYPE => "lquantize()'s step is not a positive integer constant",
    D_LQUANT_STEPVAL => "lquantize()'s step is not a 16-bit quantity",
    D_LQUANT_BASEVAL => "lquantize()'s base does not fit in 32 bits",
    D_LQUANT_LIMVAL => "lquantize()'s limit does not fit in 32 bits",
    D_NORMALIZE_AGGARG => "normalize() or denormalize() given something that is not an aggregation",
    D_CLEAR_AGGARG => "clear() given something that is not an aggregation",
    D_TRUNC_AGGARG => "trunc() given something that is not an aggregation",
    D_USTACK_FRAMES => "ustack()'s frame count is not a valid integer constant",
    D_USTACK_STRSIZE => "ustack()'s string space is negative",
    D_PRINTA_PROTO => "printa() given a format and no aggregation",
    D_LQUANT_BASETYPE => "lquantize()'s base is not an integer constant",
    D_LQUANT_LIMTYPE => "lquantize()'s limit is not an integer constant",
    D_CG_DYN => "a statement whose value is a translated struct (`xlate < T * > (e);`)",
    D_OP_INCOMPLETE => "`->` or `.` applied to a struct or union that is only declared (a forward declaration)",
    D_DECL_BFCONST => "a bit-field width that is not a positive integer constant",
    D_DECL_BFTYPE => "a bit-field of a type that is not an integer",
    D_DECL_BFSIZE => "a bit-field wider than its type",
    D_SIZEOF_BITFIELD => "sizeof applied to a bit-field member",
    D_OFFSETOF_BITFIELD => "offsetof() of a bit-field member",
    D_ADDROF_BITFIELD => "unary `&` applied to a bit-field member",
}

impl std::fmt::Display for ErrTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dtrace_spellings() {
        assert_eq!(ErrTag::D_SYNTAX.as_str(), "D_SYNTAX");
        assert_eq!(ErrTag::D_AGG_REDEF.to_string(), "D_AGG_REDEF");
        for t in ErrTag::ALL {
            // The D compiler's tags, and libdtrace's EDT_DESTRUCTIVE (DTrace refuses destructive
            // actions when enabling, with no D_ tag; Sightline refuses them at compile time).
            assert!(
                t.as_str().starts_with("D_") || *t == ErrTag::EDT_DESTRUCTIVE,
                "{t}"
            );
            assert!(!t.meaning().is_empty());
        }
    }

    #[test]
    fn docs_list_every_tag() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/d-reference.md"
        ))
        .expect("docs/d-reference.md");
        for t in ErrTag::ALL {
            assert!(
                doc.contains(&format!("`{t}`")),
                "docs/d-reference.md does not list {t}"
            );
        }
    }
}
