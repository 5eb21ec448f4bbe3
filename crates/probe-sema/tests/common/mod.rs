//! A fixed probe catalog for the sema tests, built from format files copied from
//! /sys/kernel/tracing/events/*/*/format of Linux 6.18 (kernel interface text).

#![allow(dead_code)]

use probe_sema::argspec::ArgSpec;
use probe_sema::{
    DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, StaticCatalog, TpField, UsdtArg, UsdtArgType,
    parse_tracepoint_format,
};

const SCHED_SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;
";

const SCHED_PROCESS_EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;
";

const SIGNAL_GENERATE: &str = "name: signal_generate
ID: 261
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int sig;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int errno;\toffset:12;\tsize:4;\tsigned:1;
\tfield:int code;\toffset:16;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:20;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:36;\tsize:4;\tsigned:1;
\tfield:int group;\toffset:40;\tsize:4;\tsigned:1;
\tfield:int result;\toffset:44;\tsize:4;\tsigned:1;
";

/// sys_enter_read's fields after `__syscall_nr`.
const SYS_ENTER_READ: &str = "format:
\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:char * buf;\toffset:24;\tsize:8;\tsigned:0;
\tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;
";

const SYS_ENTER_OPENAT: &str = "format:
\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;
";

fn probe(
    provider: &str,
    module: &str,
    function: &str,
    name: &str,
    args: ProbeArgs,
    kind: ProbeKind,
) -> ProbeInfo {
    ProbeInfo {
        provider: provider.into(),
        module: module.into(),
        function: function.into(),
        name: name.into(),
        args,
        kind,
    }
}

fn syscall_args(format: &str) -> Vec<TpField> {
    parse_tracepoint_format(format)
        .unwrap()
        .into_iter()
        .filter(|f| f.name != "__syscall_nr")
        .collect()
}

fn tracepoint(category: &str, event: &str, format: &str) -> ProbeInfo {
    probe(
        category,
        "",
        "",
        event,
        ProbeArgs::Tracepoint {
            fields: parse_tracepoint_format(format).unwrap(),
        },
        ProbeKind::Tracepoint {
            category: category.into(),
            event: event.into(),
        },
    )
}

/// The test catalog: dtrace, profile, a few syscalls (x86-64 numbers), tracepoints, a USDT probe.
pub fn catalog() -> StaticCatalog {
    let mut probes = vec![
        probe(
            "dtrace",
            "",
            "",
            "BEGIN",
            ProbeArgs::None,
            ProbeKind::Dtrace(DtraceProbe::Begin),
        ),
        probe(
            "dtrace",
            "",
            "",
            "END",
            ProbeArgs::None,
            ProbeKind::Dtrace(DtraceProbe::End),
        ),
        probe(
            "dtrace",
            "",
            "",
            "ERROR",
            ProbeArgs::DtraceError,
            ProbeKind::Dtrace(DtraceProbe::Error),
        ),
        probe(
            "profile",
            "",
            "",
            "tick-1s",
            ProbeArgs::Profile,
            ProbeKind::Profile {
                period_ns: 1_000_000_000,
                every_cpu: false,
            },
        ),
        probe(
            "profile",
            "",
            "",
            "tick-10ms",
            ProbeArgs::Profile,
            ProbeKind::Profile {
                period_ns: 10_000_000,
                every_cpu: false,
            },
        ),
        probe(
            "profile",
            "",
            "",
            "profile-97",
            ProbeArgs::Profile,
            ProbeKind::Profile {
                period_ns: 1_000_000_000 / 97,
                every_cpu: true,
            },
        ),
    ];
    let syscalls: [(&str, u32, u8, Option<&str>); 7] = [
        ("read", 0, 3, Some(SYS_ENTER_READ)),
        ("write", 1, 3, None),
        ("close", 3, 1, None),
        ("getpid", 39, 0, None),
        ("openat", 257, 4, Some(SYS_ENTER_OPENAT)),
        ("pread64", 17, 4, None),
        ("exit_group", 231, 1, None),
    ];
    for (name, nr, nargs, fmt) in syscalls {
        let args = fmt.map(syscall_args).unwrap_or_default();
        probe_pair(&mut probes, name, nr, nargs, args);
    }
    probes.push(tracepoint("sched", "sched_switch", SCHED_SWITCH));
    probes.push(tracepoint(
        "sched",
        "sched_process_exec",
        SCHED_PROCESS_EXEC,
    ));
    probes.push(tracepoint("signal", "signal_generate", SIGNAL_GENERATE));
    probes.push(probe(
        "python",
        "/usr/bin/python3.11",
        "",
        "function__entry",
        ProbeArgs::Usdt {
            args: vec![
                UsdtArg::untyped(8, false),
                UsdtArg::untyped(8, false),
                UsdtArg::untyped(4, true),
            ],
            stability: None,
        },
        ProbeKind::Usdt {
            path: "/usr/bin/python3.11".into(),
            offset: 0x1000,
            semaphore: Some(0x2000),
            arg_specs: ["8@%rbx", "8@%rbp", "-4@%eax"]
                .map(|t| ArgSpec::parse(t).unwrap())
                .to_vec(),
            pid: None,
        },
    ));
    // A sightline-usdt probe with a `.note.sightline` note (docs/usdt.md): `request(request_path:
    // &str, status: u16, delta: i64)`.
    let typed = |size: u8, signed: bool, name: &str, ty: &str| UsdtArg {
        size,
        signed,
        typed: Some(UsdtArgType {
            name: name.into(),
            rust_type: ty.into(),
        }),
    };
    probes.push(probe(
        "webserver",
        "/srv/webserver",
        "serve",
        "request",
        ProbeArgs::Usdt {
            args: vec![
                typed(8, false, "request_path", "&str"),
                typed(2, false, "status", "u16"),
                typed(8, true, "delta", "i64"),
            ],
            stability: Some("Evolving/Evolving/Common".into()),
        },
        ProbeKind::Usdt {
            path: "/srv/webserver".into(),
            offset: 0x1100,
            semaphore: Some(0x3000),
            arg_specs: ["8@%rax", "2@%cx", "-8@%rdx"]
                .map(|t| ArgSpec::parse(t).unwrap())
                .to_vec(),
            pid: None,
        },
    ));
    probes.push(probe(
        "pid1234",
        "a.out",
        "main",
        "entry",
        ProbeArgs::Uprobe { ret: false },
        ProbeKind::Uprobe {
            path: "/tmp/a.out".into(),
            offset: 0x1139,
            ret: false,
            pid: Some(1234),
        },
    ));
    probes.push(probe(
        "pid1234",
        "a.out",
        "main",
        "return",
        ProbeArgs::Uprobe { ret: true },
        ProbeKind::Uprobe {
            path: "/tmp/a.out".into(),
            offset: 0x1139,
            ret: true,
            pid: Some(1234),
        },
    ));
    StaticCatalog { probes }
}

fn probe_pair(probes: &mut Vec<ProbeInfo>, name: &str, nr: u32, nargs: u8, args: Vec<TpField>) {
    probes.push(probe(
        "syscall",
        "",
        name,
        "entry",
        ProbeArgs::SyscallEntry { nargs, args },
        ProbeKind::Syscall { nr, entry: true },
    ));
    probes.push(probe(
        "syscall",
        "",
        name,
        "return",
        ProbeArgs::SyscallReturn,
        ProbeKind::Syscall { nr, entry: false },
    ));
}
