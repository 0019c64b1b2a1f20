//! Readiness tells the truth (#66): `/readyz` names the backend, the state store and the guard
//! models that are down, is not ready while a backend or the store is, and the daemon says in
//! its log once when each goes and once when it comes back; a caller of a backend that is down
//! is not shown its address.

use crate::http::*;
use crate::state::RedisServer;
use crate::support::*;
use serde_json::json;
use std::net::TcpListener;
use std::time::Duration;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn readyz_names_what_is_down_and_the_log_says_it_once_each_way() {
    let (backend_port, redis_port, guard_port) = (free_port(), free_port(), free_port());
    let cfg = write_config(&format!(
        "[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{redis_port}/0\"\ntimeout_ms = 200\n\n\
         [[guard_models]]\nname = \"judge\"\nkind = \"classifier\"\nurl = \"http://127.0.0.1:{guard_port}\"\n\n{}",
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ));
    let daemon = Daemon::start_logged(
        &cfg.path,
        &["--backend", &format!("http://127.0.0.1:{backend_port}/v1")],
    );
    let mut ready = get(daemon.addr, "/readyz");
    eventually("the first probe", || {
        ready = get(daemon.addr, "/readyz");
        ready.body.contains("the state store")
    });
    assert_eq!(ready.status, 503, "{}", ready.body);
    for name in [
        "the model backend",
        "the state store",
        "guard model 'judge'",
    ] {
        assert!(
            ready.body.contains(&format!("{name} is unreachable since")),
            "{}",
            ready.body
        );
    }
    // The admin view the console reads names them too, with why.
    let down = get(daemon.addr, "/v1/policies").json()["down"].clone();
    assert_eq!(down.as_array().unwrap().len(), 3, "{down}");

    // A caller of the backend that is down: a 502 without the backend's address.
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert!(
        !reply.body.contains(&backend_port.to_string()),
        "{}",
        reply.body
    );
    assert!(!reply.body.contains("127.0.0.1"), "{}", reply.body);

    // Everything comes up; the guard model stays down, which leaves the daemon ready.
    let backend = MockBackend::start_on(
        backend_port,
        Script::Json(
            200,
            completion(json!({"role": "assistant", "content": "hi"}), "stop"),
        ),
    );
    let _redis = RedisServer::on(redis_port);
    eventually("ready again", || get(daemon.addr, "/readyz").status == 200);
    let ready = get(daemon.addr, "/readyz");
    assert!(
        ready.body.contains("guard model 'judge' is unreachable"),
        "{}",
        ready.body
    );
    assert!(!ready.body.contains("the model backend"), "{}", ready.body);
    std::thread::sleep(Duration::from_secs(3)); // more probe rounds: nothing more said
    let said = |what: &str| {
        daemon
            .messages()
            .iter()
            .filter(|m| m.starts_with(what))
            .count()
    };
    for name in [
        "the model backend",
        "the state store",
        "guard model 'judge'",
    ] {
        assert_eq!(said(&format!("{name} is unreachable")), 1, "{name}");
    }
    assert_eq!(said("the model backend is reachable again"), 1);
    assert_eq!(said("the state store is reachable again"), 1);
    assert_eq!(said("guard model 'judge' is reachable again"), 0);
    drop(backend);
}
