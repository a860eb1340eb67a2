//! A Redis server of a test's own, shared by the API and the process tests (each includes this
//! file as its module `redis`).

use std::time::Duration;

/// A Redis server of the test's own, on a free port, that the test can stop and start again.
pub struct Redis {
    port: u16,
    process: Option<std::process::Child>,
}

impl Redis {
    /// Starts one on a free port.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut redis = Redis {
            port,
            process: None,
        };
        redis.run();
        redis
    }

    /// Starts it (again).
    pub fn run(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server starts (it is installed where the tests run)");
        self.process = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not listen on {}", self.port);
    }

    /// Stops it, as a crash would.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> &'static str {
        // A server's setup holds `'static` text; one per test.
        Box::leak(format!("redis://127.0.0.1:{}", self.port).into_boxed_str())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}
