//! Structure member access through BTF: a hand-built kernel type set (exact offsets, so the typed
//! program can be compared exactly) and the running kernel's /sys/kernel/btf/vmlinux.

mod common;

use probe_sema::btf::Btf;
use probe_sema::{SemaOptions, Type, analyze, dump};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};
use std::sync::Arc;

/// Encodes BTF records by hand, as the kernel lays them out (Documentation/bpf/btf.rst).
struct Builder {
    types: Vec<u8>,
    strings: Vec<u8>,
    next_id: u32,
}

const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const TYPEDEF: u32 = 8;

impl Builder {
    fn new() -> Builder {
        Builder {
            types: Vec::new(),
            strings: vec![0],
            next_id: 1,
        }
    }
    fn s(&mut self, name: &str) -> u32 {
        if name.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        off
    }
    fn words(&mut self, w: &[u32]) -> u32 {
        for x in w {
            self.types.extend_from_slice(&x.to_le_bytes());
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }
    fn int(&mut self, name: &str, size: u32, signed: bool) -> u32 {
        let n = self.s(name);
        self.words(&[n, INT << 24, size, (u32::from(signed) << 24) | (size * 8)])
    }
    fn ptr(&mut self, to: u32) -> u32 {
        self.words(&[0, PTR << 24, to])
    }
    fn array(&mut self, elem: u32, len: u32, index: u32) -> u32 {
        self.words(&[0, ARRAY << 24, 0, elem, index, len])
    }
    fn typedef(&mut self, name: &str, to: u32) -> u32 {
        let n = self.s(name);
        self.words(&[n, TYPEDEF << 24, to])
    }
    /// A struct with members (name, type, bit offset, bitfield size); `kind_flag` when any bitfield.
    fn strukt(&mut self, name: &str, size: u32, members: &[(&str, u32, u32, u32)]) -> u32 {
        let n = self.s(name);
        let kind_flag = members.iter().any(|m| m.3 != 0);
        let mut w = vec![
            n,
            (STRUCT << 24) | (u32::from(kind_flag) << 31) | members.len() as u32,
            size,
        ];
        for &(mn, ty, off, bits) in members {
            let mn = self.s(mn);
            w.extend_from_slice(&[mn, ty, if kind_flag { (bits << 24) | off } else { off }]);
        }
        self.words(&w)
    }
    fn finish(self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xEB9Fu16.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for w in [
            24u32,
            0,
            self.types.len() as u32,
            self.types.len() as u32,
            self.strings.len() as u32,
        ] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&self.types);
        b.extend_from_slice(&self.strings);
        b
    }
}

/// `struct task_struct { int pid @16; int tgid @20; char comm[16] @24; struct task_struct
/// *real_parent @40; struct sched_entity se @48; unsigned int flags:3 @112 }`,
/// `struct sched_entity { u64 vruntime @8; u32 nr[4] @0 }` (ids are fixed by creation order).
fn kernel() -> Arc<Btf> {
    let mut b = Builder::new();
    let int = b.int("int", 4, true); // 1
    let chr = b.int("char", 1, true); // 2
    let ulong = b.int("unsigned long long", 8, false); // 3
    let u64_ = b.typedef("u64", ulong); // 4
    let uint = b.int("unsigned int", 4, false); // 5
    let comm = b.array(chr, 16, int); // 6
    let nr = b.array(uint, 4, int); // 7
    let se = b.strukt(
        "sched_entity",
        24,
        &[("nr", nr, 0, 0), ("vruntime", u64_, 128, 0)],
    ); // 8
    let task_ptr = b.ptr(10); // 9
    let task = b.strukt(
        "task_struct",
        64,
        &[
            ("pid", int, 128, 0),
            ("tgid", int, 160, 0),
            ("comm", comm, 192, 0),
            ("real_parent", task_ptr, 320, 0),
            ("se", se, 384, 0),
            ("flags", uint, 896, 3),
        ],
    ); // 10
    assert_eq!(task, 10);
    Arc::new(Btf::parse(&b.finish()).unwrap())
}

fn run(text: &str, btf: Option<Arc<Btf>>) -> String {
    let file = SourceFile::new("t.d", text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    assert!(diags.is_empty(), "{}", render_all(&diags, &map));
    let opts = SemaOptions {
        kernel_types: btf,
        ..Default::default()
    };
    match analyze(&program, &common::catalog(), &opts) {
        Ok(p) => dump::program(&p),
        Err(d) => render_all(&d, &map),
    }
}

#[test]
fn member_access_lowers_to_address_arithmetic_and_loads() {
    let out = run(
        "BEGIN {
	a = curthread->pid;
	b = curthread->real_parent->tgid;
	c = curthread->se.vruntime;
	d = curthread->se.nr[2];
	trace(curthread->comm);
	e = ((struct task_struct *)arg0)->tgid;
	f = sizeof(struct task_struct);
	g = curthread->comm[1];
	h = offsetof(struct task_struct, comm) + offsetof(struct sched_entity, vruntime);
}",
        Some(kernel()),
    );
    assert_eq!(
        out,
        "\
var a#0 Global: int
var b#1 Global: int
var c#2 Global: uint64_t
var d#3 Global: uint32_t
var e#4 Global: int
var f#5 Global: uint64_t
var g#6 Global: char
var h#7 Global: uint64_t
clause 0 dtrace:::BEGIN
  (= a#0 (* (cast (+ (cast curthread:struct:task_struct*):u64 16:u64):u64):i32*):i32):i32
  (= b#1 (* (cast (+ (cast (* (cast (+ (cast curthread:struct:task_struct*):u64 40:u64):u64):struct:task_struct**):struct:task_struct*):u64 20:u64):u64):i32*):i32):i32
  (= c#2 (* (cast (+ (+ (cast curthread:struct:task_struct*):u64 48:u64):u64 16:u64):u64):u64*):u64):u64
  (= d#3 (* (cast (+ (+ (cast curthread:struct:task_struct*):u64 48:u64):u64 (* 2:u64 4:u64):u64):u64):u32*):u32):u32
  trace (stringof (cast (+ (cast curthread:struct:task_struct*):u64 24:u64):u64):i8*):str
  (= e#4 (* (cast (+ (cast (cast arg0:i64):struct:task_struct*):u64 20:u64):u64):i32*):i32):i32
  (= f#5 64:u64):u64
  (= g#6 (* (cast (+ (+ (cast curthread:struct:task_struct*):u64 24:u64):u64 (* 1:u64 1:u64):u64):u64):i8*):i8):i8
  (= h#7 (+ 24:u64 16:u64):u64):u64
"
    );
}

#[test]
fn member_errors() {
    let out = run(
        "BEGIN {
	a = curthread->pdi;
	c = curthread->se;
	d = pid->x;
	e = ((struct nosuch *)arg0)->x;
	f = curthread->se.nr;
	g = 1 + *curthread;
	h = curthread->se.nr[9];
}",
        Some(kernel()),
    );
    assert_eq!(
        out,
        "\
t.d:2:17: error[D_TYPE_MEMBER]: struct task_struct has no member `pdi`
   2 | 	a = curthread->pdi;
     | 	               ^~~
hint: did you mean `pid`?
t.d:3:6: error[D_OP_SOU]: a `struct sched_entity` cannot be used as a value
   3 | 	c = curthread->se;
     | 	    ^~~~~~~~~~~~~
hint: read one of its members with `.member`
t.d:4:6: error[D_OP_PTR]: operator `->` needs a pointer to a structure, not `int`
   4 | 	d = pid->x;
     | 	    ^~~
hint: cast an address: ((struct task_struct *)addr)->pid
t.d:5:8: error[D_TYPE_ERR]: the kernel has no type `struct nosuch *`
   5 | 	e = ((struct nosuch *)arg0)->x;
     | 	      ^~~~~~~~~~~~~~~
t.d:6:6: error[D_OP_ARRFUN]: an array of type `uint32_t[4]` cannot be used as a value
   6 | 	f = curthread->se.nr;
     | 	    ^~~~~~~~~~~~~~~~
hint: read an element: a[i]
t.d:7:10: error[D_OP_SOU]: cannot dereference a `struct task_struct *`
   7 | 	g = 1 + *curthread;
     | 	        ^~~~~~~~~~
t.d:8:23: error[D_ARR_BADREF]: subscript 9 is out of range for an array of 4
   8 | 	h = curthread->se.nr[9];
     | 	                     ^
"
    );
}

#[test]
fn needs_kernel_types_only_for_structure_access() {
    let needs = |text: &str| {
        let (p, d) = parse(&SourceFile::new("t.d", text));
        assert!(d.is_empty(), "{text}: {d:?}");
        probe_sema::needs_kernel_types(&p)
    };
    assert!(!needs("BEGIN { exit(0); }"));
    assert!(!needs(
        "sched:::sched_switch { @[args->prev_comm] = count(); self->x = 1; this->y = self->x; }"
    ));
    assert!(needs("BEGIN { trace(curthread->pid); }"));
    assert!(needs("BEGIN { x = (struct task_struct *)arg0; }"));
    assert!(needs("sched:::sched_switch /args->p->pid/ { }"));
    assert!(needs("BEGIN { @[sizeof(struct file)] = count(); }"));
}

#[test]
fn needs_user_symbols_only_for_user_symbol_actions() {
    let needs = |text: &str| {
        let (p, d) = parse(&SourceFile::new("t.d", text));
        assert!(d.is_empty(), "{text}: {d:?}");
        probe_sema::needs_user_symbols(&p)
    };
    assert!(!needs(
        "syscall:::entry { @[execname, probefunc] = count(); printf(\"%d\\n\", pid); }"
    ));
    assert!(!needs("profile-97 { @[stack()] = count(); }"));
    assert!(needs(
        "profile-97 /pid == $target/ { @[ustack()] = count(); }"
    ));
    assert!(needs("profile-97 { @[usym(arg1)] = count(); }"));
    assert!(needs("tick-1s /x/ { printf(\"%A\\n\", uaddr(arg1 + 1)); }"));
    assert!(needs(
        "pid$target:a.out:f:entry { self->u = ufunc(arg0) == 0 ? 1 : 2; }"
    ));
}

#[test]
fn without_btf_member_access_says_why() {
    let out = run(
        "BEGIN { a = curthread->pid; b = (struct task_struct *)arg0; }",
        None,
    );
    assert!(
        out.contains("cannot access member `pid`: no kernel type information"),
        "{out}"
    );
    assert!(out.contains("/sys/kernel/btf/vmlinux"), "{out}");
    assert!(
        out.contains("unknown type `struct task_struct *`: no kernel type information"),
        "{out}"
    );
}

#[test]
fn running_kernel_btf() {
    let path = "/sys/kernel/btf/vmlinux";
    let Ok(bytes) = std::fs::read(path) else {
        let msg = format!("skipped: {path} is absent (kernel without CONFIG_DEBUG_INFO_BTF)");
        // CI runs on a kernel with BTF (.ci/run): a skip there is a failure.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg}; CI=true makes this a failure"
        );
        eprintln!("{msg}");
        return;
    };
    let btf = Btf::parse(&bytes).unwrap();
    assert!(btf.len() > 10_000, "only {} types", btf.len());
    let task = btf
        .struct_id("task_struct")
        .expect("task_struct in vmlinux BTF");
    let (pid, off) = btf.member(task, "pid").unwrap();
    assert_eq!(btf.d_type(pid.ty), Type::INT, "pid_t is int");
    assert!(off > 0 && off % 8 == 0);
    let (comm, _) = btf.member(task, "comm").unwrap();
    assert_eq!(btf.d_type(comm.ty), Type::String);
    let (parent, _) = btf.member(task, "real_parent").unwrap();
    assert!(
        matches!(btf.d_type(parent.ty), Type::Ptr(inner) if matches!(*inner, Type::Struct { ref name, .. } if name == "task_struct"))
    );
    // A program using it type-checks against the real layout.
    let out = run(
        "BEGIN { printf(\"%s %d %d\\n\", curthread->comm, curthread->pid, curthread->real_parent->tgid); exit(0); }",
        Some(Arc::new(btf)),
    );
    assert!(
        out.starts_with("clause 0 dtrace:::BEGIN\n  printf"),
        "{out}"
    );
}

#[test]
fn bitfield_members_read_their_bits() {
    // `unsigned int flags:3` at bit 896 (byte 112): a byte is loaded and its low 3 bits kept,
    // zero-extended (shift left by 64 - 3, logical shift right by 64 - 3).
    let out = run("BEGIN { b = curthread->flags; }", Some(kernel()));
    assert!(
        out.contains("(+ (cast curthread:struct:task_struct*):u64 112:u64):u64):u8*):u8"),
        "{out}"
    );
    assert!(out.contains("(<< (cast "), "{out}");
    assert!(out.contains("61:u64):u64 61:u64):u64"), "{out}");
    assert!(out.contains("var b#0 Global: uint32_t"), "{out}");
}
