//! A decorator over the storage port that forwards every call, for wrappers that measure, log
//! or trace: [`StoreLayer`] is what a wrapper writes (its inner store, and optionally a hook
//! around each call), [`Layered`] is the [`Store`] made of it.
//!
//! A wrapper written by hand must forward the port's provided methods too, or it silently
//! loses the inner store's overrides: the create path decomposes into several round trips,
//! `is_ready` stays `true` after the store is closed and every node takes every turn.
//! [`Layered`] forwards every method of every trait of the port, required and provided, to the
//! same method of the inner store; it uses none of the port's default bodies. Its forwarding is
//! made from the port's one listing (`store/port.rs`), so a method added to the port is
//! forwarded without a line here. `contract::check_wrapper` (feature `testing`) checks any
//! wrapper, hand-written or not.
//!
//! Why a trait and not a macro that writes a wrapper's forwarding: the forwarding is made
//! once, here, next to the port; a wrapper's author writes two plain methods and no
//! macro-generated code to read or debug.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::port_types::*;

/// Whether a store operation reads or writes (for a metric's label, a log's level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Reads only.
    Read,
    /// Writes (or may write): inserts, changes, claims, purges, turns, the write probe.
    Write,
}

impl OpKind {
    /// `"read"` or `"write"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
        }
    }
}

/// A store operation, as [`StoreLayer::around`] sees it: the port method's name
/// (`"admit_create"`) and whether it reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Op {
    /// The name of the port method, as written in the trait.
    pub name: &'static str,
    /// Read or write.
    pub kind: OpKind,
}

impl Op {
    /// A reading operation.
    pub const fn read(name: &'static str) -> Op {
        Op {
            name,
            kind: OpKind::Read,
        }
    }

    /// A writing operation.
    pub const fn write(name: &'static str) -> Op {
        Op {
            name,
            kind: OpKind::Write,
        }
    }
}

/// What a store wrapper provides: its inner store and, optionally, a hook around each call.
/// [`Layered`] turns it into a [`Store`] that forwards every method of the port.
///
/// Every `async` method of the port goes through [`around`](Self::around) once, with the
/// method's [`Op`]; [`Store::is_ready`] is not a call to the database and goes to the inner
/// store directly.
///
/// # Example
///
/// A layer that counts writes:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// use futures_util::future::BoxFuture;
/// use payments_core::store::{
///     Layered, Op, OpKind, SettingStore, Store, StoreError, StoreLayer,
/// };
///
/// struct CountWrites {
///     inner: Arc<dyn Store>,
///     writes: AtomicU64,
/// }
///
/// impl StoreLayer for CountWrites {
///     fn inner(&self) -> &Arc<dyn Store> {
///         &self.inner
///     }
///
///     fn around<'a, T: Send + 'a>(
///         &'a self,
///         op: Op,
///         call: BoxFuture<'a, Result<T, StoreError>>,
///     ) -> BoxFuture<'a, Result<T, StoreError>> {
///         if op.kind == OpKind::Write {
///             self.writes.fetch_add(1, Ordering::Relaxed);
///         }
///         call
///     }
/// }
///
/// #[cfg(feature = "testing")]
/// futures_executor::block_on(async {
///     use payments_core::testing::{contract, MemoryStore};
///
///
///     let store = Layered::new(CountWrites {
///         inner: Arc::new(MemoryStore::new()),
///         writes: AtomicU64::new(0),
///     });
///     store.upsert_setting("greeting", "hello").await.unwrap();
///     assert_eq!(store.setting("greeting").await.unwrap().as_deref(), Some("hello"));
///     assert_eq!(store.layer().writes.load(Ordering::Relaxed), 1);
///
///     // The cabinet, readiness and every override of the inner store are still there.
///     contract::check_wrapper(|inner| {
///         Arc::new(Layered::new(CountWrites { inner, writes: AtomicU64::new(0) }))
///     })
///     .await;
/// });
/// ```
pub trait StoreLayer: Send + Sync {
    /// The wrapped store.
    fn inner(&self) -> &Arc<dyn Store>;

    /// Runs `call`, the inner store's answer to `op`, and returns its result: the place to
    /// time it, log it or count its errors. The default returns `call` as it is.
    ///
    /// The result must be `call`'s: a layer that changes answers or skips the call is not a
    /// pass-through wrapper and `contract::check_wrapper` fails it.
    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let _ = op;
        call
    }
}

/// The [`Store`] made of a [`StoreLayer`]: every method of every repository of the port
/// ([`PaymentStore`], [`OutboxStore`], [`MerchantStore`], [`CredentialStore`],
/// [`CallbackSecretStore`], [`OperatorStore`], [`SettingStore`], [`AuditStore`],
/// [`PayerPageStore`], [`LedgerStore`], [`RequestLogStore`]) and of
/// [`Store`], required and provided,
/// goes to the same method of the layer's inner store, through [`StoreLayer::around`]
/// (except `is_ready`, which goes straight to it). So the inner store's overrides (one-write
/// `admit_create`, one-query `auth_lookup`, `take_turn` decided in the database, its
/// `check_writable`) stay, and nothing is decomposed into the required calls.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use payments_core::store::{Layered, Store, StoreLayer};
///
/// /// Adds nothing: every call goes to `0` as it is.
/// struct Plain(Arc<dyn Store>);
///
/// impl StoreLayer for Plain {
///     fn inner(&self) -> &Arc<dyn Store> {
///         &self.0
///     }
/// }
///
/// #[cfg(feature = "testing")]
/// {
///     use payments_core::testing::MemoryStore;
///
///     let store: Arc<dyn Store> = Arc::new(Layered::new(Plain(Arc::new(MemoryStore::new()))));
///     assert!(store.is_ready());
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Layered<L> {
    layer: L,
}

impl<L: StoreLayer> Layered<L> {
    /// The store that forwards every call to `layer`'s inner store through `layer`'s hook.
    pub fn new(layer: L) -> Layered<L> {
        Layered { layer }
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The layer back.
    pub fn into_layer(self) -> L {
        self.layer
    }

    /// `call` (a call of the inner store) through the layer's hook, as `op`.
    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        self.layer.around(op, call)
    }

    fn inner(&self) -> &dyn Store {
        self.layer.inner().as_ref()
    }
}

// Every method of every trait of the port, provided ones included, from the port's listing
// (`store/port.rs`): no default body of the port runs in a `Layered`.

/// Implements a trait of the port for [`Layered`] from its listing: each `async` method goes
/// to the same method of the inner store through the layer's hook, as an [`Op`] named after
/// the method, of the kind the listing gives; each `@sync` one straight to the inner store.
macro_rules! forward_layered {
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
        #[async_trait]
        impl<L: StoreLayer> $trait for Layered<L> {
            $($(
                fn $sname(&self) -> $sret {
                    self.inner().$sname()
                }
            )*)?
            $(
                async fn $name(&self $(, $arg: $aty)*) -> Result<$ok, StoreError> {
                    let call = self.inner().$name($($arg),*);
                    self.around(Op::$kind(stringify!($name)), call).await
                }
            )*
        }
    };
}

crate::__storage_port!(all forward_layered! {});
