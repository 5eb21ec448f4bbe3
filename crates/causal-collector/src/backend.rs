//! The store backends behind one interface: the embedded SQLite [`Store`] and the
//! [`ClickHouseStore`], chosen by a `--store` value ([`StoreSpec`]).
//!
//! [`TraceStore`] is what `import`, `tasks`, `show`, the web UI and [`crate::query`] need: batched
//! idempotent writes, task lookup, a task's events, the task list, and the services and
//! operations the UI's search offers. [`AnyStore`] is either
//! backend, opened from a [`StoreSpec`].

use std::path::PathBuf;

use causal_analysis::Event;

use crate::clickhouse::{ClickHouseStore, ClickHouseUrl};
use crate::error::StoreError;
use crate::store::{InsertStats, Store, TaskFilter, TaskSummary};

/// The operations every store backend has (the SQLite [`Store`]'s public methods, same
/// signatures and semantics).
pub trait TraceStore {
    /// Writes `events` as one batch, idempotently (see [`Store::insert`]).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn insert(&mut self, events: &[Event], received_ns: i64) -> Result<InsertStats, StoreError>;
    /// Resolves a task id or unique prefix (see [`Store::resolve_task`]).
    ///
    /// # Errors
    /// [`StoreError::NoSuchTask`], [`StoreError::AmbiguousTask`], the backend's errors.
    fn resolve_task(&self, prefix: &str) -> Result<String, StoreError>;
    /// A task's events in arrival order (see [`Store::load_task`]).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError>;
    /// The tasks matching `filter` (see [`Store::tasks`]).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError>;
    /// Events stored.
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn event_count(&self) -> Result<i64, StoreError>;
    /// Distinct agents (services) of all stored events, sorted (see [`crate::query::services`]).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn services(&self) -> Result<Vec<String>, StoreError>;
    /// Distinct operations of the events of agent `service`, sorted (see
    /// [`crate::query::operations`]).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError>;
}

impl TraceStore for Store {
    fn insert(&mut self, events: &[Event], received_ns: i64) -> Result<InsertStats, StoreError> {
        Store::insert(self, events, received_ns)
    }
    fn resolve_task(&self, prefix: &str) -> Result<String, StoreError> {
        Store::resolve_task(self, prefix)
    }
    fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError> {
        Store::load_task(self, task_id)
    }
    fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError> {
        Store::tasks(self, filter)
    }
    fn event_count(&self) -> Result<i64, StoreError> {
        Store::event_count(self)
    }
    fn services(&self) -> Result<Vec<String>, StoreError> {
        crate::query::sqlite_services(self)
    }
    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        crate::query::sqlite_operations(self, service)
    }
}

impl TraceStore for ClickHouseStore {
    fn insert(&mut self, events: &[Event], received_ns: i64) -> Result<InsertStats, StoreError> {
        ClickHouseStore::insert(self, events, received_ns)
    }
    fn resolve_task(&self, prefix: &str) -> Result<String, StoreError> {
        ClickHouseStore::resolve_task(self, prefix)
    }
    fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError> {
        ClickHouseStore::load_task(self, task_id)
    }
    fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError> {
        ClickHouseStore::tasks(self, filter)
    }
    fn event_count(&self) -> Result<i64, StoreError> {
        ClickHouseStore::event_count(self)
    }
    fn services(&self) -> Result<Vec<String>, StoreError> {
        ClickHouseStore::services(self)
    }
    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        ClickHouseStore::operations(self, service)
    }
}

/// Where a store is: a SQLite file, or a ClickHouse database (`clickhouse://…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded store in this file.
    Sqlite(PathBuf),
    /// A ClickHouse database.
    ClickHouse(ClickHouseUrl),
}

impl StoreSpec {
    /// `clickhouse://…` is a ClickHouse store ([`ClickHouseUrl::parse`]); anything else is a
    /// SQLite file path.
    ///
    /// # Errors
    /// [`StoreError::BadStoreUrl`] for a malformed `clickhouse://` URL.
    pub fn parse(s: &str) -> Result<StoreSpec, StoreError> {
        if s.starts_with("clickhouse://") {
            ClickHouseUrl::parse(s).map(StoreSpec::ClickHouse)
        } else {
            Ok(StoreSpec::Sqlite(PathBuf::from(s)))
        }
    }
}

impl std::fmt::Display for StoreSpec {
    /// The file path, or the ClickHouse URL without credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Sqlite(p) => write!(f, "{}", p.display()),
            StoreSpec::ClickHouse(u) => write!(f, "{u}"),
        }
    }
}

/// Either backend, opened.
#[derive(Debug)]
pub enum AnyStore {
    /// The embedded SQLite store.
    Sqlite(Store),
    /// A ClickHouse store.
    ClickHouse(ClickHouseStore),
}

impl AnyStore {
    /// Opens (creating when absent) the store `spec` names.
    ///
    /// # Errors
    /// [`Store::open`]'s and [`ClickHouseStore::open`]'s errors.
    pub fn open(spec: &StoreSpec) -> Result<AnyStore, StoreError> {
        Ok(match spec {
            StoreSpec::Sqlite(p) => AnyStore::Sqlite(Store::open(p)?),
            StoreSpec::ClickHouse(u) => AnyStore::ClickHouse(ClickHouseStore::open(u)?),
        })
    }

    /// The open backend, as a trait object: every [`TraceStore`] method of [`AnyStore`]
    /// forwards to it.
    pub fn as_dyn(&self) -> &dyn TraceStore {
        match self {
            AnyStore::Sqlite(s) => s,
            AnyStore::ClickHouse(s) => s,
        }
    }

    /// [`AnyStore::as_dyn`], mutable (for [`TraceStore::insert`]).
    pub fn as_dyn_mut(&mut self) -> &mut dyn TraceStore {
        match self {
            AnyStore::Sqlite(s) => s,
            AnyStore::ClickHouse(s) => s,
        }
    }
}

impl TraceStore for AnyStore {
    fn insert(&mut self, events: &[Event], received_ns: i64) -> Result<InsertStats, StoreError> {
        self.as_dyn_mut().insert(events, received_ns)
    }
    fn resolve_task(&self, prefix: &str) -> Result<String, StoreError> {
        self.as_dyn().resolve_task(prefix)
    }
    fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError> {
        self.as_dyn().load_task(task_id)
    }
    fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError> {
        self.as_dyn().tasks(filter)
    }
    fn event_count(&self) -> Result<i64, StoreError> {
        self.as_dyn().event_count()
    }
    fn services(&self) -> Result<Vec<String>, StoreError> {
        self.as_dyn().services()
    }
    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        self.as_dyn().operations(service)
    }
}
