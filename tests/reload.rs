//! Hot reload: swaps are atomic and drop nothing; broken changes leave the old set serving and
//! say why; every way files really change triggers exactly one reload.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Replace `path` the way editors and deploy tools do: write a temp file, rename it over.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(plugin(name)).unwrap()
}

fn config_for(plugin_file: &str) -> String {
    format!("[auth]\nopen = true\n\n[[plugins]]\nname = \"gate\"\npath = \"{plugin_file}\"\nrails = [\"input\"]\n")
}

fn verdict(addr: std::net::SocketAddr) -> (u16, String) {
    let r = post(
        addr,
        "/v1/check",
        &json!({"rail": "input", "messages": [{"role": "user", "content": "hi"}]}),
    );
    let v = if r.status == 200 {
        r.json()["verdict"].as_str().unwrap_or("").to_string()
    } else {
        r.body.clone()
    };
    (r.status, v)
}

fn reloads(addr: std::net::SocketAddr, result: &str) -> u64 {
    let text = get(addr, "/metrics").body;
    let key = format!("railyard_reloads_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0)
}

fn policies(addr: std::net::SocketAddr) -> Value {
    get(addr, "/v1/policies").json()
}

struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    plugin: PathBuf,
}

fn setup(initial: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("gate.wasm");
    std::fs::write(&plugin, wasm(initial)).unwrap();
    let config = dir.path().join("railyard.toml");
    std::fs::write(&config, config_for("gate.wasm")).unwrap();
    Setup {
        _dir: dir,
        config,
        plugin,
    }
}

#[test]
fn replacing_a_plugin_under_load_drops_no_request() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&s.config, &backend.url());
    let addr = daemon.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    seen.push(verdict(addr));
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    replace(&s.plugin, &wasm("block_all"));
    eventually("the new plugin decides", || verdict(addr).1 == "block");
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.join().unwrap());
    }
    assert!(all.len() > 20, "load was applied: {} requests", all.len());
    let failed: Vec<_> = all.iter().filter(|(status, _)| *status != 200).collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {:?}",
        failed.len(),
        all.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(
        all.iter().all(|(_, v)| v == "allow" || v == "block"),
        "only whole sets decide"
    );
    assert!(all.iter().any(|(_, v)| v == "allow") && all.iter().any(|(_, v)| v == "block"));
    let p = policies(addr);
    assert_eq!(p["revision"]["number"], 2);
    assert_eq!(p["plugins"][0]["name"], "block-all");
    assert!(p["last_reload_error"].is_null());
}

#[test]
fn broken_changes_keep_the_old_set_serving_and_say_why() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&s.config, &backend.url());
    let addr = daemon.addr;
    let hash = policies(addr)["revision"]["hash"].clone();

    type Case<'a> = (&'a str, Box<dyn Fn() + 'a>, &'a str);
    let broken: [Case; 4] = [
        (
            "garbage wasm",
            Box::new(|| replace(&s.plugin, b"\0asm\x0d\0\x01\0garbage")),
            "is not a valid WebAssembly component",
        ),
        (
            "wrong contract",
            Box::new(|| replace(&s.plugin, &wasm("wrong_version"))),
            "railyard:policy@0.3.0",
        ),
        (
            "config syntax",
            Box::new(|| replace(&s.config, b"[[plugins]\nname = \"gate\"\n")),
            "railyard.toml:1",
        ),
        (
            "missing plugin",
            Box::new(|| replace(&s.config, config_for("nowhere.wasm").as_bytes())),
            "nowhere.wasm",
        ),
    ];
    for (i, (what, break_it, message)) in broken.iter().enumerate() {
        let errors = reloads(addr, "error");
        let number = policies(addr)["revision"]["number"].clone();
        break_it();
        eventually(&format!("{what}: the error is visible"), || {
            let p = policies(addr);
            p["last_reload_error"]["error"]
                .as_str()
                .is_some_and(|e| e.contains(message))
        });
        assert!(
            reloads(addr, "error") > errors,
            "{what}: counted in /metrics"
        );
        assert_eq!(
            verdict(addr),
            (200, "allow".to_string()),
            "{what}: the old set still serves"
        );
        let p = policies(addr);
        assert_eq!(p["revision"]["number"], number, "{what}");
        assert_eq!(
            p["revision"]["hash"], hash,
            "{what}: the same policies as at start"
        );
        // Put things back for the next case (a fixed config is reloaded normally).
        if i == 2 || i == 3 {
            replace(&s.config, config_for("gate.wasm").as_bytes());
        } else {
            replace(&s.plugin, &wasm("allow_all"));
        }
        eventually(&format!("{what}: fixed"), || {
            policies(addr)["last_reload_error"].is_null()
        });
    }
    replace(&s.plugin, &wasm("block_all"));
    eventually("a good change after broken ones loads", || {
        verdict(addr).1 == "block"
    });
}

fn assert_exactly_one_reload(addr: std::net::SocketAddr, what: &str, change: impl FnOnce()) {
    let before = reloads(addr, "success");
    let errors = reloads(addr, "error");
    change();
    eventually(&format!("{what}: reloaded"), || {
        reloads(addr, "success") == before + 1
    });
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        reloads(addr, "success"),
        before + 1,
        "{what}: exactly one reload"
    );
    assert_eq!(
        reloads(addr, "error"),
        errors,
        "{what}: no failed reload on the way"
    );
}

#[test]
fn each_way_files_change_triggers_exactly_one_reload() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&s.config, &backend.url());
    let addr = daemon.addr;

    assert_exactly_one_reload(addr, "rename over", || {
        replace(&s.plugin, &wasm("block_all"))
    });
    assert_eq!(verdict(addr).1, "block");
    assert_exactly_one_reload(addr, "delete and recreate", || {
        std::fs::remove_file(&s.plugin).unwrap();
        std::fs::write(&s.plugin, wasm("allow_all")).unwrap();
    });
    assert_eq!(verdict(addr).1, "allow");
    assert_exactly_one_reload(addr, "config edited in place", || {
        std::fs::write(&s.config, format!("# edited\n{}", config_for("gate.wasm"))).unwrap();
    });
}

/// #51: a config edit that names a plugin in a directory not watched before; rebuilding that
/// plugin afterwards reloads it (the new directory was never watched).
#[test]
fn a_plugin_in_a_directory_a_config_edit_introduced_is_watched() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&s.config, &backend.url());
    let addr = daemon.addr;
    let build = s.config.parent().unwrap().join("build");
    std::fs::create_dir(&build).unwrap();
    let rebuilt = build.join("gate.wasm");
    std::fs::write(&rebuilt, wasm("allow_all")).unwrap();
    assert_exactly_one_reload(addr, "config names build/gate.wasm", || {
        replace(&s.config, config_for("build/gate.wasm").as_bytes())
    });
    assert_eq!(verdict(addr).1, "allow");
    assert_exactly_one_reload(addr, "build/gate.wasm rebuilt", || {
        replace(&rebuilt, &wasm("block_all"))
    });
    assert_eq!(verdict(addr).1, "block");
}

/// How many times the daemon's `railyard-watch` thread has gone to sleep and been woken.
fn watcher_wakeups(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "railyard-watch" {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap();
        return status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|n| n.trim().parse().unwrap())
            .unwrap();
    }
    panic!("no railyard-watch thread in process {pid}");
}

/// Reading the watched files changes nothing, so the watcher sleeps through it. (It once took
/// inotify's report of a file opened for a change, and its own check opens the config: at rest
/// it woke ten times a second for as long as the daemon ran.)
#[test]
fn reading_the_watched_files_wakes_no_check() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&s.config, &backend.url());
    let addr = daemon.addr;
    std::fs::read(&s.config).unwrap();
    std::fs::read(&s.plugin).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = watcher_wakeups(daemon.pid());
    std::thread::sleep(Duration::from_millis(1500));
    let woken = watcher_wakeups(daemon.pid()) - before;
    assert!(woken <= 1, "the watcher woke {woken} times at rest");
    assert_eq!(reloads(addr, "success"), 0);
    // A change still reloads.
    assert_exactly_one_reload(addr, "rename over", || {
        replace(&s.plugin, &wasm("block_all"))
    });
    assert_eq!(verdict(addr).1, "block");
}

#[test]
fn kubernetes_style_symlink_swap_triggers_exactly_one_reload() {
    // dir/railyard.toml -> ..data/railyard.toml, dir/gate.wasm -> ..data/gate.wasm,
    // ..data -> ..v1; an update writes ..v2 and swaps ..data atomically.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let version = |name: &str, plugin_name: &str| {
        std::fs::create_dir(d.join(name)).unwrap();
        std::fs::write(d.join(name).join("railyard.toml"), config_for("gate.wasm")).unwrap();
        std::fs::write(d.join(name).join("gate.wasm"), wasm(plugin_name)).unwrap();
    };
    version("..v1", "allow_all");
    std::os::unix::fs::symlink("..v1", d.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/railyard.toml", d.join("railyard.toml")).unwrap();
    std::os::unix::fs::symlink("..data/gate.wasm", d.join("gate.wasm")).unwrap();
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&d.join("railyard.toml"), &backend.url());
    assert_eq!(verdict(daemon.addr).1, "allow");
    assert_exactly_one_reload(daemon.addr, "symlink swap", || {
        version("..v2", "block_all");
        std::os::unix::fs::symlink("..v2", d.join("..data_tmp")).unwrap();
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    });
    assert_eq!(verdict(daemon.addr).1, "block");
}

#[test]
fn sighup_and_admin_api_reload_when_watching_is_off() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start_with(&s.config, &["--backend", &backend.url(), "--no-watch"]);
    let addr = daemon.addr;
    replace(&s.plugin, &wasm("block_all"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        verdict(addr).1,
        "allow",
        "--no-watch: file changes alone do nothing"
    );

    let r = request(addr, "POST", "/v1/admin/reload", &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["revision"]["number"], 2);
    assert_eq!(verdict(addr).1, "block");

    replace(&s.config, b"not = [valid");
    let r = request(addr, "POST", "/v1/admin/reload", &[], b"");
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["reloaded"], false);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("railyard.toml:1"),
        "{}",
        r.body
    );
    assert_eq!(r.json()["revision"]["number"], 2);

    replace(&s.config, config_for("gate.wasm").as_bytes());
    replace(&s.plugin, &wasm("allow_all"));
    daemon.signal("HUP");
    eventually("SIGHUP reloads", || {
        policies(addr)["revision"]["number"] == 3
    });
    assert_eq!(verdict(addr).1, "allow");
}

/// Settings read at start-up only (#15): a reload that changes them is applied for everything
/// else and says which settings need a restart, instead of silently ignoring them.
#[test]
fn a_reload_that_changes_startup_settings_says_they_need_a_restart() {
    let s = setup("allow_all");
    let backend = MockBackend::start(Script::Hang);
    let d = Daemon::start(&s.config, &backend.url());
    assert_eq!(policies(d.addr)["restart_needed"], json!([]));
    replace(
        &s.config,
        format!(
            "[backend]\ntimeout_ms = 1234\n\n[admin]\nlisten = \"127.0.0.1:1\"\n\n{}",
            config_for("gate.wasm")
        )
        .as_bytes(),
    );
    let r = request(d.addr, "POST", "/v1/admin/reload", &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    let needed = policies(d.addr)["restart_needed"].to_string();
    assert!(
        needed.contains("backend.timeout_ms (60000 → 1234)"),
        "{needed}"
    );
    assert!(
        needed.contains("admin.listen (unset → 127.0.0.1:1)"),
        "{needed}"
    );
    assert_eq!(verdict(d.addr), (200, "allow".into()), "still serving");
}

#[test]
fn a_plugin_reached_through_another_directory_and_a_refused_edit_leave_the_watch_in_place() {
    // The plugin's path reaches the config's directory through another (`plugins/../`), then an
    // edit naming another plugin is refused. (Two names of one directory were two watches of
    // one inode: letting the refused edit's unwanted name go ended the config directory's.) Later edits of the config and of the keys file still apply: a key
    // removed from the keys file stops working, with no watch found lost on the way.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("plugins")).unwrap();
    std::fs::write(d.join("gate.wasm"), wasm("allow_all")).unwrap();
    let keys = |which: &[(&str, &str)]| {
        which
            .iter()
            .map(|(k, p)| key_entry("keys", k, p, None))
            .collect::<String>()
    };
    std::fs::write(
        d.join("keys.toml"),
        keys(&[("alice-key", "alice"), ("bob-key", "bob")]),
    )
    .unwrap();
    let good = "[auth]\nkeys_file = \"keys.toml\"\n\n[[plugins]]\nname = \"gate\"\npath = \"plugins/../gate.wasm\"\nrails = [\"input\"]\n";
    std::fs::write(d.join("railyard.toml"), good).unwrap();
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "hi"}), "stop"),
    ));
    let daemon = Daemon::start_logged(&d.join("railyard.toml"), &["--backend", &backend.url()]);
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let status = |key: &str| post_as(daemon.addr, "/v1/chat/completions", Some(key), &chat).status;
    assert_eq!(status("bob-key"), 200);
    // Refused: it parses, but names a plugin that is not there (in the config's directory, so
    // `plugins/..` is no longer wanted).
    replace(
        &d.join("railyard.toml"),
        good.replace("plugins/../gate.wasm", "missing.wasm")
            .as_bytes(),
    );
    eventually("the refused edit", || reloads(daemon.addr, "error") == 1);
    replace(&d.join("railyard.toml"), good.as_bytes());
    eventually("the good config again", || {
        reloads(daemon.addr, "success") >= 1
    });
    replace(
        &d.join("keys.toml"),
        keys(&[("alice-key", "alice")]).as_bytes(),
    );
    eventually("bob's key revoked", || status("bob-key") == 401);
    assert_eq!(status("alice-key"), 200);
    let lost = daemon
        .messages()
        .iter()
        .any(|m| m.contains("a watch was lost"));
    assert!(!lost, "the watch was lost and found again by the poll");
}
