//! The threads password checks and hashes run on (argon2id takes tens of milliseconds and about
//! 19 MiB of one core each), and the turns that admit them.

use std::sync::Arc;
use std::time::Duration;

use payments_core::RandomSource;

use super::model::SignInError;
use crate::secrets;

/// The threads password checks and hashes run on, and the turns that admit them: `n` threads,
/// so that a burst of sign-ins takes at most `n` cores and the memory of `n` checks (an
/// allocator keeps what a thread freed for that thread: a check on any thread of a large
/// pool would leave 19 MiB behind on each). The threads end when the last clone of the
/// cabinet is dropped.
pub(super) struct PasswordPool {
    jobs: std::sync::mpsc::SyncSender<Box<dyn FnOnce() + Send>>,
    turns: Arc<tokio::sync::Semaphore>,
}

impl PasswordPool {
    pub(super) fn new(threads: usize) -> PasswordPool {
        let threads = threads.max(1);
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Box<dyn FnOnce() + Send>>(threads);
        let queue = Arc::new(std::sync::Mutex::new(queue));
        for n in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("password-check-{n}"))
                .spawn(move || loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .recv();
                    match next {
                        // A job that panics answers nobody (its sign-in is refused busy); the
                        // thread stays for the next one.
                        Ok(job) => {
                            drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)))
                        }
                        Err(_) => return,
                    }
                })
                .expect("a thread for password checks starts");
        }
        PasswordPool {
            jobs,
            turns: Arc::new(tokio::sync::Semaphore::new(threads)),
        }
    }

    /// Runs `work` on a pool thread once a turn is free, waiting at most `wait` for one.
    async fn run<T: Send + 'static>(
        &self,
        wait: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, SignInError> {
        let turn = match tokio::time::timeout(wait, self.turns.clone().acquire_owned()).await {
            Ok(Ok(turn)) => turn,
            _ => return Err(SignInError::Busy),
        };
        let (done, answer) = tokio::sync::oneshot::channel();
        // At most one job per turn is queued or running, so the queue (one place per
        // thread) always has room.
        self.jobs
            .try_send(Box::new(move || {
                let _turn = turn;
                let _ = done.send(work());
            }))
            .map_err(|_| SignInError::Busy)?;
        answer.await.map_err(|_| SignInError::Busy)
    }
}

impl std::fmt::Debug for PasswordPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordPool")
            .field("free", &self.turns.available_permits())
            .finish()
    }
}

impl PasswordPool {
    /// Hashes a new password on the pool, waiting at most `wait` for a turn.
    pub(super) async fn hash(
        &self,
        wait: Duration,
        password: &str,
        rng: Arc<dyn RandomSource>,
    ) -> Result<String, SignInError> {
        let password = password.to_string();
        self.run(wait, move || {
            secrets::hash_password(&password, rng.as_ref())
        })
        .await
    }

    /// Whether `password` matches `stored` (a decoy hash is checked when there is none, so
    /// that an unknown account takes as long), waiting at most `wait` for a turn.
    pub(super) async fn verify(
        &self,
        wait: Duration,
        password: &str,
        stored: Option<&str>,
    ) -> Result<bool, SignInError> {
        let password = password.to_string();
        let (stored, real) = match stored {
            Some(s) => (s.to_string(), true),
            None => (secrets::decoy_hash().to_string(), false),
        };
        let ok = self
            .run(wait, move || secrets::verify_password(&password, &stored))
            .await?;
        Ok(ok && real)
    }
}
