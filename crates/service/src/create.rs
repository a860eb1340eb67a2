//! Group commit for link creation. Concurrent creations, single (`POST /links`) and bulk
//! (`POST /links/bulk`), are written together: whatever queued while the previous group was being
//! written goes into the next transaction (up to about [`MAX_GROUP`] links; a request's links are
//! never split). On SQLite, with its single writer, much of a transaction's cost is fixed (begin,
//! commit, the pages every insert touches, handing work to the writer's thread), so sharing it
//! multiplies throughput under load and costs nothing when requests come one at a time: a lone
//! request is written at once, in a group of its own.
//!
//! SQLite has one writer, so one group is written at a time; PostgreSQL writes
//! [`POSTGRES_WRITERS`] groups side by side, since its transactions run in parallel.
//!
//! A group is one transaction; the links of each request stay in input order, and a slug taken
//! by an earlier request of the same group is a conflict for the later one, exactly as if they
//! had been written one after the other. A group that fails is written again one request at a
//! time (unless the database is unavailable), so one request's failure is its own.

use std::sync::Arc;

use shortlink_domain::BaseUrl;
use shortlink_storage::{
    CreateOutcome, DatabaseKind, LinkCompletion, NewLink, PlacedCompletion, StorageError, Store,
};
use shortlink_webhooks::WakeHandle;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::ServiceError;

/// Links past which no further request joins a group.
pub const MAX_GROUP: usize = 1000;

/// Groups written at once on PostgreSQL.
pub const POSTGRES_WRITERS: usize = 4;

type Reply = oneshot::Sender<Result<Vec<CreateOutcome>, ServiceError>>;

struct Job {
    links: Vec<NewLink>,
    /// Completes the request's idempotency claim in the group's transaction.
    completion: Option<LinkCompletion>,
    reply: Reply,
}

/// A group to write: its requests, in the order they came, and how many links they hold.
struct Group {
    jobs: Vec<Job>,
    links: usize,
}

impl Group {
    fn join(&mut self, job: Job) {
        self.links += job.links.len();
        self.jobs.push(job);
    }
}

/// The queue in front of the writer task.
pub(crate) struct LinkCreator {
    jobs: mpsc::Sender<Job>,
}

impl LinkCreator {
    /// Starts the writer tasks on `runtime`. They end when the creator is dropped.
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        store: Store,
        base: BaseUrl,
        webhooks: WakeHandle,
    ) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>(MAX_GROUP);
        let queue = Arc::new(Mutex::new(queue));
        let writers = match store.kind() {
            DatabaseKind::Sqlite => 1,
            DatabaseKind::Postgres => POSTGRES_WRITERS,
        };
        for _ in 0..writers {
            let (store, base, webhooks, queue) =
                (store.clone(), base.clone(), webhooks.clone(), queue.clone());
            runtime.spawn(async move {
                while let Some(group) = next_group(&queue).await {
                    write(&store, &base, &webhooks, group).await;
                }
            });
        }
        Self { jobs }
    }

    /// Creates `links` in one transaction, with whatever else joins its group, which also
    /// completes `completion`'s claim; outcomes in input order.
    pub async fn create(
        &self,
        links: Vec<NewLink>,
        completion: Option<LinkCompletion>,
    ) -> Result<Vec<CreateOutcome>, ServiceError> {
        let (reply, outcomes) = oneshot::channel();
        self.jobs
            .send(Job {
                links,
                completion,
                reply,
            })
            .await
            .map_err(|_| ServiceError::Stopped)?;
        outcomes.await.map_err(|_| ServiceError::Stopped)?
    }
}

/// The next group: the first waiting request, and whatever else is queued behind it.
async fn next_group(queue: &Mutex<mpsc::Receiver<Job>>) -> Option<Group> {
    let mut queue = queue.lock().await;
    let mut group = Group {
        jobs: Vec::new(),
        links: 0,
    };
    group.join(queue.recv().await?);
    while group.links < MAX_GROUP {
        let Ok(job) = queue.try_recv() else { break };
        group.join(job);
    }
    Some(group)
}

/// Writes a group in one transaction and answers each request with its share of the outcomes.
/// A group that fails for one request's sake (links of a workspace that does not exist, say:
/// an embedder's call can name any) is written again one request at a time, so that only that
/// request fails; a database that is unavailable fails them all at once.
async fn write(store: &Store, base: &BaseUrl, webhooks: &WakeHandle, group: Group) {
    let jobs = group.jobs;
    if jobs.len() > 1 {
        let requests = jobs
            .iter()
            .map(|job| (job.links.clone(), job.completion.clone()))
            .collect();
        match commit(store, base, webhooks, requests).await {
            Ok(outcomes) => {
                for (job, outcomes) in jobs.into_iter().zip(outcomes) {
                    let _ = job.reply.send(Ok(outcomes));
                }
                return;
            }
            Err(e) if e.is_unavailable() => {
                tracing::warn!(error = %e, "link creation failed");
                for job in jobs {
                    let _ = job.reply.send(Err(ServiceError::Storage(e.clone())));
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "a group of link creations failed; writing each alone");
            }
        }
    }
    for job in jobs {
        let result = commit(store, base, webhooks, vec![(job.links, job.completion)]).await;
        let _ = job.reply.send(match result {
            Ok(mut outcomes) => Ok(outcomes.remove(0)),
            Err(e) => {
                tracing::warn!(error = %e, "link creation failed");
                Err(ServiceError::Storage(e))
            }
        });
    }
}

/// Writes the links of `requests` (each completing its claim) in one transaction; each
/// request's outcomes, in order.
async fn commit(
    store: &Store,
    base: &BaseUrl,
    webhooks: &WakeHandle,
    requests: Vec<(Vec<NewLink>, Option<LinkCompletion>)>,
) -> Result<Vec<Vec<CreateOutcome>>, Arc<StorageError>> {
    let mut links = Vec::new();
    let mut completions = Vec::new();
    let mut counts = Vec::with_capacity(requests.len());
    for (request, completion) in requests {
        let start = links.len();
        links.extend(request);
        if let Some(completion) = completion {
            completions.push(PlacedCompletion {
                links: start..links.len(),
                completion,
            });
        }
        counts.push(links.len() - start);
    }
    let outcomes = store
        .create_links_completing(links, base, completions)
        .await
        .map_err(Arc::new)?;
    webhooks.wake();
    let mut outcomes = outcomes.into_iter();
    Ok(counts
        .into_iter()
        .map(|count| outcomes.by_ref().take(count).collect())
        .collect())
}
