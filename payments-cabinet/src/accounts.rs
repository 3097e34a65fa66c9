//! The cabinet's own rules over the core's ports: users and invitations, sign-in with a password
//! and a TOTP code (or a recovery code), forced enrolment, throttling, sessions with idle and
//! absolute timeouts, and the cabinet's audit log. Payments, projects and credentials are the
//! core's: the web pages call [`PaymentService`] for them.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::store::{
    CabinetAuditRecord, CabinetStore, InviteRecord, Role, SessionProof, SessionRecord,
    SessionStage, SlotRecord, UserRecord,
};
use payments_core::ids::{MerchantId, ProjectId, SessionId, UserId};
use payments_core::project::AuditRecord;
use payments_core::service::{Actor, PaymentService};
use payments_core::store::StoreError;
use payments_core::{ApiError, ErrorCode, SecretString, Timestamp};

use crate::secrets;
use crate::store::CabinetStoreExt;
use payments_core::store::MerchantStoreExt;

/// A throttling limit: at most `attempts` failures within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Failures allowed in the window.
    pub attempts: usize,
    /// The window.
    pub window: Duration,
}

/// The cabinet's settings.
#[derive(Debug, Clone)]
pub struct CabinetConfig {
    /// The issuer shown by authenticator apps (`otpauth://` URI).
    pub issuer: String,
    /// A signed-in session ends after this long without a request (30 min).
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in whatever happens (12 h).
    pub absolute_timeout: Duration,
    /// A session that passed the password step has this long for the second factor (10 min).
    pub second_factor_timeout: Duration,
    /// How long an invitation link works (72 h).
    pub invite_ttl: Duration,
    /// Failed passwords per account (e-mail): 5 per 15 min.
    pub account_limit: Limit,
    /// Failed codes (TOTP or recovery) per user: 5 per 15 min.
    pub code_limit: Limit,
    /// Failed attempts of any kind per client address: 20 per 15 min.
    pub address_limit: Limit,
    /// `last_seen_at` is written at most this often per session (1 min).
    pub touch_interval: Duration,
    /// Password checks and hashes (argon2id, about 19 MiB and tens of milliseconds of one
    /// core each) that run at once: half the cores, at least one. The rest of the cores
    /// stay the APIs', and the memory they take is bounded by this number.
    pub password_checks: usize,
    /// How long a sign-in waits for a free password check before it is answered
    /// `503` with `Retry-After` ([`SignInError::Busy`]) (2 s).
    pub password_wait: Duration,
    /// Cabinet audit records older than this are deleted (400 days, like the core's audit
    /// records); `None` keeps them however old.
    pub audit_retention: Option<Duration>,
    /// At most this many cabinet audit records are kept, the oldest deleted first (one
    /// million: with inputs cut to 254 characters, a few hundred MiB at most); `None` sets no
    /// bound. Whatever fills the log, its size stays bounded.
    pub audit_max_records: Option<u64>,
    /// How long a one-time slot waits for the page it was made for (5 min): a value shown
    /// once, or a refused form carried through the redirect to the page that shows it again
    /// ([`Cabinet::put_slot`]).
    pub slot_ttl: Duration,
    /// The most one-time slots one session holds (16); a new one deletes the session's
    /// oldest beyond it, so reloading a refused form in a loop keeps a bounded number.
    pub slots_per_session: usize,
    /// The most one-time slots kept in all (100,000, a few hundred bytes each); the purge
    /// deletes those that expire first beyond it.
    pub slots_max: u64,
}

impl Default for CabinetConfig {
    fn default() -> Self {
        let fifteen = Duration::from_secs(15 * 60);
        CabinetConfig {
            issuer: "Payments".to_string(),
            idle_timeout: Duration::from_secs(30 * 60),
            absolute_timeout: Duration::from_secs(12 * 3600),
            second_factor_timeout: Duration::from_secs(10 * 60),
            invite_ttl: Duration::from_secs(72 * 3600),
            account_limit: Limit {
                attempts: 5,
                window: fifteen,
            },
            code_limit: Limit {
                attempts: 5,
                window: fifteen,
            },
            address_limit: Limit {
                attempts: 20,
                window: fifteen,
            },
            touch_interval: Duration::from_secs(60),
            password_checks: std::thread::available_parallelism()
                .map_or(1, |n| n.get() / 2)
                .max(1),
            password_wait: Duration::from_secs(2),
            audit_retention: Some(Duration::from_secs(400 * 86_400)),
            audit_max_records: Some(1_000_000),
            slot_ttl: Duration::from_secs(5 * 60),
            slots_per_session: 16,
            slots_max: 100_000,
        }
    }
}

/// The audit records one retention batch deletes at most ([`Cabinet::purge`]).
pub const AUDIT_PURGE_BATCH: usize = 1000;
/// The batches one [`Cabinet::purge`] runs at most: 100,000 records a call, so a log that
/// grew far past its bound shrinks back within minutes without holding the writer long.
pub const AUDIT_PURGE_BATCHES: usize = 100;

/// What one [`Cabinet::purge`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Sessions past their timeouts.
    pub sessions: u64,
    /// Sign-in failures older than the longest throttling window.
    pub failures: u64,
    /// Audit records past their retention or beyond the most kept.
    pub audit: u64,
    /// One-time slots past their expiry (never taken) or beyond
    /// [`CabinetConfig::slots_max`].
    pub slots: u64,
}

/// Who is asking: the client address and browser, for sessions, throttling and the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Client {
    /// The client address (through trusted proxies), when known.
    pub address: Option<IpAddr>,
    /// The `User-Agent`, shortened.
    pub user_agent: Option<String>,
}

impl Client {
    fn address_text(&self) -> Option<String> {
        self.address.map(|a| a.to_string())
    }
}

/// The source an address is throttled as: an IPv4 address itself (also when IPv4-mapped), an
/// IPv6 address by its /64, which one host usually holds whole and can pick addresses from.
pub fn source_of(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                let prefix = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
                format!("{prefix}/64")
            }
        },
    }
}

/// Why a sign-in step was refused. The message does not say which part was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// Wrong e-mail or password (or a disabled account, or one without a password).
    #[error("The e-mail address or the password is not right.")]
    BadPassword,
    /// A wrong, malformed or already used code.
    #[error("The code is not right, or it was already used. Wait for the next code.")]
    BadCode,
    /// A wrong or used recovery code.
    #[error("The recovery code is not right, or it was already used.")]
    BadRecoveryCode,
    /// Too many failures: nothing is checked until `until`.
    #[error("Too many failed attempts. Try again after {}.", crate::web::views::when_text(*until))]
    Throttled {
        /// When attempts are checked again.
        until: Timestamp,
    },
    /// Every password check is taken and none came free within
    /// [`CabinetConfig::password_wait`]: nothing was checked or counted (`503`,
    /// `Retry-After`).
    #[error("The service is busy checking other sign-ins. Try again in a few seconds.")]
    Busy,
    /// The session ended (timeout, sign-out, revoked): sign in again.
    #[error("The session has ended. Sign in again.")]
    SessionEnded,
    /// The store failed.
    #[error("{0}")]
    Store(String),
}

impl From<StoreError> for SignInError {
    fn from(e: StoreError) -> Self {
        SignInError::Store(e.to_string())
    }
}

impl From<ApiError> for SignInError {
    fn from(e: ApiError) -> Self {
        SignInError::Store(e.message)
    }
}

/// A session as the web layer holds it: the cookie value (shown to the browser only) and the
/// record.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The cookie value.
    pub cookie: SecretString,
    /// The stored session.
    pub record: SessionRecord,
}

/// A request's signed-in (or half signed-in) user.
#[derive(Debug, Clone)]
pub struct Current {
    /// The session.
    pub session: SessionRecord,
    /// Its user.
    pub user: UserRecord,
}

impl Current {
    /// The audit actor of the user's actions through the core: `cabinet:<e-mail>`.
    pub fn actor(&self) -> Actor {
        Actor(format!("cabinet:{}", self.user.email))
    }

    /// Whether the user is support staff.
    pub fn is_support(&self) -> bool {
        self.user.role == Role::Support
    }
}

/// What to show the user for enrolment.
#[derive(Debug, Clone)]
pub struct Enrolment {
    /// The key as base32 text (typed into an authenticator).
    pub key_base32: String,
    /// The `otpauth://` URI.
    pub uri: String,
}

/// A new invitation link's token, shown once.
#[derive(Debug, Clone)]
pub struct Invite {
    /// The user.
    pub user: UserRecord,
    /// The token of the link (`/invite/<token>`).
    pub token: SecretString,
    /// When the link stops working.
    pub expires_at: Timestamp,
}

/// The web cabinet over the service and its store.
#[derive(Clone)]
pub struct Cabinet {
    service: PaymentService,
    store: Arc<dyn CabinetStore>,
    config: CabinetConfig,
    /// The threads that run password checks ([`CabinetConfig::password_checks`]).
    checks: Arc<PasswordPool>,
    /// Anonymous refusals (unknown accounts, throttled attempts) per source, for the audit
    /// log's aggregation ([`Cabinet::audit_attempt`]).
    refusals: Arc<std::sync::Mutex<Refusals>>,
}

/// The threads password checks and hashes run on, and the turns that admit them: `n` threads,
/// so that a burst of sign-ins takes at most `n` cores and the memory of `n` checks (an
/// allocator keeps what a thread freed for that thread: a check on any thread of a large
/// pool would leave 19 MiB behind on each). The threads end when the last clone of the
/// cabinet is dropped.
struct PasswordPool {
    jobs: std::sync::mpsc::SyncSender<Box<dyn FnOnce() + Send>>,
    turns: Arc<tokio::sync::Semaphore>,
}

impl PasswordPool {
    fn new(threads: usize) -> PasswordPool {
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

/// Refused sign-ins per (source, kind) in this process: when each one's window began and how
/// many it has counted since. The audit log gets a row for the first of a window and at each
/// doubling (1, 2, 4, 8, ...), with the count: a flood of junk sign-ins from one source adds
/// a handful of rows, not one each.
#[derive(Debug, Default)]
struct Refusals(std::collections::HashMap<String, (Timestamp, u64)>);

/// The most sources [`Refusals`] tracks; beyond it, ended windows are dropped first, then all.
const MAX_TRACKED_SOURCES: usize = 10_000;

impl Refusals {
    /// Counts one refusal of `key` at `now` in windows of `window`: `Some(count)` when this
    /// one gets an audit row.
    fn count(&mut self, key: String, now: Timestamp, window: Duration) -> Option<u64> {
        if self.0.len() >= MAX_TRACKED_SOURCES && !self.0.contains_key(&key) {
            self.0.retain(|_, (start, _)| *start + window > now);
            if self.0.len() >= MAX_TRACKED_SOURCES {
                self.0.clear();
            }
        }
        let entry = self.0.entry(key).or_insert((now, 0));
        if entry.0 + window <= now {
            *entry = (now, 0);
        }
        entry.1 += 1;
        entry.1.is_power_of_two().then_some(entry.1)
    }
}

/// The throttle's key of an account: `account:<e-mail>`, or, for an input longer than any
/// e-mail address (up to the 64 KiB of a form), the hex SHA-256 of it, so that junk does
/// not grow the failures table by its own size.
fn account_key(email: &str) -> String {
    if email.len() <= 254 {
        format!("account:{email}")
    } else {
        let digest: String = secrets::token_hash(email)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("account-sha256:{digest}")
    }
}

/// What the audit log keeps of a typed e-mail: the address, normalised, or, when the input is
/// no e-mail address (a password typed into the wrong field, junk), only its length.
fn shown_email(input: &str) -> String {
    match normalise_email(input) {
        Ok(email) if email.len() <= 254 => email,
        _ => format!(
            "(not an e-mail address, {} characters)",
            input.chars().count()
        ),
    }
}

impl std::fmt::Debug for Cabinet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cabinet")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn bad_request(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m)
}

/// What a refused sign-in may carry back to fill its form again: the e-mail field as typed
/// (trimmed) when it is an e-mail address of at most 254 characters, and nothing for a
/// throttled attempt, so a flood of guesses gets its message and no echo of what it sent.
pub fn refill_email(typed: &str, refusal: &SignInError) -> Option<String> {
    if matches!(refusal, SignInError::Throttled { .. }) {
        return None;
    }
    normalise_email(typed)
        .ok()
        .map(|_| typed.trim().to_string())
}

/// An e-mail address as stored: trimmed, lower-case; refused unless it looks like
/// `local@domain` (one `@`, no spaces or control characters, 3 to 254 characters).
pub fn normalise_email(email: &str) -> Result<String, ApiError> {
    let e = email.trim().to_lowercase();
    let ok = (3..=254).contains(&e.len())
        && e.matches('@').count() == 1
        && !e.starts_with('@')
        && !e.ends_with('@')
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(e)
    } else {
        Err(bad_request(format!(
            "email: {:?} is not an e-mail address",
            email.trim()
        )))
    }
}

impl Cabinet {
    /// The cabinet over `service` and `store`, the store of the cabinet's own records (the
    /// bundled SQLite and PostgreSQL stores keep them in the service's database: pass the same
    /// store twice).
    pub fn new(
        service: PaymentService,
        store: Arc<dyn CabinetStore>,
        config: CabinetConfig,
    ) -> Cabinet {
        let checks = Arc::new(PasswordPool::new(config.password_checks));
        Cabinet {
            service,
            store,
            config,
            checks,
            refusals: Arc::default(),
        }
    }

    /// The payment service.
    pub fn service(&self) -> &PaymentService {
        &self.service
    }

    /// The cabinet's store.
    pub fn store(&self) -> &Arc<dyn CabinetStore> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &CabinetConfig {
        &self.config
    }

    fn now(&self) -> Timestamp {
        self.service.ports().clock.now()
    }

    fn rng(&self) -> &dyn payments_core::RandomSource {
        self.service.ports().rng.as_ref()
    }

    // --- users ---------------------------------------------------------------------------

    /// Creates a user and its first invitation (the operator API and CLI): a merchant user of
    /// an existing merchant, or support staff.
    pub async fn create_user(
        &self,
        email: &str,
        role: Role,
        actor: &Actor,
    ) -> Result<Invite, ApiError> {
        let email = normalise_email(email)?;
        if let Role::Merchant(m) = role {
            self.service
                .store()
                .merchant(m)
                .await?
                .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "merchant not found"))?;
        }
        let user = UserRecord {
            id: UserId::generate(self.rng()),
            email: email.clone(),
            role,
            password_hash: None,
            totp_secret: None,
            totp_confirmed_at: None,
            disabled: false,
            created_at: self.now(),
        };
        self.store.insert_user(&user).await.map_err(|e| match e {
            StoreError::Duplicate(_) => bad_request(format!("email: {email} already has a user")),
            other => other.into(),
        })?;
        self.core_audit(actor, "user.create", &user, Some(user_json(&user)))
            .await?;
        self.audit(CabinetAuditRecord {
            at: user.created_at,
            user_id: Some(user.id),
            email: user.email.clone(),
            address: None,
            merchant_id: role.merchant(),
            project_id: None,
            action: "user.create".into(),
            target: user.id.to_string(),
            success: true,
            detail: Some(format!("by {}", actor.0)),
        })
        .await?;
        self.issue_invite(user, actor).await
    }

    /// Creates a merchant user with a password already set (the sandbox bootstrap's demo
    /// user); it enrols its TOTP key at first sign-in like any other.
    pub async fn create_user_with_password(
        &self,
        email: &str,
        merchant: MerchantId,
        password: &str,
        actor: &Actor,
    ) -> Result<UserRecord, ApiError> {
        let invite = self
            .create_user(email, Role::Merchant(merchant), actor)
            .await?;
        self.set_password(invite.token.expose(), password, &Client::default())
            .await
    }

    /// A new invitation link for a user (also a password reset: the current password keeps
    /// working until the link is used). Earlier links stop working.
    pub async fn invite(&self, user: UserId, actor: &Actor) -> Result<Invite, ApiError> {
        let user = self
            .store
            .user(user)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
        self.issue_invite(user, actor).await
    }

    async fn issue_invite(&self, user: UserRecord, actor: &Actor) -> Result<Invite, ApiError> {
        let token = secrets::random_token(self.rng());
        let now = self.now();
        let record = InviteRecord {
            token_hash: secrets::token_hash(&token),
            user_id: user.id,
            created_at: now,
            expires_at: now + self.config.invite_ttl,
        };
        self.store.put_invite(&record).await?;
        self.core_audit(actor, "user.invite", &user, None).await?;
        Ok(Invite {
            user,
            token: token.into(),
            expires_at: record.expires_at,
        })
    }

    /// Sets a user's password through an invitation token (taken once). The user's sessions
    /// end. The TOTP key is kept: a user who has one signs in with it.
    pub async fn set_password(
        &self,
        invite_token: &str,
        password: &str,
        client: &Client,
    ) -> Result<UserRecord, ApiError> {
        let now = self.now();
        let hash = secrets::token_hash(invite_token);
        // Checked before taking the invitation, so that a bad password does not use it up.
        let invite_user = self.invite_user(invite_token).await?;
        secrets::check_new_password(password, &invite_user.email)
            .map_err(|e| bad_request(format!("password: {e}")))?;
        // Hashed before the invitation is taken, so that a busy service does not use it up.
        let hashed = self.hash(password).await.map_err(|e| {
            ApiError::new(ErrorCode::ServiceUnavailable, e.to_string())
                .with_retry_after(self.config.password_wait.as_secs().max(1))
        })?;
        let invite = self
            .store
            .take_invite(&hash, now)
            .await?
            .ok_or_else(invite_gone)?;
        let mut user = self
            .store
            .user(invite.user_id)
            .await?
            .ok_or_else(invite_gone)?;
        user.password_hash = Some(hashed);
        self.store.update_user(&user).await?;
        self.store.delete_user_sessions(user.id, None).await?;
        self.audit(self.record(&user, client, "user.set_password", true))
            .await?;
        Ok(user)
    }

    /// The user an invitation token is for, if it is live (the set-password page).
    pub async fn invite_user(&self, invite_token: &str) -> Result<UserRecord, ApiError> {
        let invite = self
            .store
            .invite(&secrets::token_hash(invite_token), self.now())
            .await?
            .ok_or_else(invite_gone)?;
        self.store
            .user(invite.user_id)
            .await?
            .ok_or_else(invite_gone)
    }

    /// Every user.
    pub async fn users(&self) -> Result<Vec<UserRecord>, ApiError> {
        Ok(self.store.users().await?)
    }

    /// Disables or enables a user; disabling ends its sessions.
    pub async fn set_disabled(
        &self,
        id: UserId,
        disabled: bool,
        actor: &Actor,
    ) -> Result<UserRecord, ApiError> {
        let mut user = self
            .store
            .user(id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
        user.disabled = disabled;
        self.store.update_user(&user).await?;
        if disabled {
            self.store.delete_user_sessions(id, None).await?;
        }
        let action = if disabled {
            "user.disable"
        } else {
            "user.enable"
        };
        self.core_audit(actor, action, &user, Some(user_json(&user)))
            .await?;
        Ok(user)
    }

    /// Hashes a new password on the password pool (waiting at most
    /// [`CabinetConfig::password_wait`] for a turn).
    async fn hash(&self, password: &str) -> Result<String, SignInError> {
        let rng = self.service.ports().rng.clone();
        let password = password.to_string();
        self.checks
            .run(self.config.password_wait, move || {
                secrets::hash_password(&password, rng.as_ref())
            })
            .await
    }

    /// Whether `password` matches `stored` (a decoy hash is checked when there is none, so
    /// that an unknown account takes as long). Waits for a check's turn first.
    async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, SignInError> {
        let password = password.to_string();
        let (stored, real) = match stored {
            Some(s) => (s.to_string(), true),
            None => (secrets::decoy_hash().to_string(), false),
        };
        let ok = self
            .checks
            .run(self.config.password_wait, move || {
                secrets::verify_password(&password, &stored)
            })
            .await?;
        Ok(ok && real)
    }

    // --- throttling ----------------------------------------------------------------------

    /// Counts an attempt under each of `keys` before it is checked: records it as a failure at
    /// the returned time, then counts what each window holds. An attempt that finds
    /// `limit.attempts` others in a window is forgotten again (it is not checked, so it is no
    /// failure) and refused. Each attempt counts those recorded before it, so of any number
    /// of simultaneous attempts, on any number of nodes, at most `limit.attempts` are checked
    /// per window.
    async fn begin_attempt(&self, keys: &[(String, Limit)]) -> Result<Timestamp, SignInError> {
        let now = self.now();
        for (key, _) in keys {
            self.store.record_failure(key, now).await?;
        }
        let mut until: Option<Timestamp> = None;
        for (key, limit) in keys {
            if let Some(t) = self.over_limit(key, *limit, now).await? {
                until = Some(until.map_or(t, |u| u.max(t)));
            }
        }
        match until {
            Some(until) => {
                self.forget_attempt(keys, now).await?;
                Err(SignInError::Throttled { until })
            }
            None => Ok(now),
        }
    }

    /// `Some(until)` when `key` holds `limit.attempts` failures or attempts besides the one
    /// recorded at `now` within the window.
    async fn over_limit(
        &self,
        key: &str,
        limit: Limit,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let mut times = self
            .store
            // A failure counts for `window` after it: at `failure + window` it no longer does.
            .failures_since(
                key,
                now.saturating_sub(limit.window) + Duration::from_millis(1),
                10_000,
            )
            .await?;
        if let Some(own) = times.iter().rposition(|t| *t == now) {
            times.remove(own);
        }
        if limit.attempts == 0 || times.len() < limit.attempts {
            return Ok(None);
        }
        Ok(Some(times[times.len() - limit.attempts] + limit.window))
    }

    /// Forgets the attempt recorded at `at` under each of `keys`: it was not a failure.
    async fn forget_attempt(
        &self,
        keys: &[(String, Limit)],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        for (key, _) in keys {
            self.store.forget_attempt(key, at).await?;
        }
        Ok(())
    }

    /// A successful attempt: the first key's (the account's, the user's codes') failures are
    /// all forgotten, the others (the address's) lose this attempt only.
    async fn attempt_succeeded(
        &self,
        keys: &[(String, Limit)],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        if let Some(((first, _), rest)) = keys.split_first() {
            self.store.clear_failures(first).await?;
            self.forget_attempt(rest, at).await?;
        }
        Ok(())
    }

    fn address_key(&self, client: &Client) -> Option<(String, Limit)> {
        client.address.map(|a| {
            (
                format!("address:{}", source_of(a)),
                self.config.address_limit,
            )
        })
    }

    // --- sign-in -------------------------------------------------------------------------

    fn session_record(
        &self,
        user: UserId,
        stage: SessionStage,
        signed_in_at: Timestamp,
        client: &Client,
    ) -> NewSession {
        let cookie = secrets::random_token(self.rng());
        let now = self.now();
        NewSession {
            record: SessionRecord {
                id: SessionId::generate(self.rng()),
                token_hash: secrets::token_hash(&cookie),
                user_id: user,
                stage,
                created_at: now,
                signed_in_at,
                last_seen_at: now,
                address: client.address_text(),
                user_agent: client.user_agent.clone(),
            },
            cookie: cookie.into(),
        }
    }

    /// The password step: a new half session (stage [`SessionStage::Password`]) whose next
    /// page is the code or, for a user without a confirmed key, enrolment. `old_cookie` (a
    /// session the browser still had) is ended.
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        client: &Client,
        old_cookie: Option<&str>,
    ) -> Result<(NewSession, UserRecord), SignInError> {
        let email = email.trim().to_lowercase();
        let mut keys = vec![(account_key(&email), self.config.account_limit)];
        keys.extend(self.address_key(client));
        let user = self.store.user_by_email(&email).await?;
        let at = match self.begin_attempt(&keys).await {
            Ok(at) => at,
            Err(e) => {
                let merchant = user.as_ref().and_then(|u| u.role.merchant());
                let user_id = user.as_ref().map(|u| u.id);
                self.audit_attempt(
                    &email,
                    user_id,
                    merchant,
                    client,
                    "sign_in.password",
                    THROTTLED,
                )
                .await?;
                return Err(e);
            }
        };
        let stored = user.as_ref().and_then(|u| u.password_hash.as_deref());
        let ok = match self.verify(password, stored).await {
            Ok(ok) => ok,
            Err(busy) => {
                self.forget_attempt(&keys, at).await?;
                return Err(busy);
            }
        };
        let user = match user {
            Some(u) if ok && !u.disabled => u,
            other => {
                let merchant = other.as_ref().and_then(|u| u.role.merchant());
                let user_id = other.as_ref().map(|u| u.id);
                // The result column says "refused"; the detail says why, as a reason.
                let why = match &other {
                    None => "no account with this e-mail",
                    Some(u) if u.disabled => "the account is disabled",
                    Some(_) => "wrong password",
                };
                self.audit_attempt(&email, user_id, merchant, client, "sign_in.password", why)
                    .await?;
                return Err(SignInError::BadPassword);
            }
        };
        self.attempt_succeeded(&keys, at).await?;
        if let Some(old) = old_cookie {
            if let Some(s) = self
                .store
                .session_by_token(&secrets::token_hash(old))
                .await?
            {
                self.store.delete_session(s.id).await?;
            }
        }
        let session = self.session_record(user.id, SessionStage::Password, self.now(), client);
        self.store.insert_session(&session.record).await?;
        self.audit(self.record(&user, client, "sign_in.password", true))
            .await?;
        Ok((session, user))
    }

    /// The session of a cookie, if it is live: a signed-in one idle for less than the idle
    /// timeout and younger than the absolute one, a half one younger than the second-factor
    /// timeout, of an enabled user. A session past a limit is deleted. Touches
    /// `last_seen_at` at most once per [`CabinetConfig::touch_interval`].
    pub async fn session(&self, cookie: &str) -> Result<Option<Current>, ApiError> {
        let Some(session) = self
            .store
            .session_by_token(&secrets::token_hash(cookie))
            .await?
        else {
            return Ok(None);
        };
        let now = self.now();
        let expired = match session.stage {
            SessionStage::Full => {
                now >= session.last_seen_at + self.config.idle_timeout
                    || now >= session.signed_in_at + self.config.absolute_timeout
            }
            SessionStage::Password => now >= session.created_at + self.config.second_factor_timeout,
        };
        let user = self.store.user(session.user_id).await?;
        let user = match user {
            Some(u) if !expired && !u.disabled => u,
            _ => {
                self.store.delete_session(session.id).await?;
                return Ok(None);
            }
        };
        let mut session = session;
        if now >= session.last_seen_at + self.config.touch_interval {
            self.store.touch_session(session.id, now).await?;
            session.last_seen_at = now;
        }
        Ok(Some(Current { session, user }))
    }

    fn key_context(user: UserId) -> String {
        format!("totp:{user}")
    }

    fn totp_key(&self, user: &UserRecord) -> Result<Option<Vec<u8>>, ApiError> {
        let Some(stored) = &user.totp_secret else {
            return Ok(None);
        };
        let keys = &self.service.config().sealing;
        let text = if payments_core::sealing::SealingKeys::is_sealed(stored.expose()) {
            keys.open(stored.expose(), &Self::key_context(user.id))
                .map_err(|e| ApiError::internal(format!("TOTP key of {}: {e}", user.id)))?
        } else {
            stored.expose().to_string()
        };
        secrets::totp_key_from_base32(&text)
            .map(Some)
            .ok_or_else(|| ApiError::internal(format!("TOTP key of {} is not base32", user.id)))
    }

    /// Re-seals every stored TOTP key that is not sealed under the current sealing key
    /// (plaintext, or a previous key) with the current key, like
    /// [`Directory::reseal_callback_secrets`](payments_core::service::Directory::reseal_callback_secrets) for callback secrets; answers (re-sealed,
    /// already current). Refused without a configured key.
    pub async fn reseal_totp_keys(&self) -> Result<(u64, u64), ApiError> {
        let keys = &self.service.config().sealing;
        if !keys.is_configured() {
            return Err(bad_request("no sealing key is configured"));
        }
        let (mut resealed, mut current) = (0, 0);
        for mut user in self.store.users().await? {
            let Some(stored) = &user.totp_secret else {
                continue;
            };
            if !keys.needs_reseal(stored.expose()) {
                current += 1;
                continue;
            }
            let key = self
                .totp_key(&user)?
                .ok_or_else(|| ApiError::internal("a TOTP key vanished"))?;
            let sealed = keys
                .seal(
                    &secrets::totp_key_base32(&key),
                    &Self::key_context(user.id),
                    self.rng(),
                )
                .map_err(|e| ApiError::internal(format!("sealing a TOTP key: {e}")))?;
            user.totp_secret = Some(sealed.into());
            self.store.update_user(&user).await?;
            resealed += 1;
        }
        Ok((resealed, current))
    }

    /// Enrolment of a half-signed-in user without a confirmed key: the key (made and stored,
    /// sealed, at the first call; the same key until it is confirmed).
    pub async fn enrolment(&self, current: &Current) -> Result<Enrolment, ApiError> {
        if current.user.totp_confirmed_at.is_some() {
            return Err(bad_request("the two-factor key is already set up"));
        }
        let key = match self.totp_key(&current.user)? {
            Some(k) => k,
            None => {
                let key = secrets::new_totp_key(self.rng());
                let text = secrets::totp_key_base32(&key);
                let keys = &self.service.config().sealing;
                let stored = if keys.is_configured() {
                    keys.seal(&text, &Self::key_context(current.user.id), self.rng())
                        .map_err(|e| ApiError::internal(format!("sealing a TOTP key: {e}")))?
                } else {
                    text
                };
                // Re-read so that a concurrent enrolment page keeps the first key.
                let mut user = self
                    .store
                    .user(current.user.id)
                    .await?
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
                if user.totp_secret.is_none() {
                    user.totp_secret = Some(stored.into());
                    self.store.update_user(&user).await?;
                }
                self.totp_key(&user)?
                    .ok_or_else(|| ApiError::internal("the TOTP key was not stored"))?
            }
        };
        Ok(Enrolment {
            key_base32: secrets::totp_key_base32(&key),
            uri: secrets::otpauth_uri(&key, &self.config.issuer, &current.user.email),
        })
    }

    fn code_keys(&self, user: UserId, client: &Client) -> Vec<(String, Limit)> {
        let mut keys = vec![(format!("code:{user}"), self.config.code_limit)];
        keys.extend(self.address_key(client));
        keys
    }

    /// A half session's code step: a TOTP code (`Some(step)`) or a recovery code, checked
    /// and used by the store together with the new session.
    async fn second_step(
        &self,
        current: &Current,
        cookie: &str,
        client: &Client,
        action: &str,
        proof: Result<SessionProof, SignInError>,
    ) -> Result<NewSession, SignInError> {
        if current.session.stage != SessionStage::Password {
            return Err(SignInError::SessionEnded);
        }
        let keys = self.code_keys(current.user.id, client);
        let at = match self.begin_attempt(&keys).await {
            Ok(at) => at,
            Err(e) => {
                self.audit(
                    self.record(&current.user, client, action, false)
                        .detail(THROTTLED),
                )
                .await?;
                return Err(e);
            }
        };
        let refused = match &proof {
            Err(e) => Some(e.clone()),
            Ok(_) => None,
        };
        let new = self.session_record(current.user.id, SessionStage::Full, self.now(), client);
        let accepted = match proof {
            Ok(p) => {
                self.store
                    .advance_session(&secrets::token_hash(cookie), &new.record, &p)
                    .await?
            }
            Err(_) => false,
        };
        if !accepted {
            self.audit(self.record(&current.user, client, action, false))
                .await?;
            return Err(refused.unwrap_or(match action {
                "sign_in.recovery_code" => SignInError::BadRecoveryCode,
                _ => SignInError::BadCode,
            }));
        }
        self.attempt_succeeded(&keys, at).await?;
        self.audit(self.record(&current.user, client, action, true))
            .await?;
        Ok(new)
    }

    /// The TOTP step of sign-in: the code's time step must be later than the last one used.
    pub async fn verify_code(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        let key = self.totp_key(&current.user)?;
        let proof = match (&key, current.user.totp_confirmed_at) {
            (Some(key), Some(_)) => secrets::matching_step(key, code, self.now().unix_secs())
                .map(SessionProof::TotpStep)
                .ok_or(SignInError::BadCode),
            _ => Err(SignInError::BadCode),
        };
        self.second_step(current, cookie, client, "sign_in.totp", proof)
            .await
    }

    /// Sign-in with a recovery code instead of a TOTP code; the code is consumed.
    pub async fn verify_recovery_code(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        let proof = if current.user.totp_confirmed_at.is_some() && !code.trim().is_empty() {
            Ok(SessionProof::RecoveryCode(secrets::recovery_code_hash(
                code,
            )))
        } else {
            Err(SignInError::BadRecoveryCode)
        };
        let new = self
            .second_step(current, cookie, client, "sign_in.recovery_code", proof)
            .await?;
        let left = self.store.recovery_codes_left(current.user.id).await?;
        tracing::info!(user = %current.user.id, left, "signed in with a recovery code");
        Ok(new)
    }

    /// Confirms enrolment with the first code: the key counts from now, and 10 recovery codes
    /// are issued (returned once, stored hashed).
    pub async fn confirm_enrolment(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Vec<String>), SignInError> {
        // The key as stored now: the enrolment page made it after `current` was read.
        let user = self
            .store
            .user(current.user.id)
            .await?
            .ok_or(SignInError::SessionEnded)?;
        let key = self.totp_key(&user)?;
        let codes = secrets::new_recovery_codes(self.rng());
        let proof = match (&key, user.totp_confirmed_at) {
            (Some(key), None) => secrets::matching_step(key, code, self.now().unix_secs())
                .map(|step| SessionProof::Enrolment {
                    step,
                    recovery_codes: codes
                        .iter()
                        .map(|c| secrets::recovery_code_hash(c))
                        .collect(),
                    at: self.now(),
                })
                .ok_or(SignInError::BadCode),
            _ => Err(SignInError::BadCode),
        };
        let new = self
            .second_step(current, cookie, client, "two_factor.enrol", proof)
            .await?;
        Ok((new, codes))
    }

    /// Signs out: the session is deleted.
    pub async fn sign_out(&self, current: &Current, client: &Client) -> Result<(), ApiError> {
        self.store.delete_session(current.session.id).await?;
        self.audit(self.record(&current.user, client, "sign_out", true))
            .await
    }

    /// A fresh TOTP code for a sensitive change by a signed-in user, used like a sign-in code
    /// (never twice); the session gets a new id. Throttled like sign-in codes.
    async fn reauthenticate(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
        action: &str,
    ) -> Result<NewSession, SignInError> {
        self.reauthenticate_with(current, cookie, code, client, action, false)
            .await
    }

    /// [`reauthenticate`](Self::reauthenticate), also with one of the user's recovery codes
    /// (consumed) when `recovery` allows it: a code with a letter in it is taken for one.
    async fn reauthenticate_with(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
        action: &str,
        recovery: bool,
    ) -> Result<NewSession, SignInError> {
        let keys = self.code_keys(current.user.id, client);
        let at = self.begin_attempt(&keys).await?;
        let key = self.totp_key(&current.user)?;
        let proof = if recovery && code.chars().any(|c| c.is_ascii_alphabetic()) {
            Some(SessionProof::RecoveryCode(secrets::recovery_code_hash(
                code,
            )))
        } else {
            key.as_deref()
                .and_then(|k| secrets::matching_step(k, code, self.now().unix_secs()))
                .map(SessionProof::TotpStep)
        };
        let new = self.session_record(
            current.user.id,
            SessionStage::Full,
            current.session.signed_in_at,
            client,
        );
        let accepted = match proof {
            Some(proof) => {
                self.store
                    .advance_session(&secrets::token_hash(cookie), &new.record, &proof)
                    .await?
            }
            None => false,
        };
        if !accepted {
            self.audit(
                self.record(&current.user, client, action, false)
                    .detail("wrong code"),
            )
            .await?;
            return Err(SignInError::BadCode);
        }
        self.attempt_succeeded(&keys, at).await?;
        Ok(new)
    }

    /// Changes the password: the current password and a fresh TOTP code. The user's other
    /// sessions end; this one gets a new id.
    pub async fn change_password(
        &self,
        current: &Current,
        cookie: &str,
        current_password: &str,
        code: &str,
        new_password: &str,
        client: &Client,
    ) -> Result<NewSession, ChangeError> {
        secrets::check_new_password(new_password, &current.user.email)
            .map_err(|e| ChangeError::Rule(e.to_string()))?;
        let mut keys = vec![(account_key(&current.user.email), self.config.account_limit)];
        keys.extend(self.address_key(client));
        let at = self.begin_attempt(&keys).await?;
        let checked = self
            .verify(current_password, current.user.password_hash.as_deref())
            .await;
        if !matches!(checked, Ok(true)) {
            if let Err(busy) = checked {
                self.forget_attempt(&keys, at)
                    .await
                    .map_err(SignInError::from)?;
                return Err(busy.into());
            }
            self.audit(
                self.record(&current.user, client, "password.change", false)
                    .detail("wrong current password"),
            )
            .await?;
            return Err(SignInError::BadPassword.into());
        }
        self.forget_attempt(&keys, at)
            .await
            .map_err(SignInError::from)?;
        // Hashed before the code renews the session: a busy pool then changes nothing.
        let hashed = self.hash(new_password).await?;
        let new = self
            .reauthenticate(current, cookie, code, client, "password.change")
            .await?;
        let mut user = self
            .store
            .user(current.user.id)
            .await
            .map_err(SignInError::from)?
            .ok_or(SignInError::SessionEnded)?;
        user.password_hash = Some(hashed);
        self.store
            .update_user(&user)
            .await
            .map_err(SignInError::from)?;
        self.store
            .delete_user_sessions(user.id, Some(new.record.id))
            .await
            .map_err(SignInError::from)?;
        self.audit(self.record(&user, client, "password.change", true))
            .await?;
        Ok(new)
    }

    /// New recovery codes (the old ones stop working), after a fresh TOTP code.
    pub async fn regenerate_recovery_codes(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Vec<String>), SignInError> {
        let new = self
            .reauthenticate(current, cookie, code, client, "recovery_codes.regenerate")
            .await?;
        let codes = secrets::new_recovery_codes(self.rng());
        let hashes: Vec<[u8; 32]> = codes
            .iter()
            .map(|c| secrets::recovery_code_hash(c))
            .collect();
        self.store
            .replace_recovery_codes(current.user.id, &hashes)
            .await?;
        self.audit(self.record(&current.user, client, "recovery_codes.regenerate", true))
            .await?;
        Ok((new, codes))
    }

    /// Starts moving the authenticator to a new device: the current password and a current
    /// code (from the app in use, or one of the recovery codes, which is consumed) make a new
    /// key, answered once to be shown and kept (sealed, in a one-time slot of the session) by
    /// the caller until [`confirm_reenrolment`](Self::confirm_reenrolment). Nothing changes
    /// yet: the old key keeps working until a code of the new one confirms it. The session
    /// gets a new id, as after every code.
    pub async fn begin_reenrolment(
        &self,
        current: &Current,
        cookie: &str,
        current_password: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Enrolment), SignInError> {
        const ACTION: &str = "two_factor.reenrol";
        if current.user.totp_confirmed_at.is_none() {
            return Err(SignInError::SessionEnded);
        }
        let mut keys = vec![(account_key(&current.user.email), self.config.account_limit)];
        keys.extend(self.address_key(client));
        let at = self.begin_attempt(&keys).await?;
        let checked = self
            .verify(current_password, current.user.password_hash.as_deref())
            .await;
        if !matches!(checked, Ok(true)) {
            if let Err(busy) = checked {
                // A busy pool checked nothing: not counted.
                self.forget_attempt(&keys, at).await?;
                return Err(busy);
            }
            // A wrong password counts towards the account's throttle, as at sign-in.
            self.audit(
                self.record(&current.user, client, ACTION, false)
                    .detail("wrong current password"),
            )
            .await?;
            return Err(SignInError::BadPassword);
        }
        self.forget_attempt(&keys, at).await?;
        let new = self
            .reauthenticate_with(current, cookie, code, client, ACTION, true)
            .await?;
        let key = secrets::new_totp_key(self.rng());
        Ok((
            new,
            Enrolment {
                key_base32: secrets::totp_key_base32(&key),
                uri: secrets::otpauth_uri(&key, &self.config.issuer, &current.user.email),
            },
        ))
    }

    /// Confirms the new key of [`begin_reenrolment`](Self::begin_reenrolment) with a code
    /// from the new device: only then does it replace the old key (which stops working at
    /// once), the code's time step counts as used, the user's other sessions end and the
    /// change is audited. A wrong code changes nothing (throttled like sign-in codes); a code
    /// of a time step already used asks for the app's next one. This session gets a new id.
    pub async fn confirm_reenrolment(
        &self,
        current: &Current,
        cookie: &str,
        key_base32: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        const ACTION: &str = "two_factor.reenrol";
        let key = secrets::totp_key_from_base32(key_base32)
            .ok_or_else(|| SignInError::from(ApiError::internal("a pending key is not base32")))?;
        let keys = self.code_keys(current.user.id, client);
        let at = self.begin_attempt(&keys).await?;
        let Some(step) = secrets::matching_step(&key, code, self.now().unix_secs()) else {
            self.audit(
                self.record(&current.user, client, ACTION, false)
                    .detail("wrong code from the new authenticator"),
            )
            .await?;
            return Err(SignInError::BadCode);
        };
        let new = self.session_record(
            current.user.id,
            SessionStage::Full,
            current.session.signed_in_at,
            client,
        );
        if !self
            .store
            .advance_session(
                &secrets::token_hash(cookie),
                &new.record,
                &SessionProof::TotpStep(step),
            )
            .await?
        {
            // The new key's code of a time step already used (the old key's code a moment
            // ago): the app's next code will do.
            return Err(SignInError::BadCode);
        }
        self.attempt_succeeded(&keys, at).await?;
        let text = secrets::totp_key_base32(&key);
        let sealing = &self.service.config().sealing;
        let stored = if sealing.is_configured() {
            sealing
                .seal(&text, &Self::key_context(current.user.id), self.rng())
                .map_err(|e| ApiError::internal(format!("sealing a TOTP key: {e}")))?
        } else {
            text
        };
        let mut user = self
            .store
            .user(current.user.id)
            .await?
            .ok_or(SignInError::SessionEnded)?;
        user.totp_secret = Some(stored.into());
        user.totp_confirmed_at = Some(self.now());
        self.store.update_user(&user).await?;
        let ended = self
            .store
            .delete_user_sessions(user.id, Some(new.record.id))
            .await?;
        self.audit(self.record(&user, client, ACTION, true).detail(&format!(
            "the new authenticator replaces the old one; {ended} other session(s) ended"
        )))
        .await?;
        Ok(new)
    }

    fn slot_context(owner: SessionId, id_hash: &[u8; 32]) -> String {
        use base64::Engine as _;
        format!(
            "slot:{owner}:{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id_hash)
        )
    }

    /// Keeps `payload` (what a page will show once) in a new one-time slot of `owner` for
    /// [`CabinetConfig::slot_ttl`], sealed at rest like TOTP keys and callback secrets (when a
    /// sealing key is configured; bound to the slot and its owner), and answers the slot's id:
    /// 32 random bytes in base64url, which only the page's URL carries (the store keeps its
    /// SHA-256). `owner` is the session the page is for: a request without a session stores
    /// nothing here (the sign-in and invitation pages carry their refusals in a cookie), so
    /// what anyone can make the cabinet store is bounded by the sessions they hold, each at
    /// most [`CabinetConfig::slots_per_session`] slots (the oldest are dropped).
    pub async fn put_slot(&self, owner: SessionId, payload: &str) -> Result<String, ApiError> {
        let id = secrets::random_token(self.rng());
        let id_hash = secrets::token_hash(&id);
        let keys = &self.service.config().sealing;
        let stored = if keys.is_configured() {
            keys.seal(payload, &Self::slot_context(owner, &id_hash), self.rng())
                .map_err(|e| ApiError::internal(format!("sealing a one-time slot: {e}")))?
        } else {
            payload.to_string()
        };
        let now = self.now();
        self.store
            .put_slot(
                &SlotRecord {
                    id_hash,
                    owner: Some(owner),
                    payload: stored.into(),
                    created_at: now,
                    expires_at: now + self.config.slot_ttl,
                },
                self.config.slots_per_session,
            )
            .await?;
        Ok(id)
    }

    /// Takes the one-time slot `id` for `owner`: its payload, once, before its expiry.
    /// `None` for a slot taken already, expired, another owner's, or an id that is none.
    pub async fn take_slot(&self, owner: SessionId, id: &str) -> Result<Option<String>, ApiError> {
        // A slot id is 43 characters of base64url.
        if id.is_empty() || id.len() > 64 {
            return Ok(None);
        }
        let id_hash = secrets::token_hash(id);
        let Some(slot) = self
            .store
            .take_slot(&id_hash, Some(owner), self.now())
            .await?
        else {
            return Ok(None);
        };
        let stored = slot.payload.expose();
        if !payments_core::sealing::SealingKeys::is_sealed(stored) {
            return Ok(Some(stored.to_string()));
        }
        self.service
            .config()
            .sealing
            .open(stored, &Self::slot_context(owner, &id_hash))
            .map(Some)
            .map_err(|e| ApiError::internal(format!("a one-time slot does not open: {e}")))
    }

    /// The user's sessions, oldest first.
    pub async fn sessions(&self, current: &Current) -> Result<Vec<SessionRecord>, ApiError> {
        Ok(self.store.user_sessions(current.user.id).await?)
    }

    /// Ends one of the user's own sessions; `false` if it is not one of theirs.
    pub async fn revoke_session(
        &self,
        current: &Current,
        id: SessionId,
        client: &Client,
    ) -> Result<bool, ApiError> {
        let own = self
            .store
            .user_sessions(current.user.id)
            .await?
            .iter()
            .any(|s| s.id == id);
        if !own {
            return Ok(false);
        }
        self.store.delete_session(id).await?;
        self.audit(
            self.record(&current.user, client, "session.revoke", true)
                .target(id.to_string()),
        )
        .await?;
        Ok(true)
    }

    /// Recovery codes the user has left.
    pub async fn recovery_codes_left(&self, current: &Current) -> Result<u32, ApiError> {
        Ok(self.store.recovery_codes_left(current.user.id).await?)
    }

    /// Deletes sessions past their timeouts, failures older than the longest throttling
    /// window, one-time slots past their expiry and audit records past [`CabinetConfig::audit_retention`] or beyond
    /// [`CabinetConfig::audit_max_records`] (in batches of [`AUDIT_PURGE_BATCH`], at most
    /// [`AUDIT_PURGE_BATCHES`] a call); the server runs it on a timer.
    pub async fn purge(&self) -> Result<Purged, ApiError> {
        let now = self.now();
        let sessions = self
            .store
            .purge_sessions(
                now.saturating_sub(self.config.idle_timeout),
                now.saturating_sub(self.config.absolute_timeout),
            )
            .await?;
        let window = self
            .config
            .account_limit
            .window
            .max(self.config.code_limit.window)
            .max(self.config.address_limit.window);
        let failures = self
            .store
            .purge_failures(now.saturating_sub(window))
            .await?;
        let before = self
            .config
            .audit_retention
            .map_or(Timestamp::from_unix_millis(i64::MIN), |keep| {
                now.saturating_sub(keep)
            });
        let mut audit = 0;
        for _ in 0..AUDIT_PURGE_BATCHES {
            let n = self
                .store
                .purge_cabinet_audit(before, self.config.audit_max_records, AUDIT_PURGE_BATCH)
                .await?;
            audit += n;
            if n < AUDIT_PURGE_BATCH as u64 {
                break;
            }
        }
        let slots = self.store.purge_slots(now, self.config.slots_max).await?;
        Ok(Purged {
            sessions,
            failures,
            audit,
            slots,
        })
    }

    // --- audit ---------------------------------------------------------------------------

    /// A cabinet audit record of `user`'s action from `client`.
    pub fn record(
        &self,
        user: &UserRecord,
        client: &Client,
        action: &str,
        success: bool,
    ) -> CabinetAuditRecord {
        CabinetAuditRecord {
            at: self.now(),
            user_id: Some(user.id),
            email: user.email.clone(),
            address: client.address_text(),
            merchant_id: user.role.merchant(),
            project_id: None,
            action: action.to_string(),
            target: String::new(),
            success,
            detail: None,
        }
    }

    /// A refused password step in the audit log. A refusal that names no account, and every
    /// throttled one, is aggregated per source and window ([`Refusals`]): the row carries
    /// the count so far, and most such refusals write none. The e-mail is kept only when it
    /// is one.
    async fn audit_attempt(
        &self,
        email: &str,
        user: Option<UserId>,
        merchant: Option<MerchantId>,
        client: &Client,
        action: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut detail = detail.to_string();
        if user.is_none() || detail == THROTTLED {
            let source = client.address.map_or_else(|| "unknown".into(), source_of);
            let key = format!("{source} {action} {detail}");
            let window = self.config.address_limit.window;
            let counted = self
                .refusals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .count(key, now, window);
            let Some(count) = counted else {
                return Ok(());
            };
            detail = format!(
                "{detail}; attempt {count} from {source} in this {}-minute window (the log \
                 keeps the 1st, 2nd, 4th, 8th ...)",
                window.as_secs() / 60
            );
        }
        self.store
            .append_cabinet_audit(&CabinetAuditRecord {
                at: now,
                user_id: user,
                email: shown_email(email),
                address: client.address_text(),
                merchant_id: merchant,
                project_id: None,
                action: action.to_string(),
                target: String::new(),
                success: false,
                detail: Some(detail),
            })
            .await
    }

    /// Appends a record to the cabinet's audit log.
    pub async fn audit(&self, record: CabinetAuditRecord) -> Result<(), ApiError> {
        Ok(self.store.append_cabinet_audit(&record).await?)
    }

    /// A change to a project made in the cabinet, in the audit log of the project's merchant.
    pub async fn audit_change(
        &self,
        current: &Current,
        client: &Client,
        change: Change<'_>,
    ) -> Result<(), ApiError> {
        let mut r = self.record(&current.user, client, change.action, true);
        r.merchant_id = Some(change.merchant);
        r.project_id = change.project;
        r.target = change.target.to_string();
        r.detail = change.detail;
        self.audit(r).await
    }

    async fn core_audit(
        &self,
        actor: &Actor,
        action: &str,
        user: &UserRecord,
        after: Option<String>,
    ) -> Result<(), ApiError> {
        Ok(self
            .service
            .store()
            .append_audit(&AuditRecord {
                at: self.now(),
                actor: actor.0.clone(),
                action: action.to_string(),
                target: user.id.to_string(),
                before: None,
                after,
            })
            .await?)
    }
}

/// A change made in the cabinet, for [`Cabinet::audit_change`].
#[derive(Debug, Clone)]
pub struct Change<'a> {
    /// The merchant whose users see the record.
    pub merchant: MerchantId,
    /// The project changed, if any.
    pub project: Option<ProjectId>,
    /// What (e.g. `token.issue`).
    pub action: &'a str,
    /// The object acted on (an id).
    pub target: &'a str,
    /// More, as short text (never a secret).
    pub detail: Option<String>,
}

/// A refused security change: a rule of the new password, or a refused step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// The new password breaks a rule.
    #[error("{0}")]
    Rule(String),
    /// The password, the code or the session was refused.
    #[error(transparent)]
    Refused(#[from] SignInError),
}

impl From<StoreError> for ChangeError {
    fn from(e: StoreError) -> Self {
        ChangeError::Refused(e.into())
    }
}

impl From<ApiError> for ChangeError {
    fn from(e: ApiError) -> Self {
        ChangeError::Refused(e.into())
    }
}

/// The audit detail of a refused step that was throttled: the result column already says
/// "refused", so the detail names the reason only.
const THROTTLED: &str = "throttled: too many attempts";

trait RecordExt {
    fn detail(self, d: &str) -> Self;
    fn target(self, t: String) -> Self;
}

impl RecordExt for CabinetAuditRecord {
    fn detail(mut self, d: &str) -> Self {
        self.detail = Some(d.to_string());
        self
    }
    fn target(mut self, t: String) -> Self {
        self.target = t;
        self
    }
}

fn invite_gone() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "this invitation link is not valid: it was used, replaced or has expired; ask for a new one",
    )
}

/// A user as JSON (the operator API's view; no hash, no key).
pub fn user_json(u: &UserRecord) -> String {
    user_value(u).to_string()
}

/// A user as a JSON value.
pub fn user_value(u: &UserRecord) -> serde_json::Value {
    serde_json::json!({
        "id": u.id,
        "email": u.email,
        "role": u.role.kind(),
        "merchant_id": u.role.merchant(),
        "password_set": u.password_hash.is_some(),
        "two_factor": u.totp_confirmed_at.is_some(),
        "disabled": u.disabled,
        "created_at": u.created_at,
    })
}
