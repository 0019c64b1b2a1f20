//! The data plane's front: a model door's `POST` goes straight to its pipeline
//! ([`proxy::handle`]), every other request through the router. For the doors, the router's
//! layers did nothing the front does not do here (the request's id and its echo, the request
//! counted), but each request paid for them: the route's service cloned and boxed, the
//! middleware's future boxed, the headers copied for the handler, the id and the tenant passed
//! through the request's and the response's extension maps (BENCHMARKS.md §38).

use super::{proxy, App};
use crate::codec::chat::Chat;
use crate::codec::messages::Messages;
use crate::codec::responses::Responses;
use crate::codec::Door;
use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The service a data-plane connection is served with.
#[derive(Clone)]
pub struct Front {
    app: Arc<App>,
    router: TowerToHyperService<Router>,
}

impl Front {
    /// The doors of `app` in front of `router` (which has them too, for requests that are not
    /// a `POST`: their 405).
    pub fn new(app: Arc<App>, router: Router) -> Front {
        Front {
            app,
            router: TowerToHyperService::new(router),
        }
    }
}

/// The model doors (each at its route's path, also the name its requests are counted under).
const DOORS: [Door; 3] = [Door::Chat, Door::Responses, Door::Messages];

/// The model door a request is for, if it is a `POST` to one.
fn door_of(request: &Request<Incoming>) -> Option<Door> {
    if request.method() != Method::POST {
        return None;
    }
    let path = request.uri().path();
    DOORS.into_iter().find(|d| d.route().1 == path)
}

impl Service<Request<Incoming>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        match door_of(&request) {
            Some(door) => Box::pin(direct(self.app.clone(), door, request)),
            None => Box::pin(self.router.call(request)),
        }
    }
}

/// A model door's request: what the router's request-id layer and the door's route do, in one
/// function.
async fn direct(
    app: Arc<App>,
    door: Door,
    request: Request<Incoming>,
) -> Result<Response, Infallible> {
    let (parts, body) = request.into_parts();
    let (id, echo) = app.request_id(&parts.headers);
    let body = Body::new(body);
    let (mut response, tenant) = match door {
        Door::Chat => proxy::handle::<Chat>(&app, id, &parts.headers, body).await,
        Door::Responses => proxy::handle::<Responses>(&app, id, &parts.headers, body).await,
        // `DOORS` holds no other.
        _ => proxy::handle::<Messages>(&app, id, &parts.headers, body).await,
    };
    app.answered(door.route().1, echo, &tenant.0, &mut response);
    Ok(response)
}
