//! The D abstract syntax tree, as the parser produces it (untyped; names not yet resolved).
//!
//! Follows the DTrace guide, chapters "Program Structure" (clauses, probe descriptions, predicates,
//! pragmas), "Types, Operators, and Expressions", "Variables" and "Aggregations". Every node carries a
//! [`Span`]. Names are plain strings here: `probe-sema` decides whether `pid` is a built-in, a global
//! variable or unknown.

use crate::source::Span;

/// A whole D program: its top-level items in source order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// Clauses, pragmas and declarations, in source order.
    pub items: Vec<Item>,
}

impl Program {
    /// The clauses, in program order.
    pub fn clauses(&self) -> impl Iterator<Item = &Clause> {
        self.items.iter().filter_map(|i| match i {
            Item::Clause(c) => Some(c),
            _ => None,
        })
    }

    /// The `#pragma D option` items, in program order.
    pub fn options(&self) -> impl Iterator<Item = &OptionPragma> {
        self.items.iter().filter_map(|i| match i {
            Item::Option(o) => Some(o),
            _ => None,
        })
    }

    /// Appends the items of another program (e.g. a second `-n` clause parsed from its own file of the
    /// same [`crate::SourceMap`]).
    pub fn extend(&mut self, other: Program) {
        self.items.extend(other.items);
    }
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `probe-descriptions /predicate/ { statements }`.
    Clause(Clause),
    /// `#pragma D option name[=value]`.
    Option(OptionPragma),
    /// A variable declaration such as `int x;`, `self string s;`, `this int t;`, `int a[string];`.
    Decl(VarDecl),
    /// `inline TYPE NAME = expr;` (guide: "Type and Constant Definitions" → "Inlines"): every use
    /// of NAME stands for `(TYPE)(expr)`.
    Inline(InlineDef),
    /// `#pragma D depends_on provider NAME` or `... module NAME`: the program needs that provider
    /// or kernel module, checked by the analysis (DTrace's `dt_pragma_depends`).
    Depends(DependsPragma),
    /// A `struct`, `union` or `enum` definition of the program (guide, "Structs and Unions" and
    /// "Type and Constant Definitions" → "Enumerations"), written alone (`struct s { int a; };`)
    /// or inside a declaration, typedef or another definition; it comes before the items that
    /// use it.
    Type(TypeDef),
    /// `translator OUTPUT < INPUT NAME > { member = expr; ... };` (guide, "Translators"): how
    /// `xlate < OUTPUT > (e)` turns a value of type INPUT into a struct or union OUTPUT.
    Translator(TranslatorDef),
}

/// A translator definition: `translator OUTPUT < INPUT PARAM > { MEMBER = EXPR; ... };`.
#[derive(Clone, Debug, PartialEq)]
pub struct TranslatorDef {
    /// The output type (a struct or union, checked by sema).
    pub output: TypeName,
    /// The input type.
    pub input: TypeName,
    /// The name that stands for the input value in the member expressions.
    pub param: String,
    /// Where `param` is written.
    pub param_span: Span,
    /// The member definitions, in order.
    pub members: Vec<TranslatorMember>,
    /// From the keyword to the closing `}`.
    pub span: Span,
}

/// One member definition of a translator: `MEMBER = EXPR;`.
#[derive(Clone, Debug, PartialEq)]
pub struct TranslatorMember {
    /// The member of the output type it defines.
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// The expression (of the input parameter and globals) that gives its value.
    pub value: Expr,
}

/// `struct NAME { members };`, `union NAME { ... };` or `enum [NAME] { A, B = 5, ... };`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeDef {
    /// The tag (`NAME`); an anonymous struct or union member gets a name the parser makes up
    /// (`<anon N>`), an anonymous enum an empty one.
    pub name: String,
    /// What is defined.
    pub kind: TypeDefKind,
    /// From the keyword to the closing `}`.
    pub span: Span,
}

/// The body of a [`TypeDef`].
#[derive(Clone, Debug, PartialEq)]
pub enum TypeDefKind {
    /// A structure (`union == false`) or union, its members in order.
    Struct {
        /// A union (all members at offset 0)?
        union: bool,
        /// The members.
        members: Vec<MemberDecl>,
    },
    /// An enumeration: its constants in order, each with its value expression if written
    /// (otherwise one more than the previous, the first 0).
    Enum(Vec<EnumConst>),
}

/// One member of a struct or union definition: `type name;` or `type name[N];`.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberDecl {
    /// The member's type.
    pub ty: TypeName,
    /// Its name.
    pub name: String,
    /// `name[N]`: an array of N elements.
    pub array: Option<u64>,
    /// `name : WIDTH`: a bit-field of WIDTH bits (a constant expression, checked by sema).
    /// An unnamed bit-field (`int : 3;`) has an empty `name`.
    pub bits: Option<Expr>,
    /// The declarator.
    pub span: Span,
}

/// One constant of an enum: `NAME` or `NAME = value`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumConst {
    /// The constant's name.
    pub name: String,
    /// Its value as written (an integer constant expression).
    pub value: Option<Expr>,
    /// The name.
    pub span: Span,
}

/// What a `#pragma D depends_on` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DependsClass {
    /// `provider NAME`: a probe provider.
    Provider,
    /// `module NAME`: a kernel module (or `vmlinux`).
    Module,
}

/// `#pragma D depends_on CLASS NAME`.
#[derive(Clone, Debug, PartialEq)]
pub struct DependsPragma {
    /// Provider or module.
    pub class: DependsClass,
    /// The name required.
    pub name: String,
    /// The whole pragma line.
    pub span: Span,
}

/// `inline TYPE NAME = expr;`.
#[derive(Clone, Debug, PartialEq)]
pub struct InlineDef {
    /// The declared type.
    pub ty: TypeName,
    /// The name.
    pub name: String,
    /// The defining expression.
    pub value: Expr,
    /// The whole definition.
    pub span: Span,
}

/// `#pragma D option name[=value]` (guide: "Options and Tunables").
#[derive(Clone, Debug, PartialEq)]
pub struct OptionPragma {
    /// Option name (e.g. `quiet`, `bufsize`).
    pub name: String,
    /// Value after `=`, as written (e.g. `4m`, `1`); `None` for a bare option such as `quiet`.
    pub value: Option<String>,
    /// The whole pragma line.
    pub span: Span,
}

/// A probe clause (guide: "Program Structure").
#[derive(Clone, Debug, PartialEq)]
pub struct Clause {
    /// One or more comma-separated probe descriptions.
    pub probes: Vec<ProbeDesc>,
    /// The predicate between slashes, if any.
    pub predicate: Option<Expr>,
    /// The statements of the body (empty for `{}` or a clause without a body).
    pub body: Vec<Stmt>,
    /// From the first probe description to the closing `}`.
    pub span: Span,
}

/// One field of a probe description: a pattern with `*`, `?`, `[...]` globs, possibly empty
/// (matching everything), possibly holding macro variables (`pid$target`) that sema substitutes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatField {
    /// The raw text as written (empty if the field was omitted or left empty).
    pub text: String,
    /// Where it is; for an omitted field, an empty span at the description's start.
    pub span: Span,
}

/// A probe description `provider:module:function:name`.
///
/// Fewer than four fields fill from the right, as in DTrace: `BEGIN` is `:::BEGIN`, `read:entry` is
/// `::read:entry`, `syscall::read:entry` is complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeDesc {
    /// Provider field (e.g. `syscall`, `profile`, `sched`, `pid$target`).
    pub provider: PatField,
    /// Module field (for tracepoints: unused; for uprobes: the object path or name).
    pub module: PatField,
    /// Function field (e.g. `read`).
    pub function: PatField,
    /// Name field (e.g. `entry`, `tick-1s`, `BEGIN`).
    pub name: PatField,
    /// The whole description as written.
    pub text: String,
    /// The whole description.
    pub span: Span,
}

/// A variable declaration (guide: "Variables": explicit declarations).
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    /// Global, `self` (thread-local) or `this` (clause-local).
    pub scope: DeclScope,
    /// The declared type.
    pub ty: TypeName,
    /// Variable name.
    pub name: String,
    /// Key types for an associative array declaration `int a[string, int];` (empty for a scalar).
    pub keys: Vec<TypeName>,
    /// `int a[5];`: a fixed-size array of this many elements (guide, "Pointers and Arrays" →
    /// "Array Declarations and Storage").
    pub array: Option<u64>,
    /// The whole declaration.
    pub span: Span,
}

/// Where a declared variable lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclScope {
    /// A global (no prefix).
    Global,
    /// `self` thread-local.
    Thread,
    /// `this` clause-local.
    Clause,
}

/// A type name as written in a cast, `sizeof` or declaration, already mapped to what D means by it
/// (LP64: `long` is 8 bytes, `char` is a signed byte).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeName {
    /// The base type.
    pub base: BaseType,
    /// Number of `*` after the base type.
    pub pointer: u8,
    /// The type's text as written, normalized to single spaces (for messages).
    pub text: String,
    /// Where it is written.
    pub span: Span,
}

/// The base of a [`TypeName`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseType {
    /// A C integer type of `bytes` (1, 2, 4, 8) and signedness.
    Int {
        /// Width in bytes.
        bytes: u8,
        /// Signed?
        signed: bool,
    },
    /// D's `string`.
    String,
    /// `void` (only meaningful as `void *`).
    Void,
    /// `struct NAME` or `union NAME`: a kernel type, resolved by sema from BTF.
    Struct(String),
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What kind of statement.
    pub kind: StmtKind,
    /// The whole statement (including its `;` when present).
    pub span: Span,
}

/// Statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// An expression statement: an assignment, an action or subroutine call, `x++`, ...
    Expr(Expr),
    /// `@name[keys] = func(args);` (guide: "Aggregations").
    Aggregate(AggStmt),
    /// `if (cond) stmt-or-block [else stmt-or-block]` (supported by illumos D since 2016).
    If {
        /// The condition.
        cond: Expr,
        /// The then-branch.
        then: Vec<Stmt>,
        /// The else-branch (`None` when absent).
        els: Option<Vec<Stmt>>,
    },
    /// A lone `;` (kept so spans and dumps reflect the source; sema ignores it).
    Empty,
}

/// `@name[keys] = func(args)`.
#[derive(Clone, Debug, PartialEq)]
pub struct AggStmt {
    /// Aggregation name without the `@` (empty for the anonymous `@`).
    pub name: String,
    /// Span of `@name`.
    pub name_span: Span,
    /// Tuple keys in `[...]` (empty when no brackets).
    pub keys: Vec<Expr>,
    /// The aggregating function's name (`count`, `quantize`, ...).
    pub func: String,
    /// Span of the function name.
    pub func_span: Span,
    /// Arguments of the aggregating function.
    pub args: Vec<Expr>,
}

/// An expression with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What kind of expression.
    pub kind: ExprKind,
    /// Source range.
    pub span: Span,
}

/// Expression forms (guide: "Types, Operators, and Expressions").
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// Integer constant (decimal, `0x` hex, `0` octal, with `u`/`l`/`ul`/`ll`/`ull` suffixes) or a
    /// character constant (`'a'`, `'\n'`, type `char` promoted to `int`).
    Int(IntLit),
    /// String literal with escapes already decoded.
    Str(String),
    /// A bare identifier: a built-in (`pid`, `execname`, `arg0`), a global or associative array
    /// variable, or `args`.
    Ident(String),
    /// `$1`..`$9`, `$target`, `$pid`, `$$1` ...: substituted by sema.
    Macro(MacroVar),
    /// `self->name`: a thread-local variable.
    SelfVar(String),
    /// `this->name`: a clause-local variable.
    ThisVar(String),
    /// `@name` as an argument (e.g. `printa(@a)`, `clear(@a)`); empty name for `@`.
    AggRef(String),
    /// Prefix unary operator.
    Unary(UnaryOp, Box<Expr>),
    /// Binary operator (not assignment).
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `lhs = rhs` (op `None`) or compound `lhs op= rhs`.
    Assign(Option<BinaryOp>, Box<Expr>, Box<Expr>),
    /// `++x`, `x++`, `--x`, `x--`.
    IncDec {
        /// `++` (true) or `--` (false).
        increment: bool,
        /// Prefix (true) or postfix (false).
        prefix: bool,
        /// The operand (an lvalue).
        expr: Box<Expr>,
    },
    /// `cond ? a : b`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(type) expr`.
    Cast(TypeName, Box<Expr>),
    /// `sizeof(type)`.
    SizeofType(TypeName),
    /// `sizeof expr`.
    SizeofExpr(Box<Expr>),
    /// `stringof expr` / `stringof(expr)`.
    Stringof(Box<Expr>),
    /// `xlate < TYPE > (expr)` (guide, "Translators"): `expr` translated to the struct or union
    /// TYPE by the program's translator for expr's type; `xlate < TYPE * > (expr)` is a pointer
    /// to the translated value (used with `->`).
    Xlate(TypeName, Box<Expr>),
    /// `offsetof(struct T, member)`: the member's byte offset (guide, "Structs and Unions" →
    /// "Member Sizes and Offsets").
    Offsetof(TypeName, String),
    /// A call to an action, subroutine (or, misplaced, an aggregating function): `name(args)`.
    Call {
        /// Function name.
        func: String,
        /// Span of the function name.
        func_span: Span,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// `base[k1, k2, ...]`: associative array element or `args[N]`.
    Index(Box<Expr>, Vec<Expr>),
    /// `base->field` (`arrow`) or `base.field`.
    Member {
        /// The structure or pointer.
        base: Box<Expr>,
        /// Field name.
        field: String,
        /// Span of the field name.
        field_span: Span,
        /// `->` (true) or `.` (false).
        arrow: bool,
    },
}

/// An integer literal's value and its C type as the suffix and magnitude decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLit {
    /// The value (two's complement bits; literals themselves are never negative).
    pub value: u64,
    /// Has a `u`/`U` suffix.
    pub unsigned_suffix: bool,
    /// Has an `l`/`L`/`ll`/`LL` suffix.
    pub long_suffix: bool,
    /// Written in decimal (C gives decimal and hex/octal literals different type ladders).
    pub decimal: bool,
    /// A character constant such as `'a'`.
    pub char_lit: bool,
}

/// A macro variable (guide: "Scripting": macro variables and macro arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MacroVar {
    /// `$0`..`$9` (and more digits): a macro argument; `$0` is the script name.
    Arg(u32),
    /// `$$N`: macro argument forced to a string.
    ArgString(u32),
    /// A named macro variable: `$target`, `$pid`, `$ppid`, `$uid`, `$gid`, ...
    Named(String),
}

/// Prefix unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`
    Not,
    /// `~x`
    BitNot,
    /// `*x`
    Deref,
    /// `&x`
    AddrOf,
}

/// Binary operators, listed from tightest to loosest binding (C order; D adds `^^`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&`
    BitAnd,
    /// `^`
    BitXor,
    /// `|`
    BitOr,
    /// `&&`
    LogAnd,
    /// `^^` (D's logical exclusive or)
    LogXor,
    /// `||`
    LogOr,
}

impl BinaryOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Mul => "*",
            Div => "/",
            Mod => "%",
            Add => "+",
            Sub => "-",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            BitAnd => "&",
            BitXor => "^",
            BitOr => "|",
            LogAnd => "&&",
            LogXor => "^^",
            LogOr => "||",
        }
    }

    /// True for `< <= > >= == !=`.
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Lt | Le | Gt | Ge | Eq | Ne)
    }

    /// True for `&& ^^ ||`.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::LogAnd | BinaryOp::LogXor | BinaryOp::LogOr)
    }
}

impl UnaryOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Plus => "+",
            UnaryOp::Not => "!",
            UnaryOp::BitNot => "~",
            UnaryOp::Deref => "*",
            UnaryOp::AddrOf => "&",
        }
    }
}
