//! Spawned tasks that end with their owner: when a run is interrupted (Ctrl-C, SIGTERM, an
//! error elsewhere), its load tasks stop at once and close their connections, so the servers
//! they were driving can stop at once too.

use std::future::Future;

use anyhow::Context;
use tokio::task::JoinHandle;

/// Tasks aborted when this is dropped before they finish.
pub struct Tasks<T>(Vec<JoinHandle<T>>);

impl<T: Send + 'static> Tasks<T> {
    /// No tasks yet.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Spawns `task` on the runtime.
    pub fn spawn(&mut self, task: impl Future<Output = T> + Send + 'static) {
        self.0.push(tokio::spawn(task));
    }

    /// Waits for every task, in the order they were spawned.
    pub async fn join(mut self) -> anyhow::Result<Vec<T>> {
        let mut outputs = Vec::with_capacity(self.0.len());
        for handle in &mut self.0 {
            outputs.push(handle.await.context("a task panicked")?);
        }
        Ok(outputs)
    }
}

impl<T> Drop for Tasks<T> {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}
