//! Writes every target's seeds into `DIR/<target>/seed-NNNN` for cargo-fuzz (docs/fuzzing.md):
//! `cargo run -p fuzz-targets --example write-seeds -- fuzz/corpus [SHARED_DATA_DIR]`.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "fuzz/corpus".into()));
    let shared = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| fuzz_targets::seeds::workspace_root().join("../shared/data"));
    let shared = shared.is_dir().then_some(shared);
    for (name, _) in fuzz_targets::TARGETS {
        let out = dir.join(name);
        std::fs::create_dir_all(&out)?;
        let seeds = fuzz_targets::seeds::for_target(name, shared.as_deref());
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(out.join(format!("seed-{i:04}")), s)?;
        }
        println!("{name}: {} seeds in {}", seeds.len(), out.display());
    }
    Ok(())
}
