//! Parser for tracefs event `format` files (`/sys/kernel/tracing/events/CATEGORY/EVENT/format`).
//!
//! The format is the kernel's (kernel/trace/trace_events.c `f_show`, documented in
//! `Documentation/trace/events.rst` § "Event formats"):
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//! \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
//! ...
//! \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
//!
//! print fmt: "..."
//! ```
//!
//! Each `field:` line declares one field as C (`TYPE NAME` or `TYPE NAME[N]`; a dynamic string is
//! `__data_loc char[] NAME`) with its byte offset in the record, its size and signedness.

use crate::catalog::TpField;

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracepointFormat {
    /// The `name:` line (the event name).
    pub name: String,
    /// The `ID:` line (the tracepoint id used by `perf_event_open`).
    pub id: Option<u32>,
    /// The `common_*` fields every event has.
    pub common_fields: Vec<TpField>,
    /// The event's own fields, in order.
    pub fields: Vec<TpField>,
}

/// Why a format file could not be parsed: the 1-based line and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tracefs format line {line}: {reason}")]
pub struct FormatFileError {
    /// 1-based line number in the format text.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

/// Parses a tracefs `format` file and returns the event's own fields (the `common_*` fields are
/// left out: `args->` does not expose them). See [`parse_tracepoint_format_full`] for everything.
///
/// Errors: a `field:` line without a name, or without numeric `offset:`/`size:` parts.
pub fn parse_tracepoint_format(text: &str) -> Result<Vec<TpField>, FormatFileError> {
    parse_tracepoint_format_full(text).map(|f| f.fields)
}

/// Parses a tracefs `format` file completely (name, id, common fields and the event's fields).
pub fn parse_tracepoint_format_full(text: &str) -> Result<TracepointFormat, FormatFileError> {
    let mut out = TracepointFormat {
        name: String::new(),
        id: None,
        common_fields: Vec::new(),
        fields: Vec::new(),
    };
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("name:") {
            out.name = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("ID:") {
            out.id = rest.trim().parse().ok();
        } else if line.starts_with("field:") {
            let field = parse_field_line(line).map_err(|reason| FormatFileError {
                line: line_no,
                reason,
            })?;
            if field.name.starts_with("common_") {
                out.common_fields.push(field);
            } else {
                out.fields.push(field);
            }
        } else if line.starts_with("print fmt:") {
            break;
        }
    }
    Ok(out)
}

/// Parses `field:DECL;\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field_line(line: &str) -> Result<TpField, String> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("bad offset `{v}`"))?,
            );
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("bad size `{v}`"))?,
            );
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or("no field declaration")?;
    let offset = offset.ok_or("no offset")?;
    let size = size.ok_or("no size")?;

    // DECL is `TYPE NAME` or `TYPE NAME[N]`. The name is the last identifier.
    let (head, array) = match decl.strip_suffix(']') {
        Some(d) => {
            let open = d.rfind('[').ok_or("unbalanced `]`")?;
            let n = d[open + 1..].trim();
            // A symbolic or empty length (rare) falls back to the size: arrays of bytes.
            (d[..open].trim_end(), Some(n.parse::<u32>().unwrap_or(size)))
        }
        None => (decl, None),
    };
    let name_start = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let name = &head[name_start..];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no field name in `{decl}`"));
    }
    let c_type = head[..name_start].trim().to_string();
    if c_type.is_empty() {
        return Err(format!("no type in `{decl}`"));
    }
    let data_loc_string = c_type.starts_with("__data_loc") && c_type.contains("char");
    Ok(TpField {
        name: name.to_string(),
        c_type,
        offset,
        size,
        signed,
        array,
        data_loc_string,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copied from /sys/kernel/tracing/events/sched/sched_process_exec/format (Linux 6.18).
    const EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;

print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid
";

    #[test]
    fn parses_embedded_exec_format() {
        let f = parse_tracepoint_format_full(EXEC).unwrap();
        assert_eq!(f.name, "sched_process_exec");
        assert_eq!(f.id, Some(365));
        assert_eq!(f.common_fields.len(), 4);
        assert_eq!(f.fields.len(), 3);
        let file = &f.fields[0];
        assert_eq!(
            (
                file.name.as_str(),
                file.c_type.as_str(),
                file.offset,
                file.size,
                file.data_loc_string
            ),
            ("filename", "__data_loc char[]", 8, 4, true)
        );
        let pid = &f.fields[1];
        assert_eq!(
            (
                pid.name.as_str(),
                pid.c_type.as_str(),
                pid.offset,
                pid.size,
                pid.signed
            ),
            ("pid", "pid_t", 12, 4, true)
        );
        assert_eq!(pid.array, None);
    }

    #[test]
    fn parses_arrays_and_pointers() {
        let text = "format:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                    \tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n";
        let f = parse_tracepoint_format(text).unwrap();
        assert_eq!(f[0].name, "prev_comm");
        assert_eq!(f[0].c_type, "char");
        assert_eq!(f[0].array, Some(16));
        assert_eq!(f[1].name, "filename");
        assert_eq!(f[1].c_type, "const char *");
    }

    #[test]
    fn reports_bad_lines() {
        let err =
            parse_tracepoint_format("format:\n\tfield:int x;\toffset:zz;\tsize:4;\tsigned:1;\n")
                .unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.reason.contains("bad offset"), "{err}");
        let err =
            parse_tracepoint_format("\tfield:int;\toffset:0;\tsize:4;\tsigned:1;\n").unwrap_err();
        assert!(err.reason.contains("no type"), "{err}");
    }
}
