//! `sightline import`: X-Trace JSON exports and OTLP requests (JSON or protobuf) from files.

use std::path::Path;

use crate::backend::TraceStore;
use crate::error::ImportError;
use crate::otlp;
use crate::xtrace;

/// What kind of file was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// An X-Trace JSON export.
    XTraceJson,
    /// An OTLP/JSON `ExportTraceServiceRequest`.
    OtlpJson,
    /// An OTLP protobuf `ExportTraceServiceRequest`.
    OtlpProtobuf,
}

/// What importing one file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The format found.
    pub format: FileFormat,
    /// Events stored (new ones, and new versions of conflicting ones).
    pub events: usize,
    /// Events of the file identical to ones already stored (or repeated in the file): not
    /// stored again.
    pub duplicates: usize,
    /// Events whose id was already stored with different content: stored as another version.
    pub conflicts: usize,
    /// Distinct tasks among them.
    pub tasks: usize,
    /// Reports or spans that could not be read (skipped).
    pub skipped: usize,
    /// Why the first skipped one was skipped.
    pub first_problem: Option<String>,
}

/// Events per store transaction while importing.
const CHUNK: usize = 20_000;

/// Imports one file into `store`; `received_ns` is recorded as the arrival time of new tasks.
///
/// The format is recognised from the content: JSON with `resourceSpans` is OTLP/JSON, other JSON
/// an X-Trace export, anything else is tried as OTLP protobuf.
///
/// # Errors
/// [`ImportError::Read`], [`ImportError::Otlp`], [`ImportError::NotJsonNorOtlp`],
/// [`ImportError::Format`] (nothing usable in the file), [`ImportError::Store`].
pub fn import_file<S: TraceStore + ?Sized>(
    store: &mut S,
    path: &Path,
    received_ns: i64,
) -> Result<ImportSummary, ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let (format, events, skipped, first_problem) =
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) if v.get("resourceSpans").is_some() || v.get("resource_spans").is_some() => {
                let req = otlp::decode_json(&bytes).map_err(|source| ImportError::Otlp {
                    path: path.to_path_buf(),
                    source,
                })?;
                let c = otlp::to_events(&req);
                (
                    FileFormat::OtlpJson,
                    c.events,
                    c.rejected as usize,
                    c.first_error,
                )
            }
            Ok(v) if xtrace::is_export(&v) => {
                let x = xtrace::read_export(&v);
                let first = x
                    .malformed
                    .first()
                    .map(|(i, why)| format!("report {i}: {why}"));
                (FileFormat::XTraceJson, x.events, x.malformed.len(), first)
            }
            Ok(_) => {
                return Err(ImportError::Format {
                    path: path.to_path_buf(),
                    reason: "JSON, but neither a task list with reports nor resourceSpans",
                });
            }
            Err(json_err) => match otlp::decode_protobuf(&bytes) {
                Ok(req) if !req.resource_spans.is_empty() => {
                    let c = otlp::to_events(&req);
                    (
                        FileFormat::OtlpProtobuf,
                        c.events,
                        c.rejected as usize,
                        c.first_error,
                    )
                }
                _ => {
                    return Err(ImportError::NotJsonNorOtlp {
                        path: path.to_path_buf(),
                        source: json_err,
                    });
                }
            },
        };
    let mut tasks = std::collections::HashSet::new();
    for e in &events {
        tasks.insert(e.task.as_str());
    }
    let tasks = tasks.len();
    let (mut stored, mut duplicates, mut conflicts) = (0, 0, 0);
    for chunk in events.chunks(CHUNK) {
        let s = store.insert(chunk, received_ns)?;
        stored += s.events;
        duplicates += s.duplicates;
        conflicts += s.conflicts;
    }
    Ok(ImportSummary {
        format,
        events: stored,
        duplicates,
        conflicts,
        tasks,
        skipped,
        first_problem,
    })
}
