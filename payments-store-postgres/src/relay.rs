//! The outbox relay between the nodes of one database: each node tells the others which
//! projects it has queued callback events for, so that their long polls (and dispatchers)
//! wake at once instead of at a timer ([`OutboxRelay`]).
//!
//! It rides PostgreSQL's `LISTEN`/`NOTIFY` on one connection of its own per node, outside the
//! pool. What a node commits is told after the commit, by that connection, never inside the
//! payment's transaction: a transaction that notifies takes a database-wide lock at its commit,
//! which would make every commit of every node wait in one line. The connection sends with
//! `synchronous_commit = off` (a notification is a wake-up, not data), and what was queued
//! while one send was under way goes in the next, one notification for many projects: the
//! relay sends at most one notification per round trip however many events are committed.
//!
//! A payload is a comma-separated list of project ids, or `*` for "look again, all of you".
//! When the connection is lost, the node's own wakers are told to look again (what the others
//! sent meanwhile is gone), and it connects again a second later.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use payments_core::store::{OutboxRelay, OutboxWaker};
use payments_core::ProjectId;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, Socket};

use crate::tls::{Target, Transport};

/// This session's backend and the name of the channel every node of its database schema
/// listens on: the schema's own, so that deployments in two schemas of one database do not
/// wake each other (PostgreSQL's channels are per database). Lower-case hex and `_`: safe to
/// write unquoted.
const WHO_AND_WHERE: &str =
    "SELECT pg_backend_pid(), 'payments_outbox_' || left(md5(current_schema()), 16)";

/// The most project ids one notification carries (PostgreSQL's payload limit is 8,000
/// bytes; an id is 36).
const IDS_PER_NOTIFICATION: usize = 200;

/// The most projects held for the next send; past it the next send says `*`.
const MAX_PENDING: usize = 10_000;

/// How long a lost connection waits before it is opened again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The relay of one store ([`PgStore::outbox_relay`](crate::PgStore)).
pub(crate) struct PgRelay {
    target: Arc<Target>,
    runtime: tokio::runtime::Handle,
}

impl PgRelay {
    pub(crate) fn new(target: Arc<Target>, runtime: tokio::runtime::Handle) -> PgRelay {
        PgRelay { target, runtime }
    }
}

impl OutboxRelay for PgRelay {
    fn join(&self, local: Arc<dyn OutboxWaker>) -> Arc<dyn OutboxWaker> {
        let shared = Arc::new(Outgoing::default());
        let runtime = tokio::runtime::Handle::try_current().unwrap_or(self.runtime.clone());
        runtime.spawn(run(self.target.clone(), local, shared.clone()));
        Arc::new(Sender(shared))
    }
}

/// What this node has committed and not told yet, and the bell of the task that tells it.
#[derive(Default)]
struct Outgoing {
    pending: Mutex<Pending>,
    ready: Notify,
}

#[derive(Default)]
struct Pending {
    projects: HashSet<ProjectId>,
    /// Tell everyone to look again (a hold released, or too many projects to list).
    all: bool,
    /// The service let go of the relay: the task ends.
    closed: bool,
}

impl Outgoing {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The payloads of what is pending, taken; `None` once the relay is closed.
    fn take(&self) -> Option<Vec<String>> {
        let mut p = self.lock();
        if p.closed {
            return None;
        }
        let mut payloads = Vec::new();
        if std::mem::take(&mut p.all) {
            p.projects.clear();
            payloads.push("*".to_string());
        }
        let ids: Vec<String> = p.projects.drain().map(|id| id.to_string()).collect();
        payloads.extend(ids.chunks(IDS_PER_NOTIFICATION).map(|c| c.join(",")));
        Some(payloads)
    }
}

/// The waker the service tells of this node's events.
struct Sender(Arc<Outgoing>);

impl OutboxWaker for Sender {
    fn wake(&self) {
        self.0.lock().all = true;
        self.0.ready.notify_one();
    }

    fn queued(&self, project: ProjectId) {
        {
            let mut p = self.0.lock();
            if p.projects.len() >= MAX_PENDING {
                p.all = true;
            } else {
                p.projects.insert(project);
            }
        }
        self.0.ready.notify_one();
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_one();
    }
}

/// Tells `local` what `payload` names: each project's events, or all (`*` or anything
/// unreadable).
fn deliver(local: &dyn OutboxWaker, payload: &str) {
    let ids: Option<Vec<ProjectId>> = payload.split(',').map(|s| s.parse().ok()).collect();
    match ids {
        Some(ids) => ids.into_iter().for_each(|id| local.queued(id)),
        None => local.wake(),
    }
}

/// The relay's task: a session per connection, until the service lets go of it.
async fn run(target: Arc<Target>, local: Arc<dyn OutboxWaker>, out: Arc<Outgoing>) {
    loop {
        let ended = match &target.transport {
            Transport::Plain => session(&target, NoTls, &local, &out).await,
            Transport::Verified(tls) => session(&target, tls.clone(), &local, &out).await,
        };
        if ended == Ended::Closed {
            return;
        }
        // What the other nodes sent while this one was not listening is lost.
        local.wake();
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// Why a session ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The service let go of the relay.
    Closed,
    /// The connection could not be opened, failed or ended.
    Lost,
}

/// One connection: listens, forwards what the other nodes send and sends what this node
/// committed.
async fn session<T>(target: &Target, tls: T, local: &Arc<dyn OutboxWaker>, out: &Outgoing) -> Ended
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let Ok((client, connection)) = target.config.connect(tls).await else {
        return Ended::Lost;
    };
    let me = Arc::new(AtomicI32::new(0));
    let mut driver = AbortOnDrop(tokio::spawn(drive(connection, local.clone(), me.clone())));
    let listening = async {
        let row = client.query_one(WHO_AND_WHERE, &[]).await?;
        let (pid, channel): (i32, String) = (row.get(0), row.get(1));
        me.store(pid, Ordering::SeqCst);
        // Named after its channel: an operator (or a test) finds each node's relay in
        // `pg_stat_activity`.
        let setup = format!(
            "SET synchronous_commit = off; SET application_name = 'relay {channel}'; \
             LISTEN {channel}"
        );
        client.batch_execute(&setup).await.map(|()| channel)
    };
    let Ok(channel) = listening.await else {
        return Ended::Lost;
    };
    // Listening now: whatever was sent before is looked for once.
    local.wake();
    loop {
        tokio::select! {
            _ = &mut driver.0 => return Ended::Lost,
            () = out.ready.notified() => {
                let Some(payloads) = out.take() else { return Ended::Closed };
                if send(&client, &channel, &payloads).await.is_err() {
                    return Ended::Lost;
                }
            }
        }
    }
}

async fn send(
    client: &Client,
    channel: &str,
    payloads: &[String],
) -> Result<(), tokio_postgres::Error> {
    for payload in payloads {
        client
            .execute("SELECT pg_notify($1, $2)", &[&channel, payload])
            .await?;
    }
    Ok(())
}

/// Drives `connection`, telling `local` what each other node's notification names (one
/// sent by `me`, this session's own backend, is this node's own and skipped); ends with
/// the connection.
async fn drive<S, T>(
    mut connection: Connection<S, T>,
    local: Arc<dyn OutboxWaker>,
    me: Arc<AtomicI32>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
        match message {
            Ok(AsyncMessage::Notification(n)) if n.process_id() != me.load(Ordering::SeqCst) => {
                deliver(local.as_ref(), n.payload());
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
