//! A store that stops answering on demand, for the unit tests of what must survive a frozen
//! database (the heartbeat, the provider reports).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use payments_core::store::{Layered, Op, Store, StoreError, StoreLayer};

/// A store that never answers while `hung` is set: a frozen database.
pub(crate) struct Hanging {
    inner: Arc<dyn Store>,
    hung: Arc<AtomicBool>,
}

impl Hanging {
    /// `inner` behind the switch: the store, and the switch (off).
    pub(crate) fn wrap(inner: Arc<dyn Store>) -> (Arc<dyn Store>, Arc<AtomicBool>) {
        let hung = Arc::new(AtomicBool::new(false));
        let store = Arc::new(Layered::new(Hanging {
            inner,
            hung: hung.clone(),
        }));
        (store, hung)
    }
}

impl StoreLayer for Hanging {
    fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        _op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let hung = self.hung.load(Ordering::SeqCst);
        Box::pin(async move {
            if hung {
                std::future::pending::<()>().await;
            }
            call.await
        })
    }
}
