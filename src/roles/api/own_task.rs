//! A request's service chain (the guards, the handler) on a task of its own,
//! on the worker's thread.
//!
//! Why: actix's HTTP/1 dispatcher polls the service future it holds each time
//! that future is woken, and each of its polls runs the connection's decoder
//! too (a ~3 KB `memset` of the header index, a read attempt). A reservation's
//! handler is woken several times (the lane's answer, the broker's confirm,
//! …), so the dispatcher ran four times a request where it needs one or two:
//! under callgrind 16,026 decodes for 2,000 requests (BENCHMARKS.md, "What
//! the api still spends"). On a task of its own the handler's wakes poll the
//! task; the dispatcher is polled once, when the answer is ready.
//!
//! What stays as it was: the task runs on the same thread (`spawn_local`:
//! the worker's own Redis link, `local_link.rs`, still applies); dropping the
//! answer's future (a client gone, the server stopping) aborts the task, so
//! nothing of a request runs on after its connection gave it up, as when the
//! dispatcher dropped the chain itself. A handler that panics answers 503
//! `UNAVAILABLE` (its outcome is unknown: the contract's retry with the same
//! id applies) instead of taking the connection down with it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::rt::task::JoinHandle;

use super::middleware::Answer;
use super::problem::ApiError;

/// `chain` started on a task of its own; awaiting this awaits its answer.
pub fn run<F>(chain: F) -> OwnTask
where
    F: Future<Output = Answer> + 'static,
{
    OwnTask(actix_web::rt::spawn(chain))
}

/// The answer of a request's chain running on its own task. Dropped before
/// the answer, it aborts the task.
pub struct OwnTask(JoinHandle<Answer>);

impl Future for OwnTask {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok(answer) => answer,
            Err(err) => {
                tracing::error!(error = %err, "http.request: the handler's task failed");
                Err(
                    ApiError::Unavailable("the request failed; retry it with the same id".into())
                        .into(),
                )
            }
        })
    }
}

impl Drop for OwnTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use actix_web::dev::ServiceResponse;
    use actix_web::test::TestRequest;
    use actix_web::HttpResponse;

    use super::*;

    fn answer() -> Answer {
        let req = TestRequest::default().to_http_request();
        Ok(ServiceResponse::new(req, HttpResponse::Ok().finish()))
    }

    #[actix_web::test]
    async fn the_chains_answer_is_the_tasks() {
        let response = run(async { answer() }).await.unwrap();
        assert_eq!(response.status(), 200);
    }

    #[actix_web::test]
    async fn a_chain_that_panics_answers_503() {
        let err = run(async {
            if true {
                panic!("a handler's bug");
            }
            answer()
        })
        .await
        .unwrap_err();
        assert_eq!(err.as_response_error().status_code(), 503);
    }

    /// A request its client gave up runs no further: the step after the
    /// await never happens.
    #[actix_web::test]
    async fn dropping_the_answer_stops_the_chain() {
        let went_on = Arc::new(AtomicBool::new(false));
        let flag = went_on.clone();
        let task = run(async move {
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
            answer()
        });
        actix_web::rt::time::sleep(Duration::from_millis(5)).await;
        drop(task);
        actix_web::rt::time::sleep(Duration::from_millis(150)).await;
        assert!(!went_on.load(Ordering::SeqCst));
    }
}
