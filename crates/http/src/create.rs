//! Group commit for single link creation. Concurrent `POST /links` requests are written together:
//! whatever queued while the previous group was being written goes into the next transaction (up
//! to [`MAX_GROUP`] links). On SQLite, with its single writer, a transaction's cost is mostly
//! fixed (begin, commit, handing work to the writer's thread), so sharing it multiplies
//! throughput under load and costs nothing when requests come one at a time: a lone request is
//! written at once, in a group of one.

use shortlink_domain::BaseUrl;
use shortlink_storage::{CreateOutcome, NewLink, Store};
use shortlink_webhooks::WakeHandle;
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;

/// Most links written in one transaction.
pub const MAX_GROUP: usize = 100;

struct Job {
    link: NewLink,
    reply: oneshot::Sender<Result<CreateOutcome, ApiError>>,
}

/// The queue in front of the writer task.
pub struct LinkCreator {
    jobs: mpsc::Sender<Job>,
}

impl LinkCreator {
    /// Starts the writer task on the current tokio runtime. It ends when the creator is dropped.
    pub fn spawn(store: Store, base: BaseUrl, webhooks: WakeHandle) -> Self {
        let (jobs, mut queue) = mpsc::channel::<Job>(4 * MAX_GROUP);
        tokio::spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match queue.try_recv() {
                        Ok(job) => group.push(job),
                        Err(_) => break,
                    }
                }
                let (links, replies): (Vec<NewLink>, Vec<_>) =
                    group.into_iter().map(|job| (job.link, job.reply)).unzip();
                match store.create_links(links, &base).await {
                    Ok(outcomes) => {
                        webhooks.wake();
                        for (outcome, reply) in outcomes.into_iter().zip(replies) {
                            let _ = reply.send(Ok(outcome));
                        }
                    }
                    Err(e) => {
                        let unavailable = e.is_unavailable();
                        let cause = e.to_string();
                        tracing::warn!(error = %cause, "link creation failed");
                        for reply in replies {
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

    /// Creates one link, in whatever group it lands in.
    pub async fn create(&self, link: NewLink) -> Result<CreateOutcome, ApiError> {
        let (reply, outcome) = oneshot::channel();
        self.jobs
            .send(Job { link, reply })
            .await
            .map_err(|_| ApiError::Internal("the link writer stopped".into()))?;
        outcome
            .await
            .map_err(|_| ApiError::Internal("the link writer stopped".into()))?
    }
}
