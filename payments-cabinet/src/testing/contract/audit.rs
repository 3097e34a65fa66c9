//! The checks of [`CabinetAuditLog`](crate::store::CabinetAuditLog).

use payments_core::ids::MerchantId;
use payments_core::testing::contract::{merchant_id, ms, project_id, T0};

use super::sample::user_id;
use crate::store::{AuditQuery, CabinetAuditRecord, CabinetStore};

/// The cabinet audit log answers newest first, page by page with a cursor, filtered by
/// merchant, action or family of actions, outcome and e-mail; retention deletes what is older
/// than its period or outside the newest records it keeps, and nothing else.
pub async fn cabinet_audit_log<S: CabinetStore>(store: &S) {
    let record = |n: i64, merchant: Option<MerchantId>, success: bool| CabinetAuditRecord {
        at: T0 + ms(n),
        user_id: (n % 2 == 0).then(|| user_id(1)),
        email: format!("user{}@shop.example", n % 2),
        address: (n != 3).then(|| "2001:db8::1".to_string()),
        merchant_id: merchant,
        project_id: (n == 2).then(|| project_id(1)),
        action: ["sign_in.password", "sign_in", "token.issue", "sign_inx.y"][(n % 4) as usize]
            .to_string(),
        target: format!("target-{n}"),
        success,
        detail: (n == 1).then(|| "a \"detail\" ü".to_string()),
    };
    let r1 = record(1, Some(merchant_id(1)), false);
    let r2 = record(2, Some(merchant_id(1)), true);
    let r3 = record(3, Some(merchant_id(2)), true);
    let r4 = record(4, None, true);
    let r5 = record(5, Some(merchant_id(1)), false);
    for r in [&r1, &r2, &r3, &r4, &r5] {
        store.insert_cabinet_audit(r).await.expect("append");
    }
    let page = |q: AuditQuery| async move { store.find_cabinet_audit(&q).await.expect("audit") };
    let all = AuditQuery {
        limit: 10,
        ..AuditQuery::default()
    };
    let everything = page(all.clone()).await;
    assert_eq!(
        everything.records,
        vec![r5.clone(), r4.clone(), r3.clone(), r2.clone(), r1.clone()]
    );
    assert_eq!(everything.next, None, "no page after the last");

    // Two by two, each page after the previous one's cursor, the last without a cursor.
    let by_two = |before| AuditQuery {
        before,
        limit: 2,
        ..AuditQuery::default()
    };
    let first = page(by_two(None)).await;
    assert_eq!(first.records, vec![r5.clone(), r4.clone()]);
    let second = page(by_two(first.next)).await;
    assert_eq!(second.records, vec![r3.clone(), r2.clone()]);
    let third = page(by_two(second.next)).await;
    assert_eq!((third.records, third.next), (vec![r1.clone()], None));
    assert!(first.next.is_some() && second.next.is_some());

    let mine = AuditQuery {
        merchant: Some(merchant_id(1)),
        ..all.clone()
    };
    assert_eq!(
        page(mine.clone()).await.records,
        vec![r5.clone(), r2.clone(), r1.clone()]
    );
    let first = page(AuditQuery {
        limit: 1,
        ..mine.clone()
    })
    .await;
    assert_eq!(first.records, vec![r5.clone()]);
    let rest = page(AuditQuery {
        before: first.next,
        ..mine.clone()
    })
    .await;
    assert_eq!(rest.records, vec![r2.clone(), r1.clone()]);
    assert_eq!(
        page(AuditQuery {
            success: Some(false),
            ..mine.clone()
        })
        .await
        .records,
        vec![r5.clone(), r1.clone()]
    );
    // A family: `sign_in` and every `sign_in.*`, not `sign_inx.*`; `_` is no wildcard.
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_in".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r5.clone(), r4.clone(), r1.clone()]
    );
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_in.password".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r4.clone()]
    );
    assert!(page(AuditQuery {
        action: Some("sign%".into()),
        ..all.clone()
    })
    .await
    .records
    .is_empty());
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_inx".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r3.clone()]
    );
    assert_eq!(
        page(AuditQuery {
            email: Some("user0@shop.example".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r4.clone(), r2.clone()]
    );

    // Retention: by age among the oldest `limit`, then by size.
    assert_eq!(
        store
            .delete_cabinet_audit(T0 + ms(3), None, 1)
            .await
            .expect("purge"),
        1,
        "one batch of one: r1"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0 + ms(3), None, 10)
            .await
            .expect("purge"),
        1,
        "r2; r3 is not older than the cut-off"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0, Some(2), 10)
            .await
            .expect("purge"),
        1,
        "r3: the newest two are kept"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0, Some(2), 10)
            .await
            .expect("purge"),
        0
    );
    assert_eq!(
        page(all.clone()).await.records,
        vec![r5.clone(), r4.clone()]
    );
    // Appending after a purge continues the order.
    let r6 = record(6, None, true);
    store.insert_cabinet_audit(&r6).await.expect("append");
    assert_eq!(page(all).await.records, vec![r6, r5, r4]);
}
