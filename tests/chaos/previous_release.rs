//! The previous release's `stockd`, for the rolling-upgrade scenario (s26):
//! built from [`PREVIOUS_RELEASE`], the last commit before orders, out of
//! this repository's own history (`git archive`, so no worktree is left
//! behind), in its own target dir under `target/previous-release/`, and
//! kept there for the next run.
//!
//! Why its own config dir: a release reads the `config/` it shipped with
//! (an old binary refuses a base.yaml with sections it does not know, such
//! as `orders`), exactly as an operator's old nodes keep their own files.
//!
//! The first build seeds its target dir with a copy of this build's
//! compiled dependencies (`target/debug/{build,.fingerprint}` and the
//! libraries of `deps`, not its executables): both commits lock the same
//! crates, so only the stockd crate compiles (about a minute, not a cold
//! build of every dependency).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The last commit before orders (c422d1d, "Orders, first layer", is the
/// first): single reservations with extend, no `/v1/orders`, no format
/// header on deduction messages.
pub const PREVIOUS_RELEASE: &str = "ced0505";

/// A built previous release: its binary and the config dir it ships.
#[derive(Debug, Clone)]
pub struct Release {
    pub commit: String,
    pub binary: PathBuf,
    pub config_dir: PathBuf,
}

/// Builds (or finds) the previous release; panics with the reason when
/// the commit is not in this clone's history or the build fails.
pub fn build() -> Release {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = repo
        .join("target")
        .join("previous-release")
        .join(PREVIOUS_RELEASE);
    let src = root.join("src");
    let target = root.join("target");
    let release = Release {
        commit: PREVIOUS_RELEASE.to_string(),
        binary: root.join("stockd"),
        config_dir: src.join("config"),
    };
    if release.binary.is_file() && release.config_dir.is_dir() {
        println!(
            "  previous release {PREVIOUS_RELEASE}: {} (built before)",
            release.binary.display()
        );
        return release;
    }
    let started = Instant::now();
    let verify = git(
        &repo,
        &[
            "rev-parse",
            "--verify",
            &format!("{PREVIOUS_RELEASE}^{{commit}}"),
        ],
    );
    assert!(
        verify,
        "commit {PREVIOUS_RELEASE} is not in this clone (a shallow clone? `git fetch \
         --unshallow`): the rolling-upgrade scenario builds the previous release from it"
    );
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).unwrap();
    println!(
        "  previous release {PREVIOUS_RELEASE}: extracting into {}",
        src.display()
    );
    let extracted = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "git -C '{}' archive {PREVIOUS_RELEASE} | tar -x -C '{}'",
            repo.display(),
            src.display()
        ))
        .status()
        .unwrap();
    assert!(extracted.success(), "git archive {PREVIOUS_RELEASE} failed");
    if !target.exists() {
        seed_target(&repo.join("target").join("debug"), &target.join("debug"));
    }
    println!(
        "  previous release {PREVIOUS_RELEASE}: cargo build --bin stockd (log: {})",
        root.join("build.log").display()
    );
    let log = std::fs::File::create(root.join("build.log")).unwrap();
    let built = Command::new("cargo")
        .args(["build", "--locked", "--bin", "stockd"])
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_INCREMENTAL", "0")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .unwrap();
    assert!(
        built.success(),
        "building the previous release failed: see {}",
        root.join("build.log").display()
    );
    std::fs::copy(target.join("debug").join("stockd"), &release.binary).unwrap();
    println!(
        "  previous release {PREVIOUS_RELEASE}: built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    release
}

fn git(repo: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Copies the compiled dependencies of `from` (a debug target dir) to `to`;
/// a missing one is no error (the build is then cold, only slower). Of
/// `deps` only the libraries and their dep-info are copied (`lib*`, `*.d`):
/// the executables beside them (this build's test binaries and `stockd`,
/// each several hundred MB, a generation of them per rebuild) are no use to
/// the old build and once filled the disk of a CI machine.
fn seed_target(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for part in ["build", ".fingerprint"] {
        if !from.join(part).exists() {
            continue;
        }
        let copied = Command::new("cp")
            .args(["-a", "--reflink=auto"])
            .arg(from.join(part))
            .arg(to)
            .status();
        if !copied.is_ok_and(|s| s.success()) {
            println!("  previous release: seeding {part} failed; building cold");
        }
    }
    if let Err(err) = seed_libraries(&from.join("deps"), &to.join("deps")) {
        println!("  previous release: seeding deps failed ({err}); building cold");
    }
}

/// The compiled libraries of a `deps` dir (`lib*.rlib`, `.rmeta`, `.so`)
/// and the dep-info files (`*.d`), copied from `from` to `to`.
fn seed_libraries(from: &Path, to: &Path) -> std::io::Result<()> {
    if !from.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_file() && (name.starts_with("lib") || name.ends_with(".d")) {
            std::fs::copy(entry.path(), to.join(&*name))?;
        }
    }
    Ok(())
}
