//! Checks of merchants, projects, credentials, settings and the audit trail.

use super::*;
use crate::store::CredentialStoreExt;
use crate::store::MerchantStoreExt;
use crate::SecretString;

/// Merchants and projects round-trip every field, are replaced by a second put and listed in
/// id order; a project of an unknown merchant is `NotFound`.
pub async fn merchants_and_projects<S: Store>(store: &S) {
    let m2 = sample_merchant(2, "Second");
    let mut m1 = sample_merchant(1, "First");
    store.upsert_merchant(&m2).await.expect("upsert_merchant");
    store.upsert_merchant(&m1).await.expect("upsert_merchant");
    assert_eq!(
        store.merchant(m1.id).await.expect("merchant"),
        Some(m1.clone())
    );
    m1.paused = true;
    m1.name = "First, renamed".to_string();
    m1.callback_url = Some(url("https://first.example/hook"));
    store.upsert_merchant(&m1).await.expect("upsert_merchant");
    assert_eq!(
        store.merchants().await.expect("merchants"),
        vec![m1.clone(), m2.clone()]
    );
    assert_eq!(
        store.merchant(merchant_id(9)).await.expect("merchant"),
        None
    );

    let orphan = sample_project(1, merchant_id(9));
    assert!(
        matches!(
            store.upsert_project(&orphan).await,
            Err(StoreError::NotFound(_))
        ),
        "a project needs its merchant"
    );
    assert_eq!(store.project(orphan.id).await.expect("project"), None);

    let mut full = sample_project(2, m1.id);
    full.active = false;
    full.test_mode = true;
    full.lifetime = Duration::new(3_600, 123_000_000);
    full.contract = Contract {
        currencies: vec![Currency::RUB, Currency::parse("KZT").expect("valid")],
        methods: vec![
            MethodTerms {
                method: PaymentMethod::CardTransfer,
                min_amount: Some(dec("100.50")),
                max_amount: Some(dec("300000")),
                fee_percent: FeePercent::new(dec("3.75")).expect("valid"),
            },
            MethodTerms {
                method: PaymentMethod::Sbp,
                min_amount: None,
                max_amount: Some(dec("0.000001")),
                fee_percent: FeePercent::new(dec("0")).expect("valid"),
            },
        ],
    };
    full.callback_url = Some(url("https://shop.example/payments/callback"));
    full.ip_allow_list = vec!["203.0.113.7".to_string(), "2001:db8::/32".to_string()];
    full.signature_required = true;
    full.paused = true;
    full.rate_limit = RateLimit {
        per_second: 7,
        burst: 9,
    };
    full.created_at = T0 + ms(77);
    let bare = sample_project(1, m2.id);
    store.upsert_project(&full).await.expect("upsert_project");
    store.upsert_project(&bare).await.expect("upsert_project");
    let stored = store.project(full.id).await.expect("project");
    assert_eq!(stored.as_ref(), Some(&full));
    let terms = &stored.expect("stored").contract.methods[0];
    assert_eq!(
        terms.min_amount.map(|d| d.to_string()),
        Some("100.50".into())
    );
    assert_eq!(
        store.projects().await.expect("projects"),
        vec![bare.clone(), full.clone()]
    );

    let mut renamed = full.clone();
    renamed.name = "renamed".to_string();
    renamed.contract.methods.truncate(1);
    renamed.ip_allow_list.clear();
    renamed.callback_url = None;
    store
        .upsert_project(&renamed)
        .await
        .expect("upsert_project");
    assert_eq!(
        store.project(full.id).await.expect("project"),
        Some(renamed)
    );
    assert_eq!(store.projects().await.expect("projects").len(), 2);
}

/// Tokens are found by hash (revoked or not), listed per project, unique by hash and id;
/// revocation keeps the first revocation time and is scoped to the project.
pub async fn tokens<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let t1 = token(1, a, vec![Scope::PaymentsCreate, Scope::PaymentsRead]);
    let t2 = token(2, a, vec![Scope::PaymentsTest]);
    let t3 = token(3, b, Vec::new());
    for t in [&t1, &t2, &t3] {
        store.insert_token(t).await.expect("insert_token");
    }
    assert_eq!(
        store.token_by_hash(&t2.hash).await.expect("token"),
        Some(t2.clone())
    );
    assert_eq!(store.token_by_hash(&[7; 32]).await.expect("token"), None);
    assert_eq!(
        store.tokens(a).await.expect("tokens"),
        vec![t1.clone(), t2.clone()]
    );
    assert_eq!(store.tokens(b).await.expect("tokens"), vec![t3.clone()]);

    let same_hash = TokenRecord {
        id: token_id(9),
        ..t1.clone()
    };
    assert!(matches!(
        store.insert_token(&same_hash).await,
        Err(StoreError::Duplicate(_))
    ));
    let same_id = TokenRecord {
        hash: [9; 32],
        ..t1.clone()
    };
    assert!(matches!(
        store.insert_token(&same_id).await,
        Err(StoreError::Duplicate(_))
    ));

    assert!(!store
        .revoke_token(b, t1.id, T0)
        .await
        .expect("revoke_token"));
    assert!(!store
        .revoke_token(a, token_id(9), T0)
        .await
        .expect("revoke_token"));
    let at = T0 + ms(5_000);
    assert!(store
        .revoke_token(a, t1.id, at)
        .await
        .expect("revoke_token"));
    assert!(store
        .revoke_token(a, t1.id, at + ms(1))
        .await
        .expect("revoke_token"));
    let revoked = store
        .token_by_hash(&t1.hash)
        .await
        .expect("token")
        .expect("revoked tokens are still found");
    assert_eq!(
        revoked.revoked_at,
        Some(at),
        "the first revocation time stays"
    );
    assert_eq!(
        store.tokens(a).await.expect("tokens"),
        vec![revoked, t2.clone()]
    );
}

/// A token's name and expiry are kept as given (a token without them reads back without), by
/// every read: by hash, the project's list and `auth_lookup`, the second time too (a store
/// that keeps lookups keeps the expiry with them). From its expiry on, the record the
/// authentication reads is refused by the core's rule ([`TokenRecord::usable_at`]), a moment
/// before it is not.
pub async fn token_names_and_expiry<S: Store>(store: &S) {
    let m = sample_merchant(1, "First");
    let p = sample_project(1, m.id);
    store.upsert_merchant(&m).await.expect("upsert_merchant");
    store.upsert_project(&p).await.expect("upsert_project");
    let expires = T0 + ms(30 * 86_400_000);
    let named = TokenRecord {
        name: Some("shop backend, ünïcode".into()),
        expires_at: Some(expires),
        ..token(1, p.id, vec![Scope::PaymentsRead])
    };
    let bare = TokenRecord {
        name: None,
        expires_at: None,
        ..token(2, p.id, vec![Scope::PaymentsRead])
    };
    for t in [&named, &bare] {
        store.insert_token(t).await.expect("insert_token");
        assert_eq!(
            store.token_by_hash(&t.hash).await.expect("token").as_ref(),
            Some(t)
        );
    }
    assert_eq!(
        store.tokens(p.id).await.expect("tokens"),
        vec![named.clone(), bare.clone()]
    );
    for _ in 0..2 {
        let found = store
            .auth_lookup(&named.hash, None)
            .await
            .expect("auth_lookup")
            .token
            .expect("the token");
        assert_eq!(found.expires_at, Some(expires));
        assert!(found.usable_at(expires - ms(1)), "a moment before expiry");
        assert!(!found.usable_at(expires), "refused from its expiry on");
        let (found, _) = store
            .auth_lookup_with_payment(&named.hash, None, payment_id(1))
            .await
            .expect("auth_lookup_with_payment");
        assert!(!found.token.expect("the token").usable_at(expires + ms(1)));
        let never = store
            .auth_lookup(&bare.hash, None)
            .await
            .expect("auth_lookup")
            .token
            .expect("the token");
        assert!(never.usable_at(T0 + ms(100 * 365 * 86_400_000)));
    }
}

/// `auth_lookup` finds a token's project, merchant and the named key of that project (revoked
/// records too: the caller decides); an unknown token finds nothing. `auth_lookup_with_payment`
/// adds the payment by id, whatever its project (the caller checks the owner).
pub async fn auth_lookups<S: Store>(store: &S) {
    let m = sample_merchant(1, "First");
    let (p, other) = (sample_project(1, m.id), sample_project(2, m.id));
    store.upsert_merchant(&m).await.expect("upsert_merchant");
    store.upsert_project(&p).await.expect("upsert_project");
    store.upsert_project(&other).await.expect("upsert_project");
    let t = token(1, p.id, vec![Scope::PaymentsRead]);
    store.insert_token(&t).await.expect("insert_token");
    let k = key(p.id, "ed25519-k1", 1);
    store.insert_key(&k).await.expect("insert_key");
    store
        .insert_key(&key(other.id, "ed25519-k2", 2))
        .await
        .expect("insert_key");
    let pay = sample_payment(payment_id(1), other.id, "order-1");
    store.insert_payment(&pay).await.expect("insert_payment");

    let keyid = KeyId::new;
    let found = store
        .auth_lookup(&t.hash, Some(&keyid("ed25519-k1")))
        .await
        .expect("auth_lookup");
    assert_eq!(found.token, Some(t.clone()));
    assert_eq!(found.project, Some(p.clone()));
    assert_eq!(found.merchant, Some(m.clone()));
    assert_eq!(found.key, Some(k));
    let other_key = store
        .auth_lookup(&t.hash, Some(&keyid("ed25519-k2")))
        .await
        .expect("auth_lookup");
    assert_eq!(other_key.key, None, "only the token's project's keys");
    assert_eq!(
        store
            .auth_lookup(&[7; 32], None)
            .await
            .expect("auth_lookup"),
        AuthLookup::default()
    );

    let (found, payment) = store
        .auth_lookup_with_payment(&t.hash, None, pay.id)
        .await
        .expect("auth_lookup_with_payment");
    assert_eq!((found.project, found.key), (Some(p), None));
    assert_eq!(payment, Some(pay.clone()));
    let (_, none) = store
        .auth_lookup_with_payment(&t.hash, None, payment_id(2))
        .await
        .expect("auth_lookup_with_payment");
    assert_eq!(none, None);
    let (nothing, unread) = store
        .auth_lookup_with_payment(&[7; 32], None, pay.id)
        .await
        .expect("auth_lookup_with_payment");
    assert_eq!(
        (nothing, unread),
        (AuthLookup::default(), None),
        "an unknown token reads nothing"
    );
}

/// A change to a token, key, project or merchant made through one handle (another node,
/// or a command on the same database) shows in the next `auth_lookup` (and
/// `auth_lookup_with_payment`) of every other handle, also one that looked the same
/// credentials up just before; with one handle, a store that keeps lookups must notice its own
/// changes.
pub async fn directory_changes_reach_every_handle<S: Store>(handles: &[&S]) {
    let (writer, reader) = (handles[0], handles[handles.len() - 1]);
    let m = sample_merchant(1, "First");
    let p = sample_project(1, m.id);
    writer.upsert_merchant(&m).await.expect("upsert_merchant");
    writer.upsert_project(&p).await.expect("upsert_project");
    let t = token(1, p.id, vec![Scope::PaymentsCreate]);
    writer.insert_token(&t).await.expect("insert_token");
    let k = key(p.id, "ed25519-k1", 1);
    writer.insert_key(&k).await.expect("insert_key");
    let keyid = KeyId::new("ed25519-k1");
    let lookup = || async {
        reader
            .auth_lookup(&t.hash, Some(&keyid))
            .await
            .expect("auth_lookup")
    };
    let first = lookup().await;
    assert_eq!((first.project, first.key), (Some(p.clone()), Some(k)));
    assert_eq!(lookup().await.token, Some(t.clone()), "asked again");

    let mut changed = p.clone();
    changed.ip_allow_list = vec!["198.51.100.7".to_string()];
    writer
        .upsert_project(&changed)
        .await
        .expect("upsert_project");
    assert_eq!(lookup().await.project, Some(changed));
    let mut paused = m.clone();
    paused.paused = true;
    writer
        .upsert_merchant(&paused)
        .await
        .expect("upsert_merchant");
    assert_eq!(lookup().await.merchant, Some(paused));
    assert!(writer
        .revoke_key(p.id, &keyid, T0)
        .await
        .expect("revoke_key"));
    assert_eq!(lookup().await.key.and_then(|k| k.revoked_at), Some(T0));
    assert!(writer
        .revoke_token(p.id, t.id, T0)
        .await
        .expect("revoke_token"));
    assert_eq!(lookup().await.token.and_then(|t| t.revoked_at), Some(T0));
    let (found, _) = reader
        .auth_lookup_with_payment(&t.hash, None, payment_id(1))
        .await
        .expect("auth_lookup_with_payment");
    assert_eq!(found.token.and_then(|t| t.revoked_at), Some(T0));
}

/// `find_active_key_projects` names every project holding an unrevoked key with the id, and no
/// project whose key with it is revoked.
pub async fn key_owners<S: Store>(store: &S) {
    let m = sample_merchant(1, "First");
    let (a, b, c) = (
        sample_project(1, m.id),
        sample_project(2, m.id),
        sample_project(3, m.id),
    );
    store.upsert_merchant(&m).await.expect("upsert_merchant");
    for p in [&a, &b, &c] {
        store.upsert_project(p).await.expect("upsert_project");
    }
    let shared = KeyId::new("ed25519-SHARED");
    for (p, byte) in [(&a, 1), (&b, 2)] {
        store
            .insert_key(&key(p.id, shared.as_str(), byte))
            .await
            .expect("insert_key");
    }
    store
        .insert_key(&key(c.id, "ed25519-OTHER", 3))
        .await
        .expect("insert_key");
    let mut owners = store
        .find_active_key_projects(&shared)
        .await
        .expect("find_active_key_projects");
    owners.sort();
    let mut expected = vec![a.id, b.id];
    expected.sort();
    assert_eq!(owners, expected);
    store
        .revoke_key(a.id, &shared, T0)
        .await
        .expect("revoke_key");
    assert_eq!(
        store
            .find_active_key_projects(&shared)
            .await
            .expect("find_active_key_projects"),
        vec![b.id],
        "a revoked key is no longer active"
    );
    assert_eq!(
        store
            .find_active_key_projects(&KeyId::new("ed25519-NONE"))
            .await
            .expect("find_active_key_projects"),
        Vec::<ProjectId>::new()
    );
}

/// Keys are unique per (project, keyid), found revoked or not, listed per project.
pub async fn keys<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let k1 = key(a, "ed25519-AAAA", 1);
    let k2 = key(a, "ed25519-BBBB", 2);
    let k1b = key(b, "ed25519-AAAA", 3);
    for k in [&k1, &k2, &k1b] {
        store.insert_key(k).await.expect("insert_key");
    }
    assert!(matches!(
        store.insert_key(&key(a, "ed25519-AAAA", 4)).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(
        store.key(a, &k1.keyid).await.expect("key"),
        Some(k1.clone())
    );
    assert_eq!(
        store.key(b, &k1.keyid).await.expect("key"),
        Some(k1b.clone())
    );
    assert_eq!(
        store
            .key(a, &KeyId::new("ed25519-CCCC"))
            .await
            .expect("key"),
        None
    );
    assert_eq!(
        store.keys(a).await.expect("keys"),
        vec![k1.clone(), k2.clone()]
    );

    let at = T0 + ms(1);
    assert!(!store
        .revoke_key(b, &k2.keyid, at)
        .await
        .expect("revoke_key"));
    assert!(store
        .revoke_key(a, &k1.keyid, at)
        .await
        .expect("revoke_key"));
    assert!(store
        .revoke_key(a, &k1.keyid, at + ms(1))
        .await
        .expect("revoke_key"));
    let revoked = store.key(a, &k1.keyid).await.expect("key").expect("found");
    assert_eq!(revoked.revoked_at, Some(at));
    assert_eq!(revoked.public_key, [1; 32]);
    assert_eq!(
        store.key(b, &k1.keyid).await.expect("key"),
        Some(k1b),
        "revocation is per project"
    );
}

/// Secrets are kept two at most, newest first; `add_if_none` adds only to an empty project.
pub async fn callback_secrets<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    assert!(store.callback_secrets(a).await.expect("secrets").is_empty());
    let (s1, s2, s3) = (secret(1, false), secret(2, true), secret(3, true));
    store.insert_callback_secret(a, &s1).await.expect("add");
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s1.clone()]
    );
    store.insert_callback_secret(a, &s2).await.expect("add");
    store.insert_callback_secret(a, &s3).await.expect("add");
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s3.clone(), s2.clone()]
    );

    let auto = secret(4, false);
    assert_eq!(
        store
            .insert_callback_secret_if_none(a, &auto)
            .await
            .expect("add_if_none"),
        vec![s3.clone(), s2.clone()],
        "a project with secrets keeps them"
    );
    assert_eq!(
        store
            .insert_callback_secret_if_none(b, &auto)
            .await
            .expect("add_if_none"),
        vec![auto.clone()]
    );
    assert_eq!(
        store
            .insert_callback_secret_if_none(b, &s1)
            .await
            .expect("add_if_none"),
        vec![auto.clone()]
    );
    assert_eq!(
        store.callback_secrets(b).await.expect("secrets"),
        vec![auto]
    );
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s3.clone(), s2.clone()]
    );

    // A re-seal replaces one stored value in place, keeping its time, flag and order.
    let resealed = SecretString::from("v1.0badcafe.resealed");
    assert!(store
        .replace_callback_secret(a, &s2.secret, &resealed)
        .await
        .expect("replace"));
    let s2b = SecretRecord {
        secret: resealed.clone(),
        ..s2.clone()
    };
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s3.clone(), s2b]
    );
    assert!(
        !store
            .replace_callback_secret(a, &s2.secret, &resealed)
            .await
            .expect("replace"),
        "a value no longer stored is not replaced"
    );
    assert!(
        !store
            .replace_callback_secret(b, &s3.secret, &resealed)
            .await
            .expect("replace"),
        "replacement is per project"
    );
    assert_eq!(
        store.callback_secrets(b).await.expect("secrets"),
        vec![secret(4, false)]
    );
}

/// Settings are absent until set, overwritten by a second set, and absent again once deleted
/// (a delete says whether there was one; it leaves the other settings alone). An insert sets
/// only a setting that is not set, and says whether it did.
pub async fn settings<S: Store>(store: &S) {
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        None
    );
    store
        .upsert_setting("operator_token", "abc")
        .await
        .expect("upsert_setting");
    store
        .upsert_setting("other", "")
        .await
        .expect("upsert_setting");
    store
        .upsert_setting("operator_token", "def ü")
        .await
        .expect("upsert_setting");
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        Some("def ü".to_string())
    );
    assert_eq!(
        store.setting("other").await.expect("setting"),
        Some(String::new())
    );

    assert_eq!(store.delete_setting("operator_token").await, Ok(true));
    assert_eq!(store.delete_setting("operator_token").await, Ok(false));
    assert_eq!(store.delete_setting("never set").await, Ok(false));
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        None
    );
    assert_eq!(
        store.setting("other").await.expect("setting"),
        Some(String::new()),
        "a delete leaves the other settings alone"
    );
    store
        .upsert_setting("operator_token", "again")
        .await
        .expect("upsert_setting");
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        Some("again".to_string())
    );
    assert_eq!(store.insert_setting("first", "one").await, Ok(true));
    assert_eq!(store.insert_setting("first", "two").await, Ok(false));
    assert_eq!(store.insert_setting("operator_token", "x").await, Ok(false));
    assert_eq!(
        (
            store.setting("first").await,
            store.setting("operator_token").await
        ),
        (Ok(Some("one".into())), Ok(Some("again".into()))),
        "an insert never overwrites"
    );
}

/// `settings_with_prefix` answers exactly the settings whose names start with the prefix, with
/// their current values, in bytewise order of the names: not a name that differs in case only,
/// nor one that a pattern would match (`_` and `%` are plain characters); a prefix with
/// characters beyond ASCII is counted in characters as the names are; a deleted setting is
/// gone; an empty prefix lists them all.
pub async fn settings_with_prefix<S: Store>(store: &S) {
    let list = |prefix: &'static str| async move {
        store
            .settings_with_prefix(prefix)
            .await
            .expect("settings_with_prefix")
    };
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(list("health.").await, Vec::new(), "nothing yet");
    for (name, value) in [
        ("health.b", "2"),
        ("health.a", "1"),
        ("health.a.x", "ü"),
        ("health.Z", "0"),
        ("Health.c", "other case"),
        ("HEALTH.d", "other case"),
        ("healthy.e", "longer word"),
        ("health", "the bare prefix"),
        ("health_x", "underscore"),
        ("health%y", "percent"),
        ("grüße.a", "non-ASCII"),
        ("grüßen", "non-ASCII, no dot"),
    ] {
        store.upsert_setting(name, value).await.expect("upsert");
    }
    store
        .upsert_setting("health.a", "one")
        .await
        .expect("upsert");
    assert_eq!(
        list("health.").await,
        pairs(&[
            ("health.Z", "0"),
            ("health.a", "one"),
            ("health.a.x", "ü"),
            ("health.b", "2"),
        ]),
        "exactly the prefix's, bytewise ('Z' before 'a'), the value overwritten"
    );
    assert_eq!(list("health.a").await.len(), 2);
    assert_eq!(list("health_").await, pairs(&[("health_x", "underscore")]));
    assert_eq!(list("health%").await, pairs(&[("health%y", "percent")]));
    assert_eq!(list("HEALTH.").await, pairs(&[("HEALTH.d", "other case")]));
    assert_eq!(list("grüße.").await, pairs(&[("grüße.a", "non-ASCII")]));
    assert_eq!(list("grüß").await.len(), 2);
    assert_eq!(list("nothing.").await, Vec::new());
    assert!(store.delete_setting("health.b").await.expect("delete"));
    assert_eq!(
        list("health.").await.last(),
        Some(&("health.a.x".to_string(), "ü".to_string())),
        "a deleted setting is gone"
    );
    let all = list("").await;
    assert!(
        all.len() >= 11 && all.windows(2).all(|w| w[0].0 < w[1].0),
        "an empty prefix lists every setting, in order: {all:?}"
    );
}

/// A setting one handle writes is listed by every handle (the nodes of one database share
/// their reports through settings), and each handle's own write is beside the others'.
pub async fn settings_reach_every_handle<S: Store>(handles: &[&S]) {
    for (i, h) in handles.iter().enumerate() {
        h.upsert_setting(&format!("shared.node-{i}"), &format!("from {i}"))
            .await
            .expect("upsert");
    }
    let expected: Vec<(String, String)> = (0..handles.len())
        .map(|i| (format!("shared.node-{i}"), format!("from {i}")))
        .collect();
    for h in handles {
        assert_eq!(
            h.settings_with_prefix("shared.").await.expect("list"),
            expected
        );
    }
}

/// The audit trail lists the newest `limit` records newest first, including those written by
/// `commit_change`.
pub async fn audit<S: Store>(store: &S) {
    assert!(store
        .find_audit_records(10)
        .await
        .expect("audit")
        .is_empty());
    let r1 = sample_audit(T0, "token.issue", "t1");
    let mut r2 = sample_audit(T0, "token.revoke", "t1");
    r2.before = None;
    r2.after = Some("{}".to_string());
    r2.actor = "system".to_string();
    store.insert_audit(&r1).await.expect("append");
    store.insert_audit(&r2).await.expect("append");
    let p = sample_payment(payment_id(1), project_id(1), "o1");
    inserted(store, &p).await;
    let r3 = sample_audit(T0 + ms(1), "payment.cancel", &p.id.to_string());
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: changed(&p, PaymentStatus::Processing, T0),
            expected_version: 1,
            event: None,
            audit: Some(r3.clone()),
        })
        .await
        .expect("commit_change");
    let r4 = sample_audit(T0, "key.register", "k");
    store.insert_audit(&r4).await.expect("append");
    assert_eq!(
        store.find_audit_records(3).await.expect("audit"),
        vec![r4.clone(), r3.clone(), r2.clone()]
    );
    assert_eq!(
        store.find_audit_records(100).await.expect("audit"),
        vec![r4, r3, r2, r1]
    );
    assert!(store.find_audit_records(0).await.expect("audit").is_empty());
}
