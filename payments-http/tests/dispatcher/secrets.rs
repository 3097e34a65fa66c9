//! Signing secrets: the rotation overlap, and a project that had none.

use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::event::EventKind;
use payments_core::service::Actor;
use payments_core::store::CallbackSecretStore;
use payments_directory::DirectoryAccess;
use payments_directory::ProjectPatch;

use crate::support::{advance, local_config, pki, receiver, world, Reply, World, HOST};
use payments_core::store::MerchantStoreExt;

#[tokio::test]
async fn both_secrets_sign_during_the_rotation_overlap_then_only_the_new_one() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let old = w.secret.clone();
    let new = w
        .service
        .directory()
        .rotate_callback_secret(w.project, &Actor("test".into()))
        .await
        .expect("rotated");
    let new = CallbackSecret::parse(new.expose()).expect("valid");
    let d = w.dispatcher(local_config(&pki));

    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    assert_eq!(d.deliver_due_once().await, 1);
    let during = rx.drain().remove(0);
    let values: Vec<&str> = during.header("x-callback-signature").split(',').collect();
    assert_eq!(values.len(), 2, "{values:?}");
    let ts = during.header("x-callback-timestamp");
    let only = |secret: &CallbackSecret| CallbackVerifier::new(vec![secret.clone()]);
    assert_eq!(
        only(&new).verify(ts, values[0], &during.body, w.now()),
        Ok(())
    );
    assert_eq!(
        only(&old).verify(ts, values[1], &during.body, w.now()),
        Ok(())
    );
    assert!(only(&old)
        .verify(ts, values[0], &during.body, w.now())
        .is_err());

    advance(&w, 24 * 3600);
    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    assert_eq!(d.deliver_due_once().await, 1);
    let after = rx.drain().remove(0);
    let header = after.header("x-callback-signature");
    assert_eq!(header.matches("v1=").count(), 1, "{header}");
    let ts = after.header("x-callback-timestamp");
    assert_eq!(only(&new).verify(ts, header, &after.body, w.now()), Ok(()));
    assert!(only(&old).verify(ts, header, &after.body, w.now()).is_err());
}

#[tokio::test]
async fn a_project_without_a_secret_gets_an_unrevealed_one_at_first_delivery() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let other = w
        .service
        .directory()
        .create_project(
            w.store
                .project(w.project)
                .await
                .expect("store answers")
                .expect("project exists")
                .merchant_id,
            "Second",
            ProjectPatch::default(),
            &Actor("test".into()),
        )
        .await
        .expect("project created");
    let w = World {
        project: other.id,
        ..w
    };
    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let secrets = w
        .store
        .callback_secrets(other.id)
        .await
        .expect("store answers");
    assert_eq!(secrets.len(), 1);
    assert!(!secrets[0].revealed);
    let r = rx.drain().remove(0);
    let created = CallbackSecret::parse(secrets[0].secret.expose()).expect("valid");
    assert_eq!(
        CallbackVerifier::new(vec![created]).verify(
            r.header("x-callback-timestamp"),
            r.header("x-callback-signature"),
            &r.body,
            w.now()
        ),
        Ok(())
    );
}
