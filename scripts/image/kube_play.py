"""The rendered Kubernetes base, cut to what `podman kube play` runs here.

Reads `kubectl kustomize deploy/kubernetes/base` on stdin and writes to OUT_DIR:
  play.yaml     the ConfigMap and the api and consumer Deployments, each changed
                only where this machine or podman 4.3 needs it (below)
  secret.json   the Secret `stockd-secrets` for `podman secret create`

Changes, and why (docs/operations.md, "What podman kube play cannot take"):
  - names get RUN_ID and one replica each: the run must not meet another's pods;
  - the image is the one under test (IMAGE, `make image`'s stockd:local);
  - hostNetwork, and the binds moved to free loopback ports: the shared
    services listen on this machine's loopback; the `ports` go (podman refuses
    port mappings on the host network) and the probes name the numbers;
  - the run's key and queue prefixes: its data is its own;
  - the ConfigMap holds config/base.yaml beside production.yaml and is mounted
    as the whole config dir: podman 4.3 mounts a `subPath` of a ConfigMap as a
    directory, not as the file;
  - STOCKD__AUTH__CLIENTS as a value: podman 4.3 cannot read a secretKeyRef
    env from a Secret it stores as a file volume;
  - the Secret's data raw, not base64: podman 4.3 writes data values to the
    volume undecoded.

Usage: kube_play.py OUT_DIR RUN_ID ENV_JSON < rendered.yaml
ENV_JSON: {"secrets": {key: value}, "clients": "...", "ports": {...}, "config_dir": "...", "image": "..."}
"""

import json
import pathlib
import sys

import yaml


def set_env(container, name, value):
    env = [e for e in container.get("env", []) if e["name"] != name]
    env.append({"name": name, "value": value})
    container["env"] = env


def adapt(deployment, run_id, role, ports, clients, image):
    deployment["metadata"]["name"] = f"{run_id}-{deployment['metadata']['name']}"
    deployment["spec"]["replicas"] = 1
    pod = deployment["spec"]["template"]["spec"]
    pod["hostNetwork"] = True
    container = pod["containers"][0]
    container["image"] = image
    set_env(container, "STOCKD__AUTH__CLIENTS", clients)
    set_env(container, "STOCKD__REDIS__KEY_PREFIX", f"{run_id}:")
    set_env(container, "STOCKD__AMQP__QUEUE_PREFIX", f"{run_id}.")
    by_name = {"http": "STOCKD__HTTP__BIND", "admin": "STOCKD__ADMIN__BIND",
               "metrics": "STOCKD__METRICS__BIND"}
    numbers = {}
    for port in container.pop("ports"):
        numbers[port["name"]] = ports[f"{role}.{port['name']}"]
        set_env(container, by_name[port["name"]], f"127.0.0.1:{numbers[port['name']]}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        get["port"] = numbers[get["port"]]
    for mount in container["volumeMounts"]:
        if mount["name"] == "config":
            mount.pop("subPath")
            mount["mountPath"] = "/etc/stockd/config"


def main():
    out_dir, run_id, env = pathlib.Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    kept = []
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            config_dir = pathlib.Path(env["config_dir"])
            obj["data"]["base.yaml"] = (config_dir / "base.yaml").read_text()
            kept.append(obj)
        elif obj["kind"] == "Deployment" and obj["metadata"]["name"] in ("stockd-api", "stockd-consumer"):
            role = obj["metadata"]["name"].removeprefix("stockd-")
            adapt(obj, run_id, role, env["ports"], env["clients"], env["image"])
            kept.append(obj)
    assert len(kept) == 3, f"want the ConfigMap and two Deployments, got {len(kept)}"
    (out_dir / "play.yaml").write_text(yaml.safe_dump_all(kept, sort_keys=False))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stockd-secrets"},
              "type": "Opaque", "data": env["secrets"]}
    (out_dir / "secret.json").write_text(json.dumps(secret))
    print(next(o["metadata"]["name"] for o in kept if o["kind"] == "ConfigMap"))


main()
