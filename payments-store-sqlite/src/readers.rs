//! A small pool of read-only connections. In WAL mode readers see the last committed state
//! and never wait for the writer.

use std::sync::{Condvar, Mutex};

use payments_core::store::StoreError;
use rusqlite::Connection;

/// Read-only connections, handed out one per read.
#[derive(Debug)]
pub(crate) struct Readers {
    idle: Mutex<Vec<Connection>>,
    freed: Condvar,
}

impl Readers {
    /// A pool of `conns`.
    pub(crate) fn new(conns: Vec<Connection>) -> Readers {
        Readers {
            idle: Mutex::new(conns),
            freed: Condvar::new(),
        }
    }

    /// Runs `read` on an idle connection, waiting for one if all are busy. Blocking: call from
    /// a blocking thread.
    pub(crate) fn with<R>(
        &self,
        read: impl FnOnce(&mut Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let conn = {
            let mut idle = self
                .idle
                .lock()
                .expect("the reader pool lock is never held across a panic");
            loop {
                if let Some(conn) = idle.pop() {
                    break conn;
                }
                idle = self
                    .freed
                    .wait(idle)
                    .expect("the reader pool lock is never held across a panic");
            }
        };
        let mut lease = Lease {
            pool: self,
            conn: Some(conn),
        };
        read(
            lease
                .conn
                .as_mut()
                .expect("a lease holds its connection until dropped"),
        )
    }
}

/// Gives the connection back on drop, also when a read panics.
struct Lease<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if let Ok(mut idle) = self.pool.idle.lock() {
                idle.push(conn);
            }
            self.pool.freed.notify_one();
        }
    }
}
