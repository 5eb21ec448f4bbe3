//! Starting and stopping the example system's servers in tests.

#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// The example system's binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_causal-example");

/// A server child (killed if the test fails) and its `host:port`.
pub struct Server {
    child: Child,
    /// The address the server said it listens on.
    pub addr: String,
}

impl Server {
    /// Starts `causal-example ARGS` with causal reports off and the extra environment `env`, and
    /// waits for its `listening on ADDR` line.
    pub fn start(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Server {
        let mut child = Command::new(BIN)
            .args(args)
            .env("SIGHTLINE_CAUSAL_SINK", "off")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("server {args:?} said {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the server to shut down and checks that it exits successfully.
    pub fn stop(mut self) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.write_all(b"GET /shutdown HTTP/1.0\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
