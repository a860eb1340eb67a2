//! shortlink embedded in a Rust program, without a web framework: open a SQLite file as its one
//! server, create a link, resolve its code, count clicks while the background tasks run, stop,
//! and read the exact count back from the file.
//!
//! `cargo run -p shortlink-service --example embed`

use std::error::Error;

use shortlink_domain::{
    BaseUrl, Destination, LinkId, LinkRef, RateLimit, Slug, Timestamp, Visit, Workspace,
};
use shortlink_service::{Service, ServiceSettings};
use shortlink_storage::{CreateOutcome, NewLink, ServerOptions, Store, StoreOptions};

const CLICKS: u64 = 1_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::temp_dir().join(format!("shortlink-embed-{}.db", std::process::id()));
    let url = format!("sqlite://{}", path.display());
    let counted = count_clicks(&url).await;
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    let counted = counted?;
    println!("{counted} clicks counted, exactly");
    Ok(())
}

async fn count_clicks(url: &str) -> Result<i64, Box<dyn Error>> {
    // As a server: the click journal on and every link's redirect target in memory.
    let options = StoreOptions {
        server: Some(ServerOptions::default()),
        ..StoreOptions::default()
    };
    let store = Store::open(url, options).await?;
    let base = BaseUrl::parse("https://sho.rt")?;
    let service = Service::new(store.clone(), ServiceSettings::new(base.clone()))?;

    let workspace = Workspace::new("embedded", RateLimit::default());
    store.create_workspace(&workspace).await?;
    let link = NewLink {
        id: LinkId::generate(),
        workspace_id: workspace.id,
        domain: service.domain().to_owned(),
        slug: Some(Slug::parse("hello")?),
        destination: Destination::parse("https://example.com/welcome", &base)?,
        created_at: Timestamp::now(),
        options: Default::default(),
    };
    let outcomes = service.create_links(vec![link]).await?;
    let Some(CreateOutcome::Created(created)) = outcomes.into_iter().next() else {
        return Err("the link was not created".into());
    };

    // The background tasks (click flusher, webhook worker) until told to stop.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let service = service.clone();
        async move {
            service
                .run(async {
                    let _ = stopped.await;
                })
                .await
        }
    });

    let target = service
        .resolve("hello")
        .await?
        .ok_or("no link for the code")?;
    println!("hello -> {}", target.destination.as_str());
    for _ in 0..CLICKS {
        service.record_click(&target, || Visit {
            timestamp: Timestamp::now(),
            address: Some(std::net::Ipv4Addr::LOCALHOST.into()),
            referrer: None,
            user_agent: Some("embed example".into()),
        });
    }

    let _ = stop.send(());
    running.await??;
    service.shutdown().await?;

    // The file alone holds every count now: any store on it reads them.
    let reader = Store::open(url, StoreOptions::default()).await?;
    let link = reader
        .get_link(workspace.id, &LinkRef::Id(created.id), service.domain())
        .await?
        .ok_or("the link is gone")?;
    if link.clicks != CLICKS as i64 {
        return Err(format!("{} clicks counted, {CLICKS} recorded", link.clicks).into());
    }
    Ok(link.clicks)
}
