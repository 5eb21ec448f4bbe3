//! `sightline record -- ./script` for a script without a `#!` line: like `execvp`, it runs as a
//! `/bin/sh` script (it used to fail with exit 127), and the recording replays.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

#[test]
fn a_script_without_shebang_runs_under_bin_sh_and_replays() {
    if !test_support::privileged("records and replays with ptrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("plain-script");
    std::fs::write(&script, "echo \"args: $1 $2\"\nexit 3\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let native = Command::new(&script).args(["a", "b c"]).output();
    // Rust's Command (execvp) gives ENOEXEC back rather than falling back; sh shows what POSIX does.
    assert!(native.is_err() || native.unwrap().status.code() != Some(3));
    let posix = Command::new("/bin/sh")
        .arg(&script)
        .args(["a", "b c"])
        .output()
        .unwrap();
    assert_eq!(posix.stdout, b"args: a b c\n");

    let dir = tmp.path().join("rec");
    let out = Command::new(test_support::sightline_bin())
        .current_dir(tmp.path())
        .args(["record", "-o"])
        .arg(&dir)
        .arg("--")
        .arg("./plain-script")
        .args(["a", "b c"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "args: a b c\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3));
    let rec = replay::format::Recording::open(&dir).unwrap();
    assert_eq!(rec.meta.path, "/bin/sh");
    assert_eq!(rec.meta.argv, ["/bin/sh", "./plain-script", "a", "b c"]);
    let replayed = Command::new(test_support::sightline_bin())
        .arg("replay")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(replayed.stdout, out.stdout);
    assert_eq!(replayed.status.code(), Some(3));

    // An ELF executable and a #! script are left alone.
    let (p, a) =
        replay::recorder::script_fallback(std::path::Path::new("/bin/true"), &["true".into()]);
    assert_eq!(
        (p.to_str().unwrap(), a),
        ("/bin/true", vec!["true".to_string()])
    );
    let shebang = tmp.path().join("with-shebang");
    std::fs::write(&shebang, "#!/bin/sh\necho hi\n").unwrap();
    let (p, _) = replay::recorder::script_fallback(&shebang, &["x".into()]);
    assert_eq!(p, shebang);
}
