//! The binary's command line: roles, config check and print, `stockd bench`
//! pointing at `stockd-bench`; and `stockd-bench`'s own start-up refusals.

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

/// The load generator is not part of the product: `stockd bench --help` (or
/// any other bench call) fails without reading the config and names
/// `stockd-bench`.
#[test]
fn stockd_bench_points_at_the_stockd_bench_binary() {
    let (code, text) = stockd(
        &["bench", "--help"],
        &[("STOCKD_CONFIG_DIR", "/nonexistent")],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("`stockd-bench`"), "{text}");
}

/// Two benches at once on one MySQL would clean each other's namespace away
/// mid-phase: the second is refused with the reason, and the namespace is
/// free again once the first one's hold ends.
#[tokio::test]
async fn a_second_bench_on_the_same_namespace_is_refused() {
    use stockd_bench::stack::namespace::Namespace;

    let id = format!("t_{}", uuid::Uuid::new_v4().simple());
    let settings = crate::helpers::test_settings(&id, &Default::default());
    // Namespace names are letters only; this one is the test's own.
    let name: String = id[2..14].bytes().map(|b| (b'a' + b % 26) as char).collect();
    let stockd_exe = env!("CARGO_BIN_EXE_stockd").into();
    let ns = Namespace::new(&settings, &name, stockd_exe).unwrap();
    let first = ns
        .lock()
        .await
        .expect("the first bench takes the namespace");
    let second = ns.lock().await.err().expect("the second is refused");
    assert!(
        format!("{second:#}").contains("another stockd-bench is running"),
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
