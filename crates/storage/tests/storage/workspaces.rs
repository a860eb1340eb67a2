use shortlink_domain::{ApiKey, ApiKeySecret, RateLimit, Timestamp, Workspace, WorkspaceId};
use shortlink_storage::{Dimension, EventFilter, StorageError};

use crate::{api_key, each_backend, workspace};

each_backend!(
    workspaces_are_found_by_name_or_id_and_names_are_unique,
    |store| {
        let acme = workspace(&store, "acme").await;
        let globex = Workspace {
            id: WorkspaceId::generate(),
            name: "globex".into(),
            rate_limit: RateLimit::new(250).unwrap(),
            created_at: Timestamp::now(),
        };
        store.create_workspace(&globex).await.unwrap();

        assert_eq!(
            store.find_workspace("acme").await.unwrap(),
            Some(acme.clone())
        );
        assert_eq!(
            store.find_workspace(&globex.id.to_string()).await.unwrap(),
            Some(globex.clone())
        );
        assert_eq!(store.find_workspace("initech").await.unwrap(), None);
        assert_eq!(
            store.list_workspaces().await.unwrap(),
            vec![acme.clone(), globex]
        );

        let again = Workspace {
            id: WorkspaceId::generate(),
            ..acme
        };
        assert!(matches!(
            store.create_workspace(&again).await,
            Err(StorageError::AlreadyExists(_))
        ));
        assert_eq!(store.list_workspaces().await.unwrap().len(), 2);
    }
);

each_backend!(keys_authenticate_by_hash_until_revoked, |store| {
    let acme = workspace(&store, "acme").await;
    let (key, secret) = api_key(&store, &acme).await;

    let found = store.authenticate(&secret.hash()).await.unwrap().unwrap();
    assert_eq!(found.key_id, key.id);
    assert_eq!(found.workspace, acme);
    assert_eq!(
        store
            .authenticate(&ApiKeySecret::generate().hash())
            .await
            .unwrap(),
        None
    );

    let listed = store.list_api_keys(acme.id).await.unwrap();
    assert_eq!(listed, vec![key.clone()]);

    assert!(store.revoke_api_key(key.id).await.unwrap());
    assert!(
        !store.revoke_api_key(key.id).await.unwrap(),
        "revoking twice changes nothing"
    );
    assert_eq!(store.authenticate(&secret.hash()).await.unwrap(), None);
    assert!(
        store.list_api_keys(acme.id).await.unwrap()[0]
            .revoked_at
            .is_some()
    );
});

each_backend!(ping_answers_on_a_live_database, |store| {
    store.ping().await.unwrap();
});

each_backend!(calls_the_domain_refuses_change_nothing, |store| {
    let acme = workspace(&store, "acme").await;
    for name in ["", "two words", "ws_01JD8X3Z6Q9T2V4W5Y7A0B1C2D"] {
        let named = Workspace {
            id: WorkspaceId::generate(),
            name: name.into(),
            ..acme.clone()
        };
        assert!(
            matches!(
                store.create_workspace(&named).await,
                Err(StorageError::Invalid(_))
            ),
            "{name:?}"
        );
    }
    assert_eq!(store.list_workspaces().await.unwrap(), vec![acme.clone()]);
    let (key, secret) = api_key(&store, &acme).await;
    let unnamed = ApiKey {
        id: shortlink_domain::ApiKeyId::generate(),
        name: String::new(),
        ..key
    };
    assert!(matches!(
        store.create_api_key(&unnamed, &secret.hash()).await,
        Err(StorageError::Invalid(_))
    ));
    assert_eq!(store.list_api_keys(acme.id).await.unwrap().len(), 1);

    let all = EventFilter::between(
        acme.id,
        None,
        Timestamp::from_unix_millis(0),
        Timestamp::now(),
    );
    assert!(matches!(
        store.analytics_series(&all, 0, 0).await,
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        store
            .analytics_breakdown(&all, Dimension::Browser, -1)
            .await,
        Err(StorageError::Invalid(_))
    ));
});
