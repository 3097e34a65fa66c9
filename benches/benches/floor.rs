//! The create path's physical floor, part by part, as CPU time per create (utime + stime of
//! the whole process from /proc/self/stat, so the SQLite writer thread and the kernel's part of
//! fsync are counted): Ed25519 (`VerifyingKey::from_bytes` + `verify_strict`, and the batch
//! verifier at 64 per batch with cached keys, per signature), SHA-256 of the body
//! (`Content-Digest`), JSON (parse the create body, serialise a payment), and the
//! create-shaped SQLite write (a random-looking nonce + idempotent insert, then the change to `processing`,
//! synchronous=FULL; and the one-write shape of a provider that answers locally, the nonce and
//! the insert of the `processing` payment) through the store at 1, 4, 16 and 64 concurrent
//! callers (about that many creates per group commit). The HTTP floor (the server's CPU per `GET /healthz`) comes from
//! `benches/scripts/cpu.sh`, which measures it beside the creates; docs/performance.md adds the
//! parts up.
//!
//!     cargo bench -p payments-benches --bench floor [-- SECONDS]
//!
//! Prints one `FLOOR name us_per_op` line per part.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use payments_core::amount::DecimalFormat;
use payments_core::auth::batch::{verify_each, CachedKey, Check};
use payments_core::auth::content_digest_header;
use payments_core::callback::AddressPolicy;
use payments_core::payment::PaymentStatus;
use payments_core::request::CreatePayment;
use payments_core::store::{AdmitOutcome, NonceUse, PaymentChange, Store};
use payments_core::testing::contract::{changed, payment_id, project_id, sample_payment, T0};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

/// A create body of the usual size: what the load generator sends.
const BODY: &[u8] = br#"{"merchant_payment_id":"lg-19a2b3c4d5e6f-123456","amount":"3400.00","payment_method":"sbp"}"#;

/// Process CPU time (all threads, user + system), seconds.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name in parentheses; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    ticks / 100.0
}

/// Runs `op` (which does `per_call` operations) for `secs` seconds; CPU microseconds per
/// operation.
fn measure(secs: f64, per_call: u64, mut op: impl FnMut()) -> f64 {
    for _ in 0..10 {
        op();
    }
    let (c0, t0) = (cpu(), Instant::now());
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        op();
        n += per_call;
    }
    (cpu() - c0) * 1e6 / n as f64
}

/// A signature base of the size a create's has (about 400 bytes).
fn base(i: usize) -> Vec<u8> {
    format!(
        "\"@method\": POST\n\"@authority\": 127.0.0.1:18080\n\"@path\": /api/v1/payments\n\
         \"content-digest\": sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:\n\
         \"content-type\": application/json\n\"x-request-nonce\": nonce-{i:032}\n\
         \"@signature-params\": (\"@method\" \"@authority\" \"@path\" \"content-digest\" \
         \"content-type\" \"x-request-nonce\");created=1790000000;expires=1790000300;\
         keyid=\"k-0123456789abcdef\";alg=\"ed25519\";nonce=\"nonce-{i:032}\""
    )
    .into_bytes()
}

/// SplitMix64's finaliser: a counter to bits that look random.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A create's writes: the admission (nonce + insert), then the change to `processing`; or, for
/// a provider that answers locally (`one_write`), the admission of the `processing` payment
/// alone.
async fn create(store: &SqliteStore, n: u64, one_write: bool) {
    let p = sample_payment(payment_id(u128::from(n)), project_id(1), &format!("o-{n}"));
    let processing = changed(&p, PaymentStatus::Processing, T0);
    // Random-looking, as clients send them (a counter would put every nonce next to the last
    // one in a keyed table, and hide the cost of a random key).
    let nonce = format!("{:016x}{:016x}", mix(n), mix(!n));
    let admitted = store
        .admit_create(
            Some(NonceUse {
                project: project_id(1),
                nonce: &nonce,
                now: T0,
                expires_at: T0 + Duration::from_secs(300),
            }),
            p.project_id,
            &p.merchant_payment_id,
            Some(if one_write { &processing } else { &p }),
            None,
        )
        .await
        .expect("admit_create");
    assert_eq!(admitted, AdmitOutcome::Inserted);
    if one_write {
        return;
    }
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: processing,
            expected_version: 1,
            event: None,
            audit: None,
        })
        .await
        .expect("commit_change");
}

fn main() {
    let secs: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2.0);

    // Ed25519, one at a time, as before: decompress the key and verify_strict.
    let sk = SigningKey::from_bytes(&[7; 32]);
    let key_bytes = sk.verifying_key().to_bytes();
    let msg = base(0);
    let sig = sk.sign(&msg);
    let single = measure(secs, 1, || {
        let key = VerifyingKey::from_bytes(&key_bytes).expect("a key");
        key.verify_strict(&msg, &sig).expect("verifies");
    });
    println!("FLOOR ed25519_from_bytes_verify_strict {single:.2}");

    // The batch verifier, 64 signatures of 64 keys, keys decompressed once (cached).
    let signers: Vec<SigningKey> = (0..64u8)
        .map(|i| SigningKey::from_bytes(&[i; 32]))
        .collect();
    let keys: Vec<CachedKey> = signers
        .iter()
        .map(|s| CachedKey::from_bytes(s.verifying_key().as_bytes()).expect("a key"))
        .collect();
    let msgs: Vec<Vec<u8>> = (0..64).map(base).collect();
    let sigs: Vec<_> = signers.iter().zip(&msgs).map(|(s, m)| s.sign(m)).collect();
    let checks: Vec<Check<'_>> = (0..64)
        .map(|i| Check {
            key: &keys[i],
            message: &msgs[i],
            signature: &sigs[i],
        })
        .collect();
    let batched = measure(secs, 64, || {
        assert!(verify_each(&checks).iter().all(|v| *v));
    });
    println!("FLOOR ed25519_batch_of_64_per_signature {batched:.2}");

    let digest = measure(secs, 1, || {
        std::hint::black_box(content_digest_header(std::hint::black_box(BODY)));
    });
    println!("FLOOR sha256_content_digest_of_body {digest:.2}");

    let payment = sample_payment(payment_id(1), project_id(1), "order-1");
    let json = measure(secs, 1, || {
        let parsed = CreatePayment::parse(BODY, AddressPolicy::STRICT).expect("a valid body");
        std::hint::black_box(parsed);
        let out = serde_json::to_vec(&payment.view_with(DecimalFormat::Number)).expect("JSON");
        std::hint::black_box(out);
    });
    println!("FLOOR json_parse_and_serialise {json:.2}");

    // The create-shaped write through the store, `callers` concurrent creates.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for (callers, one_write) in [1u64, 4, 16, 64]
        .into_iter()
        .flat_map(|c| [(c, false), (c, true)])
    {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Arc::new(
            SqliteStore::open(dir.path().join("floor.db"), SqliteOptions::default()).expect("open"),
        );
        let next = Arc::new(AtomicU64::new(0));
        let per = runtime.block_on(async {
            let round = |store: Arc<SqliteStore>, next: Arc<AtomicU64>| async move {
                let first = next.fetch_add(callers, Ordering::Relaxed);
                let tasks: Vec<_> = (first..first + callers)
                    .map(|n| {
                        let store = Arc::clone(&store);
                        tokio::spawn(async move { create(&store, n, one_write).await })
                    })
                    .collect();
                for t in tasks {
                    t.await.expect("a create task");
                }
            };
            for _ in 0..5 {
                round(Arc::clone(&store), Arc::clone(&next)).await;
            }
            let (c0, t0) = (cpu(), Instant::now());
            let mut n = 0;
            while t0.elapsed().as_secs_f64() < secs {
                round(Arc::clone(&store), Arc::clone(&next)).await;
                n += callers;
            }
            (cpu() - c0) * 1e6 / n as f64
        });
        let shape = if one_write { "one_write" } else { "write" };
        println!("FLOOR sqlite_create_{shape}_{callers}_concurrent {per:.2}");
        store.close();
    }
}
