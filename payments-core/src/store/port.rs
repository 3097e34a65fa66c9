//! The storage port, declared once: every trait of the port and every method of it, with its
//! documentation, whether it reads or writes, and the default body of a provided method, are
//! written in [`__storage_port!`](crate::__storage_port) and nowhere else. What is made of a
//! method comes from this one listing, so a method added here cannot be forgotten in any of
//! them:
//!
//! - the traits themselves (`declare_port!`, invoked in `store.rs`);
//! - the forwarding decorator [`Layered`](super::Layered) (`store/layer.rs`), which forwards
//!   every method, provided ones included, through [`StoreLayer::around`](super::StoreLayer::around)
//!   with the method's name and kind;
//! - the probe of `contract::check_wrapper` (feature `testing`), which records each call;
//! - [`delegate_port!`](crate::delegate_port), the forwarding of a store type's ports to
//!   another implementation of them (how the SQL stores reach their shared implementation).
//!
//! The grammar of the listing, one trait per arm:
//!
//! ```text
//! /// docs
//! pub trait Name: Supertrait + Supertrait {
//!     /// docs
//!     read fn method(&self, arg: Type, ...) -> Result<Answer, StoreError>;
//!     /// docs
//!     write fn provided(&self, ...) -> Result<Answer, StoreError> { default body }
//!     @sync {
//!         /// docs
//!         fn not_a_call(&self) -> bool { default body }
//!     }
//! }
//! ```
//!
//! `read` or `write` is the method's [`OpKind`](super::OpKind); `@sync` methods are not calls of
//! the database (the forwarding sends them straight to the inner store). A generator is a
//! `macro_rules!` that takes `{ its own arguments }` and then one such trait; the listing is
//! replayed to it per trait (`__storage_port!(PaymentStore my_generator! { ... })`) or for
//! every trait (`__storage_port!(all my_generator! { ... })`). The types in the signatures are
//! written unqualified: a generator outside `store.rs` brings them into scope, for instance with
//! `use payments_core::store::port_types::*`.

/// The listing of the storage port (see the module `store::port`): replays the declaration of
/// one trait (`__storage_port!(PaymentStore callback! { args })`) or of every trait in order
/// (`__storage_port!(all callback! { args })`) to `callback`.
#[doc(hidden)]
#[macro_export]
macro_rules! __storage_port {
    (PaymentStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// Payments.
            pub trait PaymentStore: Send + Sync {
                /// A payment by id.
                read fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError>;
                /// A payment by its project and merchant payment id.
                read fn payment_by_merchant_id(
                    &self,
                    project: ProjectId,
                    merchant_payment_id: &MerchantPaymentId,
                ) -> Result<Option<Payment>, StoreError>;
                /// Payments whose [`Payment::due_at`] is at or before `now`, earliest first, through an
                /// index (cost follows the number due, not the number stored).
                read fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError>;
                /// A page of a project's payments (see [`PaymentQuery`]), newest first by
                /// `(created_at, id)`.
                read fn find_payments(&self, query: &PaymentQuery) -> Result<Vec<Payment>, StoreError>;
                /// The totals of the payments `query` finds (every filter of
                /// [`find_payments`](Self::find_payments), its `before` too): the newest `query.limit`
                /// of them at most, by the day of their creation in a time zone `offset_ms` east of
                /// UTC, their status and currency ([`PaymentTotals`], `complete` when the filter found
                /// fewer than `limit`). The default reads the payments and sums them; the bundled SQL
                /// stores sum them in one statement, reading no payment's row out of the database.
                read fn payment_totals(
                    &self,
                    query: &PaymentQuery,
                    offset_ms: i64,
                ) -> Result<PaymentTotals, StoreError> {
                    let found = self.find_payments(query).await?;
                    Ok(PaymentTotals::of(&found, offset_ms, found.len() < query.limit))
                }
            }
        }
    };

    (OutboxStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The callback outbox.
            ///
            /// Claims are safe across processes: two concurrent claims (from two handles on one database,
            /// or two nodes) never receive the same event while its lease runs, and every claim carries a
            /// new [`LeaseToken`] that fences the attempt's record.
            pub trait OutboxStore: Send + Sync {
                /// Claims up to `limit` pending events due at `now`, earliest first (equal times in queueing
                /// order), and leases them: their `next_attempt_at` moves to `now + lease`, so another
                /// dispatcher (or a restart after a crash mid-attempt) picks them up only after the lease
                /// ends, and each gets a new lease token, larger than any it had.
                write fn claim_due_events(
                    &self,
                    now: Timestamp,
                    limit: usize,
                    lease: Duration,
                ) -> Result<Vec<ClaimedEvent>, StoreError>;
                /// [`claim_due_events`](Self::claim_due_events) leaving the events of the projects in
                /// `skip` unclaimed (neither returned nor leased): a dispatcher that already holds as many
                /// of a project's events as it keeps asks for everyone else's, so that the project's
                /// backlog stays due in the store instead of hiding the events due behind it. The default
                /// ignores `skip`; the bundled stores implement it (a dispatcher over a store that does not
                /// leaves the events it cannot keep to their lease).
                write fn claim_due_events_except(
                    &self,
                    now: Timestamp,
                    limit: usize,
                    lease: Duration,
                    skip: &[ProjectId],
                ) -> Result<Vec<ClaimedEvent>, StoreError> {
                    let _ = skip;
                    self.claim_due_events(now, limit, lease).await
                }
                /// Records an attempt made under the lease `lease` and, when that lease is still the
                /// event's current one, the event's next step, in one transaction:
                /// `next_attempt_at = Some(t)` keeps it pending, `None` ends it as delivered (on success)
                /// or failed. With an older lease only the attempt row is added
                /// ([`AttemptRecorded::Stale`]). An unknown event is [`StoreError::NotFound`].
                write fn record_attempt(
                    &self,
                    event_id: EventId,
                    lease: LeaseToken,
                    attempt: &DeliveryAttempt,
                    next_attempt_at: Option<Timestamp>,
                ) -> Result<AttemptRecorded, StoreError>;
                /// Every event of a payment with its attempts, oldest first.
                read fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError>;
                /// Failed events that no resend has answered yet ([`Store::commit_resend`]) and that
                /// match `filter`, in queueing order, at most `limit`, each with its last attempt.
                read fn failed_events(
                    &self,
                    filter: &FailedEventFilter,
                    limit: usize,
                ) -> Result<Vec<FailedEvent>, StoreError>;
                /// A page of a project's callback events with their attempts (see [`EventQuery`]),
                /// newest first by `(created_at, event_id)`.
                read fn find_events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError>;
                @sync {
                    /// The relay that tells this process of the events other processes commit to
                    /// the store and them of this one's ([`OutboxRelay`]); `None` (the default)
                    /// where one process has the store, whose own wakers see every event.
                    fn outbox_relay(&self) -> Option<Arc<dyn OutboxRelay>> {
                        None
                    }
                }
            }
        }
    };

    (MerchantStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// Merchants and their projects.
            pub trait MerchantStore: Send + Sync {
                /// Inserts or replaces a merchant.
                write fn upsert_merchant(&self, merchant: &Merchant) -> Result<(), StoreError>;

                /// The merchant with id `only` (none or one), or every merchant by id when `only` is
                /// `None`.
                read fn find_merchants(&self, only: Option<MerchantId>) -> Result<Vec<Merchant>, StoreError>;

                /// Inserts or replaces a project.
                write fn upsert_project(&self, project: &Project) -> Result<(), StoreError>;

                /// The project with id `only` (none or one), or every project by id when `only` is `None`.
                read fn find_projects(&self, only: Option<ProjectId>) -> Result<Vec<Project>, StoreError>;
            }
        }
    };

    (CredentialStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// A project's credentials: API tokens (with when each was last used) and signature keys, and
            /// the lookup that authenticates a request (made of the merchant and project it names).
            pub trait CredentialStore: MerchantStore {
                /// Stores an issued token.
                write fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError>;

                /// The tokens `key` names, revoked or not: the one with the SHA-256 of a presented token
                /// (none or one), or a project's (in issue order).
                read fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError>;

                /// Revokes a token; `false` if there is no such token of that project.
                write fn revoke_token(
                    &self,
                    project: ProjectId,
                    id: TokenId,
                    at: Timestamp,
                ) -> Result<bool, StoreError>;

                /// Records that `token` authenticated a request at `at` (the latest time is kept).
                write fn update_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError>;

                /// When each of `tokens` was last used, for those used at all.
                read fn token_last_used(
                    &self,
                    tokens: &[TokenId],
                ) -> Result<Vec<(TokenId, Timestamp)>, StoreError>;

                /// Registers a key; [`StoreError::Duplicate`] if the project already has that key id.
                write fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError>;

                /// A project's key with id `only` (none or one), or all its keys when `only` is `None`;
                /// revoked or not.
                read fn find_keys(
                    &self,
                    project: ProjectId,
                    only: Option<&KeyId>,
                ) -> Result<Vec<KeyRecord>, StoreError>;

                /// The projects on which a key with this id is registered and not revoked, in any order
                /// (registration refuses a key active on another project, so normally at most one). The
                /// default asks [`MerchantStore::find_projects`], then [`Self::find_keys`] of each: one read per project, for a
                /// rare operator action; a store that can should answer it in one query.
                read fn find_active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
                    let mut found = Vec::new();
                    for project in self.projects().await? {
                        if let Some(key) = self.key(project.id, keyid).await? {
                            if key.revoked_at.is_none() {
                                found.push(project.id);
                            }
                        }
                    }
                    Ok(found)
                }

                /// Everything authentication reads, in one round trip where the store can: the token with
                /// this hash (revoked or not), its project, the project's merchant and, when `keyid` is
                /// given, the project's key with that id (revoked or not). The answer is the stored state
                /// at the time of the call, so a revocation counts for the next request: a store may keep
                /// earlier answers only if it can tell, at each call, that nothing they hold has changed
                /// since, whoever changed it (the SQLite store checks a version that triggers move with
                /// every change, in the lookup's snapshot). The default asks [`Self::find_tokens`],
                /// [`MerchantStore::find_projects`], [`MerchantStore::find_merchants`] and [`Self::find_keys`] in turn.
                read fn auth_lookup(
                    &self,
                    hash: &[u8; 32],
                    keyid: Option<&KeyId>,
                ) -> Result<AuthLookup, StoreError> {
                    let Some(token) = self.token_by_hash(hash).await? else {
                        return Ok(AuthLookup::default());
                    };
                    let project = self.project(token.project_id).await?;
                    let merchant = match &project {
                        Some(p) => self.merchant(p.merchant_id).await?,
                        None => None,
                    };
                    let key = match keyid {
                        Some(k) => self.key(token.project_id, k).await?,
                        None => None,
                    };
                    Ok(AuthLookup {
                        token: Some(token),
                        project,
                        merchant,
                        key,
                    })
                }

                /// Revokes a key; `false` if there is no such key of that project.
                write fn revoke_key(
                    &self,
                    project: ProjectId,
                    keyid: &KeyId,
                    at: Timestamp,
                ) -> Result<bool, StoreError>;
            }
        }
    };

    (CallbackSecretStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// A project's callback secrets (at most two: the current one and the previous one while it
            /// still signs).
            pub trait CallbackSecretStore: Send + Sync {
                /// A project's callback secrets, newest first (at most two).
                read fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError>;

                /// Adds a secret and keeps only the two newest, atomically.
                write fn insert_callback_secret(
                    &self,
                    project: ProjectId,
                    secret: &SecretRecord,
                ) -> Result<(), StoreError>;

                /// Adds `secret` only if the project has none; returns the project's secrets after.
                write fn insert_callback_secret_if_none(
                    &self,
                    project: ProjectId,
                    secret: &SecretRecord,
                ) -> Result<Vec<SecretRecord>, StoreError>;

                /// Replaces the stored value of the project's secret whose stored value is `old` with
                /// `new`, keeping its time and flags (a re-seal under another key); `false` if the
                /// project has no secret stored as `old` (it was rotated away meanwhile).
                write fn replace_callback_secret(
                    &self,
                    project: ProjectId,
                    old: &SecretString,
                    new: &SecretString,
                ) -> Result<bool, StoreError>;
            }
        }
    };

    (OperatorStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The operator's named tokens.
            pub trait OperatorStore: Send + Sync {
                /// Stores an issued operator token; [`StoreError::Duplicate`] if its id or hash exists.
                write fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError>;

                /// The operator token with this SHA-256 of the presented token (none or one), or every
                /// operator token in issue order when `hash` is `None`; expired ones included.
                read fn find_operator_tokens(
                    &self,
                    hash: Option<&[u8; 32]>,
                ) -> Result<Vec<OperatorTokenRecord>, StoreError>;

                /// Ends an operator token's validity at `at` (now for a revocation, later for a rotation's
                /// overlap), unless it already ends earlier; `false` if there is no such token.
                write fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError>;
            }
        }
    };

    (SettingStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The service's settings: text under a name ([`crate::settings`] types them).
            pub trait SettingStore: Send + Sync {
                /// A named setting (e.g. the operator token hash).
                read fn setting(&self, name: &str) -> Result<Option<String>, StoreError>;

                /// Sets a named setting.
                write fn upsert_setting(&self, name: &str, value: &str) -> Result<(), StoreError>;

                /// Sets a named setting unless it is set: `true` when this call set it. Of
                /// several nodes inserting at once, exactly one gets `true`.
                write fn insert_setting(&self, name: &str, value: &str) -> Result<bool, StoreError>;

                /// Removes a named setting, so that it reads as never set (a typed setting as
                /// its default again); `false` if it was not set.
                write fn delete_setting(&self, name: &str) -> Result<bool, StoreError>;

                /// Every setting whose name starts with `prefix`, with its value, in bytewise
                /// order of the names (a [`crate::settings::SettingFamily`] lists its members
                /// with it).
                read fn settings_with_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError>;
            }
        }
    };

    (AuditStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The audit trail, and each payment's status history.
            pub trait AuditStore: Send + Sync {
                /// Appends a record.
                write fn insert_audit(&self, record: &AuditRecord) -> Result<(), StoreError>;
                /// The newest `limit` records, newest first.
                read fn find_audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError>;
                /// The recorded changes of `payment`'s status or amount
                /// ([`PaymentChange::history`]), oldest first; at most one per version, and
                /// empty for an unknown payment. [`crate::history::history`] makes the history
                /// the API shows of them.
                read fn status_changes(&self, payment: PaymentId) -> Result<Vec<StatusChange>, StoreError>;
            }
        }
    };

    (PayerPageStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The links of the hosted payer page ([`crate::payer`]): one per payment, found by the hash
            /// of its token.
            pub trait PayerPageStore: Send + Sync {
                /// The payer page link of `page.payment_id`: stores `page` if the payment has none, and
                /// answers the payment's stored link either way (a payment's link never changes; of
                /// concurrent calls for one payment exactly one stores its record, every call answers
                /// that one). [`StoreError::Duplicate`] if another payment's link has the same token hash.
                write fn insert_payment_page_if_none(
                    &self,
                    page: &PaymentPageRecord,
                ) -> Result<PaymentPageRecord, StoreError>;
                /// The payer page link that `key` names, if there is one (a token hash is found through
                /// an index).
                read fn find_payment_page(
                    &self,
                    key: PageKey<'_>,
                ) -> Result<Option<PaymentPageRecord>, StoreError>;
            }
        }
    };

    (LedgerStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The project balances ([`crate::ledger`]): each project's append-only ledger of entries
            /// and the balance kept beside it. Entries are appended in the transactions that cause them
            /// ([`PaymentChange::ledger`], [`Transaction::insert_posting`]); this trait reads them.
            pub trait LedgerStore: Send + Sync {
                /// A project's balance (one row); [`Balance::empty`] for a project without entries.
                read fn balance(&self, project: ProjectId) -> Result<Balance, StoreError>;
                /// A page of a project's entries (see [`EntryQuery`]), through the index on
                /// `(project, created_at, seq)`.
                read fn find_entries(&self, query: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError>;
                /// The count and sum of each kind of a project's entries recorded in `[from, to)`, kinds
                /// without entries left out: a statement's lines, summed by the database.
                read fn entry_totals(
                    &self,
                    project: ProjectId,
                    from: Timestamp,
                    to: Timestamp,
                ) -> Result<Vec<(EntryKind, KindTotal)>, StoreError>;
            }
        }
    };

    (RequestLogStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// The merchant API's request log ([`crate::request_log`]): each project's recent requests,
            /// written in batches off the requests' path, read newest first, kept under a
            /// [`RequestLogPolicy`](crate::request_log::RequestLogPolicy).
            pub trait RequestLogStore: Send + Sync {
                /// Appends `entries` (their `id` is ignored: the store numbers them in the order given,
                /// after every stored one) in one transaction, then deletes, for each project among them,
                /// its requests beyond the newest `keep` by `(at, id)`: a project's log never holds more
                /// than `keep` once a write returned, but for the rest of the oldest write it still
                /// holds where a store keeps each write's requests of a project together (the SQL
                /// stores: they keep the newest `keep` of a write and delete a write once `keep` newer
                /// requests are held).
                write fn insert_requests(
                    &self,
                    entries: &[RequestLogEntry],
                    keep: usize,
                ) -> Result<(), StoreError>;
                /// A page of a project's requests (see [`RequestLogQuery`]), newest first by `(at, id)`.
                read fn find_requests(
                    &self,
                    query: &RequestLogQuery,
                ) -> Result<Vec<RequestLogEntry>, StoreError>;
                /// Retention by age: deletes requests (of any project) that arrived before `before`,
                /// oldest first, in one transaction: at most `limit` of them, or, where a store keeps
                /// each write's requests of a project together, at most `limit` writes, each once the
                /// newest of its requests arrived before `before` ([`Purged::deleted`] counts requests).
                write fn purge_requests(&self, before: Timestamp, limit: usize) -> Result<Purged, StoreError>;
            }
        }
    };

    (AppealStore $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// Payment appeals ([`crate::appeal`]) and their receipts, sealed at rest by the stores
            /// that seal requisites. An appeal changes through [`Store::commit_appeal`].
            pub trait AppealStore: Send + Sync {
                /// An appeal by id.
                read fn appeal(&self, id: AppealId) -> Result<Option<Appeal>, StoreError>;
                /// A page of appeals (see [`AppealQuery`] and [`AppealQuery::matches`]), in the query's
                /// order by `(created_at, id)`.
                read fn find_appeals(&self, query: &AppealQuery) -> Result<Vec<Appeal>, StoreError>;
                /// The receipt number `index` (from 0, in the order sent) of an appeal.
                read fn appeal_receipt(&self, appeal: AppealId, index: u8) -> Result<Option<Receipt>, StoreError>;
                /// Stores `appeal` (state `open`, version 1) with its `receipts`, atomically, unless its
                /// project has an appeal under the same idempotency key ([`AppealInsert::Existing`]), its
                /// payment has an active appeal ([`AppealInsert::Active`]; of concurrent inserts for one
                /// payment at most one is stored) or [`MAX_APPEALS_PER_SOURCE`](crate::appeal::MAX_APPEALS_PER_SOURCE) appeals from its source
                /// ([`AppealInsert::Full`]); then nothing is written.
                write fn insert_appeal(
                    &self,
                    appeal: &Appeal,
                    receipts: &[Receipt],
                ) -> Result<AppealInsert, StoreError>;
            }
        }
    };

    (Store $($cb:ident)::+ ! $args:tt) => {
        $($cb)::+! {
            $args
            /// Everything the service needs from storage.
            ///
            /// The service holds an `Arc<dyn Store>` and relies on the store for uniqueness
            /// (`(project, merchant_payment_id)`, nonces), for writing a payment change together with its
            /// outbox event and audit record in one transaction, and for optimistic concurrency
            /// ([`StoreError::Conflict`] when the stored version is not the expected one).
            ///
            /// # Implementing a store
            ///
            /// The documented semantics of every method are checked by the store contract suite,
            /// `payments_core::testing::contract` (feature `testing`). An adapter runs it from its own
            /// tests against a fresh store per check: `contract::run_all(|| MyStore::new())`, or, when
            /// making a store awaits (connecting, migrating), `contract::run_all_async(|| async { ... })`.
            /// `payments_core::testing::MemoryStore` is the reference implementation and
            /// `payments-store-sqlite` passes the same suite (`payments-store-sqlite/tests/contract.rs`).
            ///
            /// # Wrapping a store
            ///
            /// A wrapper (metrics, logs) that forwards only the required methods loses the wrapped store's
            /// overrides of the provided ones, its readiness and its cabinet, without an error. Implement
            /// [`StoreLayer`] instead and use [`Layered`], which forwards every method; check a wrapper
            /// with `contract::check_wrapper`.
            ///
            /// # Example
            ///
            /// Code over the port works with any store; with the `testing` feature it runs here against
            /// the in-memory store, which then runs the contract suite.
            ///
            /// ```
            /// use payments_core::payment::Payment;
            /// use payments_core::store::{InsertOutcome, Store, StoreError};
            ///
            /// /// The payment stored under `payment`'s merchant payment id: `payment` itself when the id
            /// /// was free, else the payment that took it first.
            /// async fn insert_or_existing(store: &dyn Store, payment: &Payment) -> Result<Payment, StoreError> {
            ///     Ok(match store.insert_payment(payment).await? {
            ///         InsertOutcome::Inserted => payment.clone(),
            ///         InsertOutcome::Existing(first) => first,
            ///     })
            /// }
            ///
            /// #[cfg(feature = "testing")]
            /// futures_executor::block_on(async {
            ///     use std::time::Duration;
            ///
            ///     use payments_core::payment::{Flow, PaymentMethod};
            ///     use payments_core::testing::{contract, fixtures, MemoryStore};
            ///     use payments_core::Timestamp;
            ///
            ///     let store = MemoryStore::new();
            ///     let at = Timestamp::from_unix_secs(1_790_856_000);
            ///     let payment = |n: u128, amount: &str| {
            ///         fixtures::payment(
            ///             contract::payment_id(n),
            ///             contract::project_id(1),
            ///             &fixtures::request("order-1001", amount, PaymentMethod::Sbp),
            ///             Flow::RuntimeLive,
            ///             at,
            ///             Duration::from_secs(15 * 60),
            ///         )
            ///     };
            ///     let first = insert_or_existing(&store, &payment(1, "3400")).await.unwrap();
            ///     // Another payment with the same merchant payment id gets the first one back.
            ///     let again = insert_or_existing(&store, &payment(2, "3400")).await.unwrap();
            ///     assert_eq!(again, first);
            ///
            ///     // Every adapter passes the same suite.
            ///     contract::run_all(MemoryStore::new).await
            /// });
            /// ```
            pub trait Store:
                PaymentStore
                + OutboxStore
                + MerchantStore
                + CredentialStore
                + CallbackSecretStore
                + OperatorStore
                + SettingStore
                + AuditStore
                + PayerPageStore
                + LedgerStore
                + RequestLogStore
                + AppealStore
            {
                /// Whether the store can write now (for `/readyz`): a real, tiny write, so that a full
                /// disk, a read-only database or a lock held elsewhere shows. The default writes the
                /// setting [`WRITE_PROBE_SETTING`].
                write fn check_writable(&self) -> Result<(), StoreError> {
                    self.upsert_setting(WRITE_PROBE_SETTING, "ok").await
                }

                /// A manual resend that answers failed events, in one transaction: if the payment of
                /// `change` has failed events that no resend has answered yet, commits `change` (its
                /// event is the resend: a new event of kind manual resend) as
                /// [`Store::commit_change`] does, marks those failed events as answered by it and
                /// returns their ids; otherwise writes nothing and returns an empty list (another
                /// operator resent them meanwhile). So a failed event is resent by at most one bulk
                /// resend, however many run at once. Written once over [`Store::transact`]
                /// ([`generic::commit_resend`]).
                write fn commit_resend(&self, change: &PaymentChange) -> Result<Vec<EventId>, StoreError> {
                    generic::commit_resend(self, change).await
                }

                /// Commits an appeal's change ([`AppealChange`]) in one transaction: the appeal at
                /// `change.expected_version` (another stored version is [`StoreError::Conflict`] and
                /// writes nothing), then each payment change in order, as [`Store::commit_change`],
                /// then the audit record. Written once over [`Store::transact`]
                /// ([`generic::commit_appeal`]).
                write fn commit_appeal(&self, change: &AppealChange) -> Result<(), StoreError> {
                    generic::commit_appeal(self, change).await
                }

                /// Runs `work` in one transaction: its [`Transaction`] steps see each other, and they are
                /// committed together when it answers `Ok`, or none of them when it answers `Err` (or the
                /// store fails). The compound writes of the port are written once over it ([`transact`] is
                /// the typed way to call it).
                write fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError>;

                /// Stores a new payment unless (project, merchant_payment_id) is taken, atomically.
                /// Written once over [`Store::transact`] ([`generic::insert_payment`]); a store may
                /// override it for speed (the contract compares the two).
                write fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
                    generic::insert_payment(self, payment).await
                }

                /// Commits a change (payment version + event + audit) in one transaction; a stored version
                /// other than `change.expected_version` is [`StoreError::Conflict`] and writes nothing. The
                /// fields fixed at creation (project, merchant payment id, flow, initial amount, currency,
                /// geo code, method, intrabank flag, bank code, callback URL, creation time, fingerprint)
                /// never change; a store may refuse a change that alters them as
                /// [`StoreError::Conflict`]. Written once over [`Store::transact`]
                /// ([`generic::commit_change`]); a store may override it for speed.
                write fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
                    generic::commit_change(self, change).await
                }

                /// Records `nonce` for `project` until `expires_at`; `false` if it is already recorded and
                /// not expired (a replay), and nothing is written. Exactly one of many concurrent calls with
                /// one nonce gets `true`. Written once over [`Store::transact`] ([`generic::use_nonce`]); a
                /// store may override it for speed.
                write fn use_nonce(
                    &self,
                    project: ProjectId,
                    nonce: &str,
                    now: Timestamp,
                    expires_at: Timestamp,
                ) -> Result<bool, StoreError> {
                    let nonce = NonceUse {
                        project,
                        nonce,
                        now,
                        expires_at,
                    };
                    generic::use_nonce(self, nonce).await
                }

                /// What waits in the store ([`Backlog`]), read together: one snapshot where the store can.
                read fn backlog(&self) -> Result<Backlog, StoreError>;

                /// Retention: deletes at most `limit` records of `what` whose retention ended before
                /// `before` (see [`Retained`] for each), oldest first, in one transaction (a store that
                /// keeps one kind in several tables may take `limit` from each). Callers repeat it in
                /// small batches ([`purge_all`]), so that a large purge never holds the writer for long; a
                /// batch on one node skips what a batch on another holds.
                write fn purge(
                    &self,
                    what: Retained,
                    before: Timestamp,
                    limit: usize,
                ) -> Result<Purged, StoreError>;

                /// Takes the turn of a periodic background `task` (`"sweep"`, `"nonce-purge"`) until
                /// `until`, for every process sharing the store: `true` for the one caller whose turn it
                /// now is, `false` while another caller's turn has not ended at `now`. A turn is never
                /// released early, so a node that stops mid-turn only delays the task to `until`.
                ///
                /// The default, for a store that one process uses (SQLite, memory), always answers `true`:
                /// there is nobody to take turns with. A store shared by several nodes (PostgreSQL)
                /// decides it in the database.
                write fn take_turn(
                    &self,
                    task: &str,
                    now: Timestamp,
                    until: Timestamp,
                ) -> Result<bool, StoreError> {
                    let _ = (task, now, until);
                    Ok(true)
                }

                /// [`CredentialStore::auth_lookup`] and the payment `id` in one round trip (for an
                /// authenticated read of a payment; one snapshot where the store can). The default makes the
                /// two calls.
                read fn auth_lookup_with_payment(
                    &self,
                    hash: &[u8; 32],
                    keyid: Option<&KeyId>,
                    id: PaymentId,
                ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
                    let found = self.auth_lookup(hash, keyid).await?;
                    let payment = match found.token {
                        Some(_) => self.payment(id).await?,
                        None => None,
                    };
                    Ok((found, payment))
                }

                /// [`Store::commit_change`] at most once per `key`: a [`NonceUse`] whose project is a
                /// scope of the caller's choice and whose expiry is how long the key is remembered (a key
                /// recorded with an expiry at or before `key.now` is free, as for
                /// [`Store::use_nonce`]).
                ///
                /// With a `change`, in one write: if `key` is free, records it and commits the change
                /// (`Ok(true)`); if it is recorded and live, writes nothing (`Ok(false)`). An error, a
                /// [`StoreError::Conflict`] included, writes neither the key nor the change, so the caller
                /// can re-read and try again. Without a change, only tells whether `key` is free and
                /// records nothing.
                ///
                /// The service uses it for the upstream's notification ids: a notification is applied
                /// together with the record of its id, or not at all. Written once over
                /// [`Store::transact`] ([`generic::commit_change_once`]).
                write fn commit_change_once(
                    &self,
                    key: NonceUse<'_>,
                    change: Option<&PaymentChange>,
                ) -> Result<bool, StoreError> {
                    generic::commit_change_once(self, key, change).await
                }

                /// The write of a create request, in its order: record the request's `nonce` (a replay
                /// writes nothing and answers [`AdmitOutcome::Replayed`]); then, if `(project,
                /// merchant_payment_id)` is taken, [`AdmitOutcome::Existing`]; else store `candidate`
                /// ([`AdmitOutcome::Inserted`]) or, without one (the request broke a business rule),
                /// [`AdmitOutcome::Free`]. `candidate` carries `project` and `merchant_payment_id`;
                /// `issued`, the entry of its status history when the candidate is stored with its
                /// requisites already issued (the create's one write), is stored with it. A store
                /// error leaves nothing of it written.
                ///
                /// Written once over [`Store::transact`] ([`generic::admit_create`]): one transaction (the
                /// SQLite store: one group-commit job). A store may override it for speed (the PostgreSQL
                /// store: one statement); the contract suite compares the override with the generic path.
                write fn admit_create(
                    &self,
                    nonce: Option<NonceUse<'_>>,
                    project: ProjectId,
                    merchant_payment_id: &MerchantPaymentId,
                    candidate: Option<&Payment>,
                    issued: Option<&StatusChange>,
                ) -> Result<AdmitOutcome, StoreError> {
                    generic::admit_create(self, nonce, project, merchant_payment_id, candidate, issued)
                        .await
                }

                @sync {
                    /// A cheap check that the store answers (for `/readyz`).
                    fn is_ready(&self) -> bool {
                        true
                    }
                }
            }
        }
    };
    (all $($cb:ident)::+ ! $args:tt) => {
        $crate::__storage_port!(PaymentStore $($cb)::+ ! $args);
        $crate::__storage_port!(OutboxStore $($cb)::+ ! $args);
        $crate::__storage_port!(MerchantStore $($cb)::+ ! $args);
        $crate::__storage_port!(CredentialStore $($cb)::+ ! $args);
        $crate::__storage_port!(CallbackSecretStore $($cb)::+ ! $args);
        $crate::__storage_port!(OperatorStore $($cb)::+ ! $args);
        $crate::__storage_port!(SettingStore $($cb)::+ ! $args);
        $crate::__storage_port!(AuditStore $($cb)::+ ! $args);
        $crate::__storage_port!(PayerPageStore $($cb)::+ ! $args);
        $crate::__storage_port!(LedgerStore $($cb)::+ ! $args);
        $crate::__storage_port!(RequestLogStore $($cb)::+ ! $args);
        $crate::__storage_port!(AppealStore $($cb)::+ ! $args);
        $crate::__storage_port!(Store $($cb)::+ ! $args);
    };
}

/// Declares a trait of the port from its listing: the trait with its documentation, its
/// methods `async` (through `async_trait`) with their default bodies.
macro_rules! declare_port {
    (
        {}
        $(#[$tattr:meta])*
        pub trait $trait:ident : $sup:ident $(+ $more:ident)* {
            $(
                $(#[$mattr:meta])*
                $kind:ident fn $name:ident (
                    &$s:ident $(, $arg:ident : $aty:ty)* $(,)?
                ) -> Result<$ok:ty, StoreError> $end:tt
            )*
            $(@sync {
                $(
                    $(#[$sattr:meta])*
                    fn $sname:ident (&$ss:ident) -> $sret:ty $sbody:block
                )*
            })?
        }
    ) => {
        $(#[$tattr])*
        #[async_trait]
        pub trait $trait: $sup $(+ $more)* {
            $($(
                $(#[$sattr])*
                fn $sname(&$ss) -> $sret $sbody
            )*)?
            $(
                $(#[$mattr])*
                async fn $name(&$s $(, $arg: $aty)*) -> Result<$ok, StoreError> $end
            )*
        }
    };
}

pub(crate) use declare_port;

/// Implements traits of the storage port for a store type by handing every method, provided
/// ones included, to the same method of what `$store`'s method `$via()` returns (which
/// implements those traits): `delegate_port!(SqliteStore => sql; SettingStore, AuditStore);`.
/// Made from the port's listing, so a method added to one of the traits is delegated without
/// a line in the store's crate. The SQL stores reach their shared implementation
/// (`payments_store_sql::port`) this way.
#[macro_export]
macro_rules! delegate_port {
    ($store:ty => $via:ident; $($trait:ident),+ $(,)?) => {
        $(
            $crate::__storage_port!($trait $crate::__delegate_port_trait! { [$store] $via });
        )+
    };
}

/// One trait of [`delegate_port!`](crate::delegate_port), from its listing.
#[doc(hidden)]
#[macro_export]
macro_rules! __delegate_port_trait {
    (
        { [$store:ty] $via:ident }
        $(#[$tattr:meta])*
        pub trait $trait:ident : $sup:ident $(+ $more:ident)* {
            $(
                $(#[$mattr:meta])*
                $kind:ident fn $name:ident (
                    &$s:ident $(, $arg:ident : $aty:ty)* $(,)?
                ) -> Result<$ok:ty, StoreError> $end:tt
            )*
            $(@sync {
                $(
                    $(#[$sattr:meta])*
                    fn $sname:ident (&$ss:ident) -> $sret:ty $sbody:block
                )*
            })?
        }
    ) => {
        const _: () = {
            use $crate::store::port_types::*;

            #[async_trait]
            impl $trait for $store {
                $($(
                    fn $sname(&self) -> $sret {
                        self.$via().$sname()
                    }
                )*)?
                $(
                    async fn $name(&self $(, $arg: $aty)*) -> Result<$ok, StoreError> {
                        self.$via().$name($($arg),*).await
                    }
                )*
            }
        };
    };
}
