//! Group commit for link creation. Concurrent creations, single (`POST /links`) and bulk
//! (`POST /links/bulk`), are written together: whatever queued while the previous group was being
//! written goes into the next transaction (up to about [`MAX_GROUP`] links; a request's links are
//! never split). On SQLite, with its single writer, much of a transaction's cost is fixed (begin,
//! commit, the pages every insert touches, handing work to the writer's thread), so sharing it
//! multiplies throughput under load and costs nothing when requests come one at a time: a lone
//! request is written at once, in a group of its own.
//!
//! A group succeeds or fails whole; the links of each request stay in input order, and a slug
//! taken by an earlier request of the same group is a conflict for the later one, exactly as if
//! they had been written one after the other.

use shortlink_domain::BaseUrl;
use shortlink_storage::{CreateOutcome, NewLink, Store};
use shortlink_webhooks::WakeHandle;
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;

/// Links past which no further request joins a group.
pub const MAX_GROUP: usize = 1000;

type Reply = oneshot::Sender<Result<Vec<CreateOutcome>, ApiError>>;

struct Job {
    links: Vec<NewLink>,
    reply: Reply,
}

/// The queue in front of the writer task.
pub struct LinkCreator {
    jobs: mpsc::Sender<Job>,
}

impl LinkCreator {
    /// Starts the writer task on the current tokio runtime. It ends when the creator is dropped.
    pub fn spawn(store: Store, base: BaseUrl, webhooks: WakeHandle) -> Self {
        let (jobs, mut queue) = mpsc::channel::<Job>(MAX_GROUP);
        tokio::spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut links = first.links;
                let mut replies = vec![(links.len(), first.reply)];
                while links.len() < MAX_GROUP {
                    let Ok(job) = queue.try_recv() else { break };
                    replies.push((job.links.len(), job.reply));
                    links.extend(job.links);
                }
                match store.create_links(links, &base).await {
                    Ok(outcomes) => {
                        webhooks.wake();
                        let mut outcomes = outcomes.into_iter();
                        for (count, reply) in replies {
                            let _ = reply.send(Ok(outcomes.by_ref().take(count).collect()));
                        }
                    }
                    Err(e) => {
                        let unavailable = e.is_unavailable();
                        let cause = e.to_string();
                        tracing::warn!(error = %cause, "link creation failed");
                        for (_, reply) in replies {
                            let _ = reply.send(Err(if unavailable {
                                ApiError::Unavailable
                            } else {
                                ApiError::Internal(cause.clone())
                            }));
                        }
                    }
                }
            }
        });
        Self { jobs }
    }

    /// Creates `links` in one transaction, with whatever else joins its group; outcomes in input
    /// order.
    pub async fn create(&self, links: Vec<NewLink>) -> Result<Vec<CreateOutcome>, ApiError> {
        let stopped = || ApiError::Internal("the link writer stopped".into());
        let (reply, outcomes) = oneshot::channel();
        self.jobs
            .send(Job { links, reply })
            .await
            .map_err(|_| stopped())?;
        outcomes.await.map_err(|_| stopped())?
    }
}
