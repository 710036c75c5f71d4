//! A server process for the tests: started on 127.0.0.1 at a free port,
//! waited for (bounded), killed when dropped, also when a test fails.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
