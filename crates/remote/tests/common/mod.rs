//! Real servers for the tests of remote trees: `python3 -m http.server`
//! and moto's S3 server, each started on 127.0.0.1 at a free port, waited
//! for (bounded), killed when dropped, also when a test fails. Shared with
//! the tables crate's and the shell's tests (`#[path]`).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;

pub struct ServerProcess {
    child: Child,
    pub port: u16,
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl ServerProcess {
    /// Spawns `command` (already told to listen on `port`) and waits until
    /// the port accepts connections, at most `within`.
    pub fn start(mut command: Command, port: u16, within: Duration) -> ServerProcess {
        let what = format!("{:?}", command.get_program());
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not run: {e}"));
        let server = ServerProcess { child, port };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + within;
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "{what} did not listen on {port} within {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `python3 -m http.server` serving `dir` (`AICSQL_PYTHON` picks the Python).
pub struct HttpServer(pub ServerProcess);

impl HttpServer {
    pub fn start(dir: &Path) -> HttpServer {
        let port = free_port();
        let python = std::env::var("AICSQL_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut command = Command::new(python);
        command.args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"]).arg(dir);
        HttpServer(ServerProcess::start(command, port, Duration::from_secs(20)))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.0.port)
    }
}

/// moto's S3-compatible server (`moto_server` from PyPI, which
/// `scripts/test` installs into the project's virtualenv; `AICSQL_MOTO`
/// names another).
pub struct Moto(pub ServerProcess);

pub fn moto_server() -> PathBuf {
    if let Ok(path) = std::env::var("AICSQL_MOTO") {
        return PathBuf::from(path);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/moto_server");
    let venv =
        if venv.is_file() { venv } else { PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server") };
    assert!(
        venv.is_file(),
        "moto_server not found at {} (run scripts/test, which installs it, or set AICSQL_MOTO)",
        venv.display()
    );
    venv
}

impl Moto {
    pub fn start() -> Moto {
        Moto::start_with(&[])
    }

    /// `env`: e.g. moto's `INITIAL_NO_AUTH_ACTION_COUNT=0`, which makes it
    /// check every request's credentials.
    pub fn start_with(env: &[(&str, &str)]) -> Moto {
        let port = free_port();
        let mut command = Command::new(moto_server());
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]).envs(env.iter().copied());
        Moto(ServerProcess::start(command, port, Duration::from_secs(30)))
    }

    /// The Python that runs moto (it has boto3).
    pub fn python() -> PathBuf {
        moto_server().with_file_name("python")
    }

    pub fn port(&self) -> u16 {
        self.0.port
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// Creates a bucket (moto takes an unsigned PUT).
    pub fn create_bucket(&self, bucket: &str) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        let request = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200"), "{response}");
    }

    /// The store options of a data root in this server, named as the shell takes them.
    pub fn options(&self) -> Vec<(String, String)> {
        [
            ("aws.endpoint", self.endpoint()),
            ("aws.allow_http", "true".into()),
            ("aws.region", "us-east-1".into()),
            ("aws.access_key_id", "testing".into()),
            ("aws.secret_access_key", "testing".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    pub fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .build()
            .unwrap();
        Arc::new(store)
    }
}
