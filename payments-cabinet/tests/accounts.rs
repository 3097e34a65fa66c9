//! The cabinet's rules over the core's ports, on the in-memory store and a manual clock: TOTP
//! steps used once, recovery codes once, throttling windows, session timeouts, password
//! changes, and TOTP keys sealed at rest (and re-sealed after a key rotation).

use std::sync::Arc;
use std::time::Duration;

use payments_cabinet::accounts::{Cabinet, CabinetConfig, Client, Current, SignInError};
use payments_cabinet::secrets;
use payments_cabinet::store::CabinetStoreExt;
use payments_cabinet::store::{
    AuditQuery, CabinetAuditLog, CabinetSlots, Role, SessionStage, SignInFailures,
};
use payments_cabinet::testing::MemoryCabinetStore;
use payments_core::sealing::{SealingKey, SealingKeys};
use payments_core::service::Actor;
use payments_core::testing::{ManualClock, MemoryStore};
use payments_core::{Clock, Timestamp};

mod common;

const PASSWORD: &str = "correct horse battery staple";

struct World {
    store: Arc<MemoryStore>,
    accounts: Arc<MemoryCabinetStore>,
    clock: ManualClock,
    cabinet: Cabinet,
}

fn world_with(sealing: SealingKeys) -> World {
    world_configured(sealing, CabinetConfig::default())
}

fn world_configured(sealing: SealingKeys, config: CabinetConfig) -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::from_unix_secs(1_790_856_000));
    let service = common::service(store.clone(), &clock, sealing, 7);
    let accounts = Arc::new(MemoryCabinetStore::new());
    let cabinet = Cabinet::new(service, accounts.clone(), config);
    World {
        store,
        accounts,
        clock,
        cabinet,
    }
}

fn world() -> World {
    world_with(SealingKeys::new(SealingKey::from_bytes([9; 32]), vec![]))
}

fn client() -> Client {
    Client {
        address: Some("203.0.113.9".parse().expect("an address")),
        user_agent: Some("test".into()),
    }
}

impl World {
    async fn support_user(&self, email: &str) {
        let invite = self
            .cabinet
            .users()
            .create(email, Role::Support, &Actor("t".into()))
            .await
            .expect("a user");
        self.cabinet
            .users()
            .set_password(invite.token.expose(), PASSWORD, &client())
            .await
            .expect("a password");
    }

    async fn current(&self, cookie: &str) -> Current {
        self.cabinet
            .sessions()
            .current(cookie)
            .await
            .expect("store")
            .expect("a live session")
    }

    fn code(&self, key: &[u8]) -> String {
        secrets::totp_code(key, secrets::totp_step(self.clock.now().unix_secs()))
    }

    /// Password, enrolment; the full session's cookie and the key.
    async fn enrolled(&self, email: &str) -> (String, Vec<u8>, Vec<String>) {
        common::enrolled(&self.cabinet, &self.clock, email, PASSWORD, &client()).await
    }

    async fn half(&self, email: &str) -> (String, Current) {
        let (half, _) = self
            .cabinet
            .sign_in()
            .password(email, PASSWORD, &client(), None)
            .await
            .expect("the password");
        let cookie = half.cookie.expose().to_string();
        let current = self.current(&cookie).await;
        (cookie, current)
    }
}

#[tokio::test]
async fn a_totp_step_signs_in_once_and_the_key_is_sealed_at_rest() {
    let w = world();
    w.support_user("a@support.example").await;
    let (_, key, _) = w.enrolled("a@support.example").await;
    let stored = w
        .cabinet
        .store()
        .user_by_email("a@support.example")
        .await
        .expect("store")
        .expect("the user");
    let sealed = stored.totp_secret.expect("a key").expose().to_string();
    assert!(SealingKeys::is_sealed(&sealed), "{sealed}");
    assert!(!sealed.contains(&secrets::totp_key_base32(&key)));

    // The enrolment used this step: the same code cannot sign in again.
    let (cookie, current) = w.half("a@support.example").await;
    let refused = w
        .cabinet
        .sign_in()
        .code(&current, &cookie, &w.code(&key), &client())
        .await;
    assert_eq!(refused.unwrap_err(), SignInError::BadCode);
    // A code of the previous step is older than the last one used: refused too.
    let previous = secrets::totp_code(&key, secrets::totp_step(w.clock.now().unix_secs()) - 1);
    let refused = w
        .cabinet
        .sign_in()
        .code(&current, &cookie, &previous, &client())
        .await;
    assert_eq!(refused.unwrap_err(), SignInError::BadCode);
    w.clock.advance(Duration::from_secs(30));
    let full = w
        .cabinet
        .sign_in()
        .code(&current, &cookie, &w.code(&key), &client())
        .await
        .expect("the next step's code");
    assert_eq!(full.record.stage, SessionStage::Full);
    assert_ne!(full.cookie.expose(), &cookie, "a new id");
    assert!(w
        .cabinet
        .sessions()
        .current(&cookie)
        .await
        .expect("store")
        .is_none());
}

#[tokio::test]
async fn five_failures_throttle_for_fifteen_minutes_from_the_oldest_counted() {
    let w = world();
    w.support_user("a@support.example").await;
    for _ in 0..5 {
        let e = w
            .cabinet
            .sign_in()
            .password("a@support.example", "wrong password!", &client(), None)
            .await
            .unwrap_err();
        assert_eq!(e, SignInError::BadPassword);
        w.clock.advance(Duration::from_secs(60));
    }
    let first_failure = w.clock.now() - Duration::from_secs(5 * 60);
    match w
        .cabinet
        .sign_in()
        .password("a@support.example", PASSWORD, &client(), None)
        .await
    {
        Err(SignInError::Throttled { until }) => {
            assert_eq!(until, first_failure + Duration::from_secs(15 * 60))
        }
        other => panic!("{other:?}"),
    }
    // When the oldest failure leaves the window, four remain: one more attempt is checked.
    w.clock.set(first_failure + Duration::from_secs(15 * 60));
    assert!(w
        .cabinet
        .sign_in()
        .password("a@support.example", PASSWORD, &client(), None)
        .await
        .is_ok());
    // Success cleared the account's failures.
    let e = w
        .cabinet
        .sign_in()
        .password("a@support.example", "wrong password!", &client(), None)
        .await
        .unwrap_err();
    assert_eq!(e, SignInError::BadPassword);
}

#[tokio::test]
async fn twenty_failures_from_one_address_throttle_every_account() {
    let w = world();
    w.support_user("a@support.example").await;
    for n in 0..20 {
        let _ = w
            .cabinet
            .sign_in()
            .password(
                &format!("guess{n}@x.example"),
                "wrong password!",
                &client(),
                None,
            )
            .await;
    }
    let e = w
        .cabinet
        .sign_in()
        .password("a@support.example", PASSWORD, &client(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, SignInError::Throttled { .. }), "{e:?}");
    let elsewhere = Client {
        address: Some("198.51.100.1".parse().expect("an address")),
        user_agent: None,
    };
    assert!(w
        .cabinet
        .sign_in()
        .password("a@support.example", PASSWORD, &elsewhere, None)
        .await
        .is_ok());
}

/// 2 wrong passwords, then 30 wrong and the right one at once: at most the 3 the limit has
/// left are checked, whatever the order; the others are throttled unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_guesses_check_at_most_the_limit() {
    let w = Arc::new(world());
    w.support_user("a@support.example").await;
    for _ in 0..2 {
        let e = w
            .cabinet
            .sign_in()
            .password("a@support.example", "wrong password!", &client(), None)
            .await
            .unwrap_err();
        assert_eq!(e, SignInError::BadPassword);
    }
    let burst = (0..31).map(|n| {
        let w = w.clone();
        tokio::spawn(async move {
            let password = if n == 15 { PASSWORD } else { "wrong password!" };
            w.cabinet
                .sign_in()
                .password("a@support.example", password, &client(), None)
                .await
                .map(|_| ())
        })
    });
    let answers: Vec<_> = futures_util::future::join_all(burst)
        .await
        .into_iter()
        .map(|r| r.expect("no panic"))
        .collect();
    let checked = answers
        .iter()
        .filter(|a| !matches!(a, Err(SignInError::Throttled { .. })))
        .count();
    assert!(
        checked <= 3,
        "{checked} of 31 checked, the limit left 3: {answers:?}"
    );
    // What was refused unchecked is not a failure: the account holds 5 at most.
    let failures = w
        .accounts
        .find_failures(
            "account:a@support.example",
            Timestamp::from_unix_secs(0),
            100,
        )
        .await
        .expect("store");
    assert!(failures.len() <= 5, "{} failures kept", failures.len());
}

/// Password checks beyond [`CabinetConfig::password_checks`] wait at most
/// `password_wait`, then are refused as busy, unchecked and uncounted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn password_checks_beyond_the_pool_are_refused_busy_and_not_counted() {
    let config = CabinetConfig {
        password_checks: 1,
        password_wait: Duration::from_millis(1),
        address_limit: payments_cabinet::accounts::Limit {
            attempts: 100,
            window: Duration::from_secs(900),
        },
        ..CabinetConfig::default()
    };
    let w = Arc::new(world_configured(
        SealingKeys::new(SealingKey::from_bytes([9; 32]), vec![]),
        config,
    ));
    let burst = (0..8).map(|n| {
        let w = w.clone();
        tokio::spawn(async move {
            w.cabinet
                .sign_in()
                .password(
                    &format!("nobody{n}@x.example"),
                    "wrong password!",
                    &client(),
                    None,
                )
                .await
                .map(|_| ())
        })
    });
    let answers: Vec<_> = futures_util::future::join_all(burst)
        .await
        .into_iter()
        .map(|r| r.expect("no panic"))
        .collect();
    let busy = answers
        .iter()
        .filter(|a| matches!(a, Err(SignInError::Busy)))
        .count();
    let checked = answers
        .iter()
        .filter(|a| matches!(a, Err(SignInError::BadPassword)))
        .count();
    assert!(busy >= 1 && checked >= 1, "{answers:?}");
    assert_eq!(busy + checked, 8, "{answers:?}");
    let counted = w
        .accounts
        .find_failures("address:203.0.113.9", Timestamp::from_unix_secs(0), 100)
        .await
        .expect("store");
    assert_eq!(counted.len(), checked, "only checked attempts are failures");
}

/// An IPv6 client is throttled by its /64: changing the last 64 bits gains nothing.
#[tokio::test]
async fn an_ipv6_source_is_throttled_by_its_slash_64() {
    let w = world();
    w.support_user("a@support.example").await;
    let from = |a: &str| Client {
        address: Some(a.parse().expect("an address")),
        user_agent: None,
    };
    for n in 0..20 {
        let _ = w
            .cabinet
            .sign_in()
            .password(
                &format!("guess{n}@x.example"),
                "wrong password!",
                &from(&format!("2001:db8:1:2::{n:x}")),
                None,
            )
            .await;
    }
    let e = w
        .cabinet
        .sign_in()
        .password(
            "a@support.example",
            PASSWORD,
            &from("2001:db8:1:2:ffff::1"),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SignInError::Throttled { .. }), "{e:?}");
    assert!(w
        .cabinet
        .sign_in()
        .password(
            "a@support.example",
            PASSWORD,
            &from("2001:db8:1:3::1"),
            None
        )
        .await
        .is_ok());
    assert_eq!(
        payments_cabinet::accounts::source_of("::ffff:192.0.2.1".parse().expect("mapped")),
        "192.0.2.1"
    );
}

#[tokio::test]
async fn sessions_end_at_their_timeouts_and_are_purged() {
    let w = world();
    w.support_user("a@support.example").await;
    let (cookie, current) = w.half("a@support.example").await;
    assert_eq!(current.session.stage, SessionStage::Password);
    w.clock.advance(Duration::from_secs(10 * 60));
    assert!(
        w.cabinet
            .sessions()
            .current(&cookie)
            .await
            .expect("store")
            .is_none(),
        "ten minutes for the second factor"
    );
    w.clock.advance(Duration::from_secs(60));
    let (cookie, key, _) = w.enrolled("a@support.example").await;
    w.clock.advance(Duration::from_secs(30 * 60 - 1));
    assert!(w
        .cabinet
        .sessions()
        .current(&cookie)
        .await
        .expect("store")
        .is_some());
    w.clock.advance(Duration::from_secs(30 * 60));
    assert!(w
        .cabinet
        .sessions()
        .current(&cookie)
        .await
        .expect("store")
        .is_none());
    let _ = key;
    assert_eq!(
        w.cabinet.purge().await.expect("purge").sessions,
        0,
        "already deleted"
    );
    let (cookie, _) = w.half("a@support.example").await;
    w.clock.advance(Duration::from_secs(13 * 3600));
    assert_eq!(w.cabinet.purge().await.expect("purge").sessions, 1);
    assert!(w
        .cabinet
        .sessions()
        .current(&cookie)
        .await
        .expect("store")
        .is_none());
}

#[tokio::test]
async fn a_password_change_needs_the_current_password_and_a_fresh_code() {
    let w = world();
    w.support_user("a@support.example").await;
    let (cookie, key, _) = w.enrolled("a@support.example").await;
    let (other, _, _) = {
        w.clock.advance(Duration::from_secs(30));
        let (half, current) = w.half("a@support.example").await;
        let full = w
            .cabinet
            .sign_in()
            .code(&current, &half, &w.code(&key), &client())
            .await
            .expect("a second session");
        (full.cookie.expose().to_string(), (), ())
    };
    let current = w.current(&cookie).await;
    w.clock.advance(Duration::from_secs(30));
    let wrong = w
        .cabinet
        .sign_in()
        .change_password(
            &current,
            &cookie,
            "not it at all",
            &w.code(&key),
            "a brand new password",
            &client(),
        )
        .await;
    assert!(wrong.is_err());
    let short = w
        .cabinet
        .sign_in()
        .change_password(
            &current,
            &cookie,
            PASSWORD,
            &w.code(&key),
            "short",
            &client(),
        )
        .await;
    assert!(short.is_err());
    let new = w
        .cabinet
        .sign_in()
        .change_password(
            &current,
            &cookie,
            PASSWORD,
            &w.code(&key),
            "a brand new password",
            &client(),
        )
        .await
        .expect("changed");
    assert!(
        w.cabinet
            .sessions()
            .current(&other)
            .await
            .expect("store")
            .is_none(),
        "other sessions end"
    );
    assert!(w
        .cabinet
        .sessions()
        .current(new.cookie.expose())
        .await
        .expect("store")
        .is_some());
    assert!(w
        .cabinet
        .sign_in()
        .password("a@support.example", "a brand new password", &client(), None)
        .await
        .is_ok());
}

#[tokio::test]
async fn totp_keys_are_resealed_under_a_new_key() {
    let old = SealingKey::from_bytes([1; 32]);
    let w = world_with(SealingKeys::new(old, vec![]));
    w.support_user("a@support.example").await;
    let (_, key, _) = w.enrolled("a@support.example").await;
    // The same store under a new key, the old one kept for opening.
    let sealing = SealingKeys::new(
        SealingKey::from_bytes([2; 32]),
        vec![SealingKey::from_bytes([1; 32])],
    );
    let service = common::service(w.store.clone(), &w.clock, sealing, 8);
    let rotated = Cabinet::new(service, w.accounts.clone(), CabinetConfig::default());
    assert_eq!(
        rotated
            .two_factor()
            .reseal_totp_keys()
            .await
            .expect("resealed"),
        (1, 0)
    );
    assert_eq!(
        rotated
            .two_factor()
            .reseal_totp_keys()
            .await
            .expect("resealed"),
        (0, 1)
    );
    // Under the new key alone, the user still signs in with the same key.
    let sealing = SealingKeys::new(SealingKey::from_bytes([2; 32]), vec![]);
    let service = common::service(w.store.clone(), &w.clock, sealing, 9);
    let only_new = Cabinet::new(service, w.accounts.clone(), CabinetConfig::default());
    w.clock.advance(Duration::from_secs(30));
    let (half, _) = only_new
        .sign_in()
        .password("a@support.example", PASSWORD, &client(), None)
        .await
        .expect("the password");
    let current = only_new
        .sessions()
        .current(half.cookie.expose())
        .await
        .expect("store")
        .expect("live");
    let code = secrets::totp_code(&key, secrets::totp_step(w.clock.now().unix_secs()));
    only_new
        .sign_in()
        .code(&current, half.cookie.expose(), &code, &client())
        .await
        .expect("the key opens under the new sealing key");
}

/// 400 junk sign-ins from one address (unknown e-mails, then throttled) add a handful of audit
/// rows, each with its count, not 400; what was typed into the e-mail field is kept only when
/// it is an e-mail address.
#[tokio::test]
async fn junk_sign_ins_add_a_bounded_number_of_audit_rows() {
    let w = world();
    for n in 0..400 {
        let typed = if n % 2 == 0 {
            format!("guess{n}@x.example")
        } else {
            "my secret password 123".to_string()
        };
        let _ = w
            .cabinet
            .sign_in()
            .password(&typed, "wrong password!", &client(), None)
            .await;
    }
    let rows = w
        .accounts
        .find_cabinet_audit(&AuditQuery {
            limit: 10_000,
            ..AuditQuery::default()
        })
        .await
        .expect("the audit log")
        .records;
    // 20 refused (the address's limit): rows at 1, 2, 4, 8, 16; 380 throttled: 1 ... 256.
    assert_eq!(rows.len(), 5 + 9, "{rows:#?}");
    assert!(rows.iter().any(|r| r
        .detail
        .as_deref()
        .is_some_and(|d| d.starts_with("throttled: too many attempts; attempt 256 from "))));
    assert!(
        rows.iter().all(|r| !r.email.contains("secret")),
        "a password typed as an e-mail is not kept: {rows:#?}"
    );
    // A 60 KiB "e-mail" is counted under its digest, not stored as a key of its own size.
    let long = "x".repeat(60_000);
    let elsewhere = Client {
        address: Some("198.51.100.7".parse().expect("an address")),
        user_agent: None,
    };
    let e = w
        .cabinet
        .sign_in()
        .password(&long, "wrong password!", &elsewhere, None)
        .await
        .unwrap_err();
    assert_eq!(e, SignInError::BadPassword);
    let under_raw_key = w
        .accounts
        .find_failures(&format!("account:{long}"), Timestamp::from_unix_secs(0), 10)
        .await
        .expect("store");
    assert!(
        under_raw_key.is_empty(),
        "a failure keyed by 60 KiB of input"
    );
    let by_address = w
        .accounts
        .find_failures("address:198.51.100.7", Timestamp::from_unix_secs(0), 10)
        .await
        .expect("store");
    assert_eq!(by_address.len(), 1, "the attempt was counted");
}

/// The audit log's retention: records older than `audit_retention` go, and at most
/// `audit_max_records` stay whatever the age, the newest kept; the purge deletes nothing
/// else.
#[tokio::test]
async fn the_audit_log_is_bounded_by_age_and_by_size() {
    let w = world_configured(
        SealingKeys::new(SealingKey::from_bytes([9; 32]), vec![]),
        CabinetConfig {
            audit_retention: Some(Duration::from_secs(86_400)),
            audit_max_records: Some(5),
            ..CabinetConfig::default()
        },
    );
    let all = || async {
        w.accounts
            .find_cabinet_audit(&AuditQuery {
                limit: 1000,
                ..AuditQuery::default()
            })
            .await
            .expect("the audit log")
            .records
    };
    w.support_user("old@support.example").await;
    w.clock.advance(Duration::from_secs(2 * 86_400));
    w.support_user("new@support.example").await;
    let before = all().await;
    assert_eq!(before.len(), 4, "two users created, two passwords set");
    assert_eq!(w.cabinet.purge().await.expect("purge").audit, 2);
    assert!(all().await.iter().all(|r| r.email == "new@support.example"));
    // Twelve refused sign-ins from twelve addresses: twelve rows, five kept.
    for n in 0..12u8 {
        let from = Client {
            address: Some(std::net::IpAddr::from([198, 51, 100, n])),
            user_agent: None,
        };
        let _ = w
            .cabinet
            .sign_in()
            .password("new@support.example", "wrong password!", &from, None)
            .await;
    }
    assert!(all().await.len() > 5);
    let kept_before: Vec<_> = all().await.into_iter().take(5).collect();
    assert!(w.cabinet.purge().await.expect("purge").audit > 0);
    assert_eq!(all().await, kept_before, "the newest five stay");
    assert_eq!(w.cabinet.purge().await.expect("purge").audit, 0);
}

/// A one-time slot is sealed at rest under the sealing key (bound to its id and owner), taken
/// once by its owner's session before its five minutes are up, and purged once expired.
#[tokio::test]
async fn one_time_slots_are_sealed_taken_once_by_their_session_and_purged() {
    let w = world();
    w.support_user("a@support.example").await;
    w.support_user("b@support.example").await;
    let (cookie, _, _) = w.enrolled("a@support.example").await;
    let mine = w.current(&cookie).await.session.id;
    let (other, _, _) = w.enrolled("b@support.example").await;
    let theirs = w.current(&other).await.session.id;
    let payload = r#"{"value":"nl_test_secret-token"}"#;

    // At rest: a sealed string, the value nowhere in it.
    let peeked = w
        .cabinet
        .slots()
        .insert(mine, payload)
        .await
        .expect("a slot");
    let stored = w
        .accounts
        .take_slot(&secrets::token_hash(&peeked), Some(mine), w.clock.now())
        .await
        .expect("store")
        .expect("the slot");
    assert!(stored.payload.expose().starts_with("v1."), "sealed");
    assert!(!stored.payload.expose().contains("secret-token"));
    assert_eq!(stored.expires_at, w.clock.now() + Duration::from_secs(300));

    // Taken once, by its own session only.
    let id = w
        .cabinet
        .slots()
        .insert(mine, payload)
        .await
        .expect("a slot");
    assert_eq!(
        w.cabinet.slots().take(theirs, &id).await.expect("take"),
        None
    );
    assert_eq!(
        w.cabinet.slots().take(mine, &id).await.expect("take"),
        Some(payload.to_string())
    );
    assert_eq!(
        w.cabinet.slots().take(mine, &id).await.expect("take"),
        None,
        "once"
    );
    assert_eq!(
        w.cabinet
            .slots()
            .take(mine, "not a slot")
            .await
            .expect("take"),
        None
    );

    // Five minutes, then gone; the purge deletes what was never read.
    let late = w
        .cabinet
        .slots()
        .insert(mine, payload)
        .await
        .expect("a slot");
    let other = w
        .cabinet
        .slots()
        .insert(theirs, "{}")
        .await
        .expect("a slot");
    w.clock.advance(Duration::from_secs(300));
    assert_eq!(
        w.cabinet.slots().take(mine, &late).await.expect("take"),
        None
    );
    assert_eq!(w.cabinet.purge().await.expect("purge").slots, 2);
    w.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        w.cabinet.slots().take(theirs, &other).await.expect("take"),
        None
    );
    assert_eq!(w.cabinet.purge().await.expect("purge").slots, 0);
}

/// A refused password step reads as a sentence in the audit log: the result column says
/// "refused" and the detail says why, never "refused" again ("refused refused").
#[tokio::test]
async fn a_refused_sign_in_is_audited_with_its_reason_not_refused_twice() {
    let w = world();
    w.support_user("a@support.example").await;
    let _ = w
        .cabinet
        .sign_in()
        .password("a@support.example", "not the password", &client(), None)
        .await;
    let _ = w
        .cabinet
        .sign_in()
        .password(
            "nobody@support.example",
            "not the password",
            &client(),
            None,
        )
        .await;
    let rows = w
        .accounts
        .find_cabinet_audit(&AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("the audit log")
        .records;
    let refused: Vec<&str> = rows
        .iter()
        .filter(|r| r.action == "sign_in.password" && !r.success)
        .filter_map(|r| r.detail.as_deref())
        .collect();
    assert_eq!(refused.len(), 2, "{rows:#?}");
    assert!(refused.contains(&"wrong password"), "{refused:?}");
    assert!(
        refused
            .iter()
            .any(|d| d.starts_with("no account with this e-mail; attempt 1 from ")),
        "{refused:?}"
    );
    assert!(
        refused.iter().all(|d| !d.contains("refused")),
        "the detail does not repeat the result: {refused:?}"
    );
}

/// Moving the authenticator to a new device: a wrong password is refused (and counted), a
/// recovery code may stand for the lost phone's code (and is used up), a wrong code of the
/// new key changes nothing, its right code replaces the old key and ends the other sessions.
#[tokio::test]
async fn the_authenticator_moves_to_a_new_key_only_on_its_first_code() {
    let w = world();
    w.support_user("a@support.example").await;
    let (cookie, old, codes) = w.enrolled("a@support.example").await;
    w.clock.advance(Duration::from_secs(30));
    let (half, current_half) = w.half("a@support.example").await;
    let other = w
        .cabinet
        .sign_in()
        .code(&current_half, &half, &w.code(&old), &client())
        .await
        .expect("a second session");
    let current = w.current(&cookie).await;
    let wrong = w
        .cabinet
        .two_factor()
        .begin_reenrolment(&current, &cookie, "not it", &codes[0], &client())
        .await;
    assert_eq!(wrong.err(), Some(SignInError::BadPassword));
    let (session, enrolment) = w
        .cabinet
        .two_factor()
        .begin_reenrolment(&current, &cookie, PASSWORD, &codes[0], &client())
        .await
        .expect("a recovery code stands for the lost phone");
    let current = w.current(session.cookie.expose()).await;
    assert_eq!(
        w.cabinet
            .two_factor()
            .recovery_codes_left(&current)
            .await
            .expect("store"),
        9,
        "the recovery code is used up"
    );
    let new = secrets::totp_key_from_base32(&enrolment.key_base32).expect("base32");
    let cookie = session.cookie.expose().to_string();
    let refused = w
        .cabinet
        .two_factor()
        .confirm_reenrolment(
            &current,
            &cookie,
            &enrolment.key_base32,
            &w.code(&old),
            &client(),
        )
        .await;
    assert_eq!(
        refused.err(),
        Some(SignInError::BadCode),
        "the old key's code"
    );
    assert!(w
        .cabinet
        .sessions()
        .current(other.cookie.expose())
        .await
        .expect("store")
        .is_some());
    w.clock.advance(Duration::from_secs(30));
    let done = w
        .cabinet
        .two_factor()
        .confirm_reenrolment(
            &current,
            &cookie,
            &enrolment.key_base32,
            &w.code(&new),
            &client(),
        )
        .await
        .expect("the new key's code");
    assert!(w
        .cabinet
        .sessions()
        .current(done.cookie.expose())
        .await
        .expect("store")
        .is_some());
    assert!(
        w.cabinet
            .sessions()
            .current(other.cookie.expose())
            .await
            .expect("store")
            .is_none(),
        "the other session ended"
    );
    w.clock.advance(Duration::from_secs(30));
    let (half, current_half) = w.half("a@support.example").await;
    assert!(
        w.cabinet
            .sign_in()
            .code(&current_half, &half, &w.code(&old), &client())
            .await
            .is_err(),
        "the old key no longer signs in"
    );
    let (half, current_half) = w.half("a@support.example").await;
    w.cabinet
        .sign_in()
        .code(&current_half, &half, &w.code(&new), &client())
        .await
        .expect("the new key signs in");
}
