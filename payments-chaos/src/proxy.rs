//! A fault proxy: a TCP forwarder on 127.0.0.1:0 in front of PostgreSQL or the upstream, one per
//! node, that can cut the node off (every open connection dropped, new ones closed at once)
//! and let it through again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A running proxy.
#[derive(Clone, Debug)]
pub struct Proxy {
    /// Where it listens.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    /// A proxy to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = Proxy {
            addr: listener.local_addr()?,
            cut: Arc::default(),
            open: Arc::default(),
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if p.cut.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let mut inbound = inbound;
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                let mut open = p.open.lock().expect("proxy lock");
                open.retain(|h| !h.is_finished());
                open.push(task.abort_handle());
            }
        });
        Ok(proxy)
    }

    /// Cuts: drops every open connection and refuses new ones until [`Proxy::heal`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for h in self.open.lock().expect("proxy lock").drain(..) {
            h.abort();
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}
