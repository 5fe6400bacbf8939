//! The Kubernetes manifests (`deploy/kubernetes`) are real: the production
//! overlay renders with `kubectl kustomize`, the render passes
//! `kubernetes-validate --strict` against several Kubernetes versions, and what
//! the schemas cannot know is checked here — probe paths and ports agree with
//! `config/production.yaml` and the env binds, the grace period covers the
//! drain, every container runs locked down, the ConfigMap's file is the repo's.
//! (That the manifests also run is `make test-image`'s `podman kube play`.)

use std::process::Command;

use serde_yaml::Value;

use crate::helpers::success_and_output;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Oldest and newest minor versions still supported upstream, and one between:
/// the manifests use no API removed or added in that span.
const VERSIONS: [&str; 3] = ["1.27", "1.31", "1.35"];

fn tool(args: &[&str]) -> String {
    let out = Command::new(format!("{ROOT}/scripts/container-tools.sh"))
        .args(args)
        .output()
        .unwrap();
    let (ok, text) = success_and_output(&out);
    assert!(ok, "scripts/container-tools.sh {args:?}: {text}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// `kubectl kustomize` of the production overlay, as one YAML stream.
fn render() -> String {
    tool(&["kube"]);
    let out = Command::new("kubectl")
        .args([
            "kustomize",
            &format!("{ROOT}/deploy/kubernetes/overlays/production"),
        ])
        .output()
        .unwrap();
    let (ok, text) = success_and_output(&out);
    assert!(ok, "kubectl kustomize: {text}");
    String::from_utf8(out.stdout).unwrap()
}

fn objects(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn port_of(bind: &str) -> u64 {
    bind.rsplit(':').next().unwrap().parse().unwrap()
}

fn config(file: &str) -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/config/{file}")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// Every built-in object of the render passes the strict schemas of each of
/// [`VERSIONS`]; the one custom resource (PodMonitor) has no schema there and
/// is checked by hand below.
#[test]
fn the_production_overlay_validates_against_three_kubernetes_versions() {
    let dir = crate::servers::process::TempDir::new("k8s");
    let file = dir.path.join("production.yaml");
    std::fs::write(&file, render()).unwrap();
    let validate = tool(&["validate"]);
    for version in VERSIONS {
        let out = Command::new(&validate)
            .args(["--strict", "-k", version])
            .arg(&file)
            .output()
            .unwrap();
        let (ok, text) = success_and_output(&out);
        assert!(ok, "kubernetes-validate -k {version}: {text}");
        let passed = text.lines().filter(|l| l.contains(" passed for ")).count();
        assert_eq!(
            passed, 11,
            "11 built-in objects must pass ({version}): {text}"
        );
        let unchecked: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("Couldn't find schema"))
            .collect();
        assert!(
            unchecked.len() == 1 && unchecked[0].contains("PodMonitor"),
            "only the PodMonitor may lack a schema: {text}"
        );
    }
}

/// What each role's pod template must hold: probes on the port its config
/// binds, locked-down containers, a grace period above the drain.
fn check_deployment(obj: &Value, grace_secs: u64, http_port: u64) {
    let name = obj["metadata"]["name"].as_str().unwrap();
    let pod = &obj["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let env = |key: &str| {
        let vars = c["env"].as_sequence().unwrap();
        vars.iter()
            .find(|v| v["name"] == key)
            .and_then(|v| v["value"].as_str().map(str::to_string))
    };
    let (port_name, port) = if name == "stockd-api" {
        ("http", http_port)
    } else {
        ("metrics", port_of(&env("STOCKD__METRICS__BIND").unwrap()))
    };
    let ports = c["ports"].as_sequence().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == port_name && p["containerPort"].as_u64() == Some(port)),
        "{name}: no port {port_name}={port}: {ports:?}"
    );
    for (probe, path) in [
        ("startupProbe", "/livez"),
        ("livenessProbe", "/livez"),
        ("readinessProbe", "/readyz"),
    ] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{name} {probe}");
        assert_eq!(get["port"], port_name, "{name} {probe}");
    }
    let sc = &c["securityContext"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
    assert_eq!(sc["capabilities"]["drop"][0], "ALL", "{name}");
    assert!(c["resources"]["requests"]["memory"].is_string(), "{name}");
    assert!(c["resources"]["limits"]["memory"].is_string(), "{name}");
    let pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
        .as_sequence()
        .map(|cmd| cmd[1].as_str().unwrap().parse::<u64>().unwrap())
        .unwrap_or(0);
    let period = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        period > pre_stop + grace_secs,
        "{name}: terminationGracePeriodSeconds {period} <= preStop {pre_stop} + http.shutdown_grace_secs {grace_secs}"
    );
    for var in ["STOCKD__MYSQL__URL_FILE", "STOCKD__ADMIN__TOKEN_FILE"] {
        assert!(
            env(var).unwrap().starts_with("/run/secrets/stockd/"),
            "{name}: {var} is not a mounted secret file"
        );
    }
}

/// The probes, ports and drain bound agree with the shipped configuration,
/// the api has its HPA, PDB and preStop, the admin port is admitted from the
/// operations namespace only, and the PodMonitor scrapes named ports that exist.
#[test]
fn the_manifests_agree_with_the_production_config() {
    let production = config("production.yaml");
    let base = config("base.yaml");
    let http_port = port_of(production["http"]["bind"].as_str().unwrap());
    let grace = base["http"]["shutdown_grace_secs"].as_u64().unwrap();
    let objs = objects(&render());
    let kinds: Vec<String> = objs
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for want in [
        "HorizontalPodAutoscaler/stockd-api",
        "PodDisruptionBudget/stockd-api",
        "Service/stockd-api",
        "Service/stockd-api-admin",
        "NetworkPolicy/stockd",
        "PodMonitor/stockd",
        "Job/stockd-migrate",
    ] {
        assert!(kinds.iter().any(|k| k == want), "{want} missing: {kinds:?}");
    }
    let mut port_names = Vec::new();
    let deployments: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Deployment").collect();
    assert_eq!(deployments.len(), 4, "one Deployment per role: {kinds:?}");
    for d in &deployments {
        check_deployment(d, grace, http_port);
        for p in d["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_sequence()
            .unwrap()
        {
            port_names.push(p["name"].as_str().unwrap().to_string());
        }
        assert_eq!(d["metadata"]["namespace"], "stockd");
    }
    let api = deployments
        .iter()
        .find(|d| d["metadata"]["name"] == "stockd-api")
        .unwrap();
    assert!(api["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"].is_mapping());
    let monitor = objs.iter().find(|o| o["kind"] == "PodMonitor").unwrap();
    for endpoint in monitor["spec"]["podMetricsEndpoints"]
        .as_sequence()
        .unwrap()
    {
        let port = endpoint["port"].as_str().unwrap();
        assert!(
            port_names.iter().any(|p| p == port),
            "PodMonitor port {port}"
        );
        assert_eq!(endpoint["path"], "/metrics");
    }
    let policy = objs.iter().find(|o| o["kind"] == "NetworkPolicy").unwrap();
    let admin_rule = &policy["spec"]["ingress"][1];
    assert_eq!(admin_rule["ports"][0]["port"], 8081);
    assert_eq!(
        admin_rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "operations"
    );
    let shipped = std::fs::read_to_string(format!("{ROOT}/config/production.yaml")).unwrap();
    let copy =
        std::fs::read_to_string(format!("{ROOT}/deploy/kubernetes/base/production.yaml")).unwrap();
    assert_eq!(
        copy, shipped,
        "deploy/kubernetes/base/production.yaml differs from config/production.yaml: copy it over"
    );
}

/// The job names the alert rules select on (`job="stockd-consumer"` …) are the
/// ones the PodMonitor gives each role's pods. Without a relabeling the
/// Prometheus Operator names a PodMonitor's job `<namespace>/<monitor>`, so an
/// alert like `StockdNoConsumer` (`absent(up{job="stockd-consumer"} == 1)`)
/// would fire for ever on the shipped Kubernetes setup.
#[test]
fn the_podmonitor_names_the_scrape_jobs_the_alert_rules_use() {
    let objs = objects(&render());
    let monitor = objs.iter().find(|o| o["kind"] == "PodMonitor").unwrap();
    let components: Vec<String> = objs
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(|d| {
            d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
                .as_str()
                .expect("every role's pods carry their component label")
                .to_string()
        })
        .collect();
    let mut jobs = Vec::new();
    for endpoint in monitor["spec"]["podMetricsEndpoints"]
        .as_sequence()
        .unwrap()
    {
        let relabel = endpoint["relabelings"]
            .as_sequence()
            .and_then(|r| r.iter().find(|r| r["targetLabel"] == "job"));
        let port = endpoint["port"].as_str().unwrap();
        let Some(relabel) = relabel else {
            panic!(
                "PodMonitor endpoint {port}: no relabeling sets `job`, so it is <namespace>/stockd"
            );
        };
        assert_eq!(
            relabel["sourceLabels"][0], "__meta_kubernetes_pod_label_app_kubernetes_io_component",
            "endpoint {port}"
        );
        let replacement = relabel["replacement"].as_str().unwrap();
        jobs.extend(components.iter().map(|c| replacement.replace("$1", c)));
    }
    let alerts = std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/alerts.yml")).unwrap();
    let mut named = 0;
    for (i, _) in alerts.match_indices("job=\"") {
        let rest = &alerts[i + 5..];
        let job = &rest[..rest.find('"').unwrap()];
        named += 1;
        assert!(
            jobs.iter().any(|j| j == job),
            "alerts.yml selects job {job:?}; the PodMonitor gives {jobs:?}"
        );
    }
    assert!(
        named > 0,
        "alerts.yml names no job: the check has nothing to hold"
    );
}
