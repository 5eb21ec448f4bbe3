//! A program whose probes have typed arguments for `sightline probe`: a `&str`, integers and a
//! byte slice, in a provider that declares its stability and one that does not.
//!
//! Used by the CLI tests of `sightline probe -l -v` (the argument names and types from the
//! `.note.sightline` note) and of `args[N]` in D (the string without `copyinstr`). Every iteration
//! `i` (0-based) fires, in order:
//!
//! - `webserver:::request("/index.html", 200 + i)`,
//! - `webserver:::upload("report.pdf", b"%PDF-1", -(i as i64) - 1)`,
//! - `plain:::tick(i)`.
//!
//! ```text
//! usdt-typed [--iterations N]
//! ```

sightline_usdt::provider! {
    /// A web server's probes, declared `Evolving/Evolving/Common` (DTrace's attributes for a
    /// provider whose names and data may change only in minor releases).
    mod webserver {
        #![stability = "Evolving/Evolving/Common"]
        /// A request was served: its path and HTTP status.
        fn request(request_path: &str, status: u16);
        /// An upload: the file's name, its first bytes and a signed adjustment.
        fn upload(file_name: &str, head: &[u8], delta: i64);
    }
}

sightline_usdt::provider! {
    /// A provider without a declared stability.
    mod plain {
        /// Iteration `i`.
        fn tick(i: u64);
    }
}

/// The path the `request` probe passes.
const REQUEST_PATH: &str = "/index.html";
/// The name and bytes the `upload` probe passes.
const FILE_NAME: &str = "report.pdf";
const HEAD: &[u8] = b"%PDF-1";

fn main() {
    let mut iterations: u64 = 1;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iterations" => {
                iterations = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--iterations needs a number")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    for i in 0..iterations {
        sightline_usdt::probe!(webserver::request(REQUEST_PATH, 200 + i as u16));
        sightline_usdt::probe!(webserver::upload(FILE_NAME, HEAD, -(i as i64) - 1));
        plain::tick::fire(i);
    }
    println!("fired {iterations} iterations");
}
