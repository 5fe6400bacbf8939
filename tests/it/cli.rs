//! The binary's command line: roles, config check and print, and `stockd bench`
//! in a developer and in a production build.

use std::process::Command;

fn stockd(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stockd"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("STOCKD_ENV", "local");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// An unknown role fails and lists the valid ones.
#[test]
fn an_unknown_role_lists_the_valid_ones() {
    let (code, text) = stockd(&["--role", "cashier"], &[]);
    assert_ne!(code, 0);
    for role in ["api", "consumer", "closer", "reconciler", "all"] {
        assert!(text.contains(role), "{role} missing from: {text}");
    }
}

/// `config check` passes on the shipped files and names a bad key.
#[test]
fn config_check_names_the_bad_key() {
    let (code, text) = stockd(&["config", "check"], &[]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = stockd(
        &["config", "check"],
        &[("STOCKD__RESERVATION__DURABILITY", "disk")],
    );
    assert_ne!(code, 0);
    assert!(text.contains("reservation.durability"), "{text}");
    let (code, text) = stockd(&["config", "check"], &[("STOCKD_ENV", "nowhere")]);
    assert_ne!(code, 0);
    assert!(text.contains("nowhere"), "{text}");
}

/// `config print` shows the effective settings with secrets redacted.
#[test]
fn config_print_redacts_secrets() {
    let env = [
        ("STOCKD__ADMIN__TOKEN", "tok-very-secret"),
        ("STOCKD__MYSQL__URL", "mysql://app:pw-secret@db:3306/stockd"),
    ];
    let (code, text) = stockd(&["config", "print"], &env);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("db:3306"));
    assert!(
        !text.contains("tok-very-secret") && !text.contains("pw-secret"),
        "{text}"
    );
}

/// A developer build (the `bench` feature, on by default) carries the load
/// generator: `stockd bench --help` lists its options, `--only` among them.
#[cfg(feature = "bench")]
#[test]
fn a_developer_build_offers_the_bench() {
    let (code, text) = stockd(&["bench", "--help"], &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("--only"), "{text}");
}

/// A production build (`--no-default-features`, as the Dockerfile builds it)
/// refuses `stockd bench --help` and says why, without reading the config.
#[cfg(not(feature = "bench"))]
#[test]
fn a_production_build_refuses_the_bench_and_says_why() {
    let (code, text) = stockd(
        &["bench", "--help"],
        &[("STOCKD_CONFIG_DIR", "/nonexistent")],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("not in this build"), "{text}");
    assert!(text.contains("--no-default-features"), "{text}");
}

/// `stockd bench` with `STOCKD_ENV=production` stops before it reads the
/// configuration or creates anything (not even its `--out-dir`), and says why.
#[cfg(feature = "bench")]
#[test]
fn the_bench_refuses_production_before_creating_anything() {
    let out_dir = std::env::temp_dir().join(format!("stockd-bench-prod-{}", std::process::id()));
    let out_arg = out_dir.display().to_string();
    let (code, text) = stockd(
        &["bench", "--requests", "1", "--out-dir", &out_arg],
        &[("STOCKD_ENV", "production")],
    );
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("STOCKD_ENV=production"), "{text}");
    assert!(text.contains("creates SKUs"), "the reason is named: {text}");
    assert!(!out_dir.exists(), "the bench created {}", out_dir.display());
}

/// Two benches at once on one MySQL would clean each other's namespace away
/// mid-phase: the second is refused with the reason, and the namespace is
/// free again once the first one's hold ends.
#[cfg(feature = "bench")]
#[tokio::test]
async fn a_second_bench_on_the_same_namespace_is_refused() {
    use stockd::bench::stack::namespace::Namespace;

    let id = format!("t_{}", uuid::Uuid::new_v4().simple());
    let settings = crate::helpers::test_settings(&id, &Default::default());
    // Namespace names are letters only; this one is the test's own.
    let name: String = id[2..14].bytes().map(|b| (b'a' + b % 26) as char).collect();
    let ns = Namespace::new(&settings, &name).unwrap();
    let first = ns
        .lock()
        .await
        .expect("the first bench takes the namespace");
    let second = ns.lock().await.err().expect("the second is refused");
    assert!(
        format!("{second:#}").contains("another stockd bench is running"),
        "{second:#}"
    );
    drop(first);
    // The dropped connection closes in the background; MySQL frees the lock then.
    let mut again = ns.lock().await;
    for _ in 0..50 {
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        again = ns.lock().await;
    }
    assert!(
        again.is_ok(),
        "free again after the first: {:?}",
        again.err()
    );
}
