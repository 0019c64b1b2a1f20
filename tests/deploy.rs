//! The Kubernetes base (#20): `kubectl kustomize deploy/base` renders, the objects say what an
//! operator needs (probes on /readyz and /healthz, config and keys mounted so Kubernetes' `..data`
//! swap reaches the daemon, a grace period longer than the daemon's drain, PDB and HPA on the
//! Deployment's pods), and the rendered config and keys really run the daemon.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// The rendered objects, with each Secret's data decoded (`decoded`), and the API key
/// `deploy/secrets.sh` printed. Works on a copy: the repository's own secrets are not touched.
fn render(dir: &Path) -> (Vec<Value>, String) {
    let copy = Command::new("cp")
        .args(["-r", root().join("deploy").to_str().unwrap()])
        .arg(dir)
        .status()
        .unwrap();
    assert!(copy.success());
    let deploy = dir.join("deploy");
    let secrets = deploy.join("base/secrets");
    let _ = std::fs::remove_dir_all(&secrets);
    let made = Command::new(deploy.join("secrets.sh"))
        .args(["test-app", secrets.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let out = String::from_utf8(made.stdout).unwrap();
    let key = out
        .lines()
        .find_map(|l| l.split("(shown once, not stored): ").nth(1))
        .unwrap_or_else(|| panic!("no key in {out}"))
        .to_string();
    let rendered = Command::new("kubectl")
        .args(["kustomize", deploy.join("base").to_str().unwrap()])
        .output()
        .expect("kubectl is needed to render deploy/base (kubectl kustomize)");
    assert!(rendered.status.success(), "{rendered:?}");
    let text = String::from_utf8(rendered.stdout).unwrap();
    let objects = yaml_serde::Deserializer::from_str(&text)
        .map(|doc| {
            let mut object: Value = serde::Deserialize::deserialize(doc).unwrap();
            if object["kind"] == "Secret" {
                let decoded: serde_json::Map<String, Value> = object["data"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, data)| {
                        // Block scalars wrap base64 over several lines.
                        let b64: String = data.as_str().unwrap().split_whitespace().collect();
                        let bytes =
                            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                                .unwrap();
                        (name.clone(), json!(String::from_utf8(bytes).unwrap()))
                    })
                    .collect();
                object["decoded"] = Value::Object(decoded);
            }
            object
        })
        .collect();
    (objects, key)
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

#[test]
fn the_kubernetes_base_renders_what_an_operator_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, _) = render(dir.path());
    let mut kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "Secret",
            "Service"
        ]
    );
    let deployment = one(&objects, "Deployment");
    let labels = &deployment["spec"]["selector"]["matchLabels"];
    assert_eq!(
        &deployment["spec"]["template"]["metadata"]["labels"], labels,
        "the pods carry the selector's labels"
    );
    assert_eq!(
        one(&objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        *labels
    );
    assert_eq!(one(&objects, "Service")["spec"]["selector"], *labels);
    assert!(
        deployment["spec"]["replicas"].is_null(),
        "the HPA owns the replica count"
    );
    let hpa = one(&objects, "HorizontalPodAutoscaler");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["name"],
        deployment["metadata"]["name"]
    );
    assert_eq!(hpa["spec"]["metrics"][0]["resource"]["name"], "cpu");
    assert!(hpa["spec"]["minReplicas"].as_u64().unwrap() >= 2);

    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("port {name}"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "admin");

    // The rendered config agrees with the Deployment.
    let config_map = one(&objects, "ConfigMap");
    let toml_text = config_map["data"]["railyard.toml"].as_str().unwrap();
    let config: toml::Value = toml::from_str(toml_text).unwrap();
    let server = &config["server"];
    let port_of = |listen: &toml::Value| -> u64 {
        listen
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(port_of(&server["listen"]), port("http"));
    assert_eq!(port_of(&server["grpc_listen"]), port("grpc"));
    assert_eq!(port_of(&config["admin"]["listen"]), port("admin"));
    let service_ports: Vec<&str> = one(&objects, "Service")["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["targetPort"].as_str().unwrap())
        .collect();
    assert!(
        !service_ports.contains(&"admin"),
        "the admin port stays off the Service"
    );
    let drain_ms = server["shutdown_delay_ms"].as_integer().unwrap()
        + server["shutdown_timeout_ms"].as_integer().unwrap();
    assert!(
        pod["terminationGracePeriodSeconds"].as_i64().unwrap() * 1000 > drain_ms,
        "Kubernetes must not kill a pod that is still draining"
    );

    // Config and keys are whole-directory mounts (a subPath mount never sees the `..data` swap),
    // at the paths the config names.
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().all(|m| m["subPath"].is_null()));
    let volumes = pod["volumes"].as_array().unwrap();
    let mount_of = |source: &str, name: &str| -> String {
        let volume = volumes
            .iter()
            .find(|v| v[source]["name"] == name || v[source]["secretName"] == name)
            .unwrap_or_else(|| panic!("a volume of {name}"));
        mounts.iter().find(|m| m["name"] == volume["name"]).unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        config_map["metadata"]["name"], "railyard-config",
        "no name hash: an edit is swapped in, not rolled out"
    );
    let config_dir = mount_of("configMap", "railyard-config");
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&format!("{config_dir}/railyard.toml").as_str()));
    let keys_dir = mount_of("secret", "railyard-keys");
    assert_eq!(
        config["auth"]["keys_file"].as_str().unwrap(),
        format!("{keys_dir}/keys.toml")
    );
    assert_eq!(
        config["provenance"]["keys_file"].as_str().unwrap(),
        format!("{keys_dir}/provenance-keys.toml")
    );
    // A non-root, read-only container.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    // The keys' files must be readable by the daemon's user: group-readable, and its group.
    let secret_volume = volumes.iter().find(|v| v["secret"].is_object()).unwrap();
    let mode = secret_volume["secret"]["defaultMode"]
        .as_u64()
        .unwrap_or(0o644);
    assert!(
        mode & 0o004 != 0
            || (mode & 0o040 != 0
                && pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]),
        "the Secret's files are unreadable to the daemon (mode {mode:o})"
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
}

#[test]
fn the_rendered_config_and_keys_run_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, key) = render(dir.path());
    // The image's paths, mapped onto this checkout's build; fixed ports onto free ones.
    let plugins = Path::new(env!("RAILYARD_PLUGIN_DIR"));
    let keys = dir.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    for (name, text) in one(&objects, "Secret")["decoded"].as_object().unwrap() {
        std::fs::write(keys.join(name), text.as_str().unwrap()).unwrap();
    }
    let mut text = one(&objects, "ConfigMap")["data"]["railyard.toml"]
        .as_str()
        .unwrap()
        .replace("/etc/railyard/keys", keys.to_str().unwrap())
        .replace(
            "/opt/railyard/plugins/prompt-guard.wasm",
            root()
                .join("target/plugins/components/prompt-guard.wasm")
                .to_str()
                .unwrap(),
        )
        .replace("/opt/railyard/plugins", plugins.to_str().unwrap());
    for fixed in ["0.0.0.0:8081", "0.0.0.0:8090"] {
        assert!(text.contains(fixed));
        text = text.replace(fixed, "127.0.0.1:0");
    }
    let cfg = dir.path().join("railyard.toml");
    std::fs::write(&cfg, text).unwrap();

    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "hi"}), "stop"),
    ));
    let daemon = Daemon::start(&cfg, &backend.url());
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    let path = "/v1/chat/completions";
    assert_eq!(post_as(daemon.addr, path, Some(&key), &chat).status, 200);
    assert_eq!(
        post_as(daemon.addr, path, Some("ry_wrong"), &chat).status,
        401
    );
    let admin = daemon.admin.expect("an admin listener");
    assert_eq!(get(admin, "/readyz").status, 200);
    assert_eq!(get(admin, "/healthz").status, 200);
    assert_eq!(get(admin, "/metrics").status, 200);
    assert_eq!(
        get(daemon.addr, "/metrics").status,
        404,
        "admin endpoints only on the admin port"
    );
}

/// The names in a PromQL expression: metric names (`railyard_…`, a histogram's series under
/// its family's name) and the label names it groups or matches by.
fn promql_names(expr: &str) -> (Vec<String>, Vec<String>) {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut metrics = Vec::new();
    for (i, _) in expr.match_indices("railyard_") {
        let name = word(&expr[i..]);
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|_| name.contains("duration")))
            .unwrap_or(&name)
            .to_string();
        metrics.push(family);
    }
    let mut labels = Vec::new();
    for (i, _) in expr.match_indices("by (") {
        let inner = &expr[i + 4..];
        let inner = &inner[..inner.find(')').unwrap()];
        labels.extend(inner.split(',').map(|l| l.trim().to_string()));
    }
    for (i, _) in expr.match_indices('{') {
        let inner = &expr[i + 1..];
        let inner = &inner[..inner.find('}').unwrap()];
        for matcher in inner.split(',') {
            let name = word(matcher.trim());
            if !name.is_empty() {
                labels.push(name);
            }
        }
    }
    labels.retain(|l| l != "le");
    (metrics, labels)
}

/// #51: the Grafana dashboard and the Prometheus alert rules in `deploy/monitoring/` name only
/// metrics the daemon exports, with labels its series carry.
#[test]
fn the_dashboard_and_alerts_name_what_the_daemon_exports() {
    let dir = root().join("deploy/monitoring");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("grafana-dashboard.json")).unwrap())
            .unwrap();
    let alerts: Value =
        yaml_serde::from_str(&std::fs::read_to_string(dir.join("alerts.yaml")).unwrap()).unwrap();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let title = panel["title"].as_str().unwrap().to_string();
            exprs.push((title, target["expr"].as_str().unwrap().to_string()));
        }
    }
    let rules = alerts["groups"][0]["rules"].as_array().unwrap();
    for rule in rules {
        let name = rule["alert"].as_str().unwrap().to_string();
        assert!(rule["annotations"]["summary"].is_string(), "{name}");
        exprs.push((name, rule["expr"].as_str().unwrap().to_string()));
    }
    assert!(exprs.len() >= 12, "{exprs:?}");
    let alerted: Vec<_> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
    for wanted in [
        "PluginFaulting",
        "ReloadRefused",
        "PluginSlow",
        "TenantThrottled",
    ] {
        assert!(alerted.iter().any(|a| a.ends_with(wanted)), "{alerted:?}");
    }

    // A daemon with traffic of every kind the metrics count that a request can make.
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    // A tenant running pii in shadow, for the series a shadow plugin makes.
    let cfg = bundled_with(&[(
        "[tenants.support]\n",
        "[tenants.support]\nmodes = { pii = \"shadow\" }\n",
    )]);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let ask = json!({"model": "m", "messages": [{"role": "user", "content": "mail a@b.co"}]});
    assert_eq!(post(daemon.addr, "/v1/chat/completions", &ask).status, 200);
    let support = post_as(
        daemon.addr,
        "/v1/chat/completions",
        Some("demo-support-key"),
        &ask,
    );
    assert_eq!(support.status, 200, "{}", support.body);
    assert_eq!(
        post_as(
            daemon.addr,
            "/v1/chat/completions",
            Some("no-such-key"),
            &ask
        )
        .status,
        401
    );
    let down = Daemon::start(
        &root().join("policies/railyard.toml"),
        "http://127.0.0.1:9/v1",
    );
    assert_eq!(post(down.addr, "/v1/chat/completions", &ask).status, 502);
    let mut exposition = get(daemon.addr, "/metrics").body;
    exposition.push_str(&get(down.addr, "/metrics").body);

    // Families (`# TYPE`), and the label names their series carry.
    let mut families: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            families
                .entry(rest.split(' ').next().unwrap().to_string())
                .or_default();
        } else if let Some((series, _)) = line.split_once('{') {
            let (metrics, _) = promql_names(series);
            let labels = line[series.len() + 1..line.rfind('}').unwrap()]
                .split("\",")
                .map(|kv| kv.split('=').next().unwrap().trim().to_string())
                .filter(|l| l != "le");
            if let Some(family) = metrics.first() {
                families.entry(family.clone()).or_default().extend(labels);
            }
        }
    }
    for (name, expr) in &exprs {
        let (metrics, labels) = promql_names(expr);
        assert!(!metrics.is_empty(), "{name}: {expr}");
        for m in &metrics {
            assert!(
                families.contains_key(m),
                "{name}: {m} is not exported ({expr})"
            );
        }
        // Labels are checked where the daemon has series to show them (faults and throttles
        // take a broken plugin and a full tenant).
        let known: std::collections::BTreeSet<&String> =
            metrics.iter().flat_map(|m| &families[m]).collect();
        if known.is_empty() {
            continue;
        }
        for l in &labels {
            assert!(
                known.contains(l),
                "{name}: no series of {metrics:?} has label {l} ({expr})"
            );
        }
    }
}
