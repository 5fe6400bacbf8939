//! The driver: workers that send requests under a plan ([`load`]), the HTTP/1.1
//! client they use ([`http_client`]), the stockd API calls and request makers on
//! top of it ([`api`]; orders: [`order_poster`]), a drop's crowd waiting for
//! the opening ([`crowd`]), the bytes under it
//! ([`transport`]: TCP, or TLS to the registered `https://` target,
//! [`tls_target`]), and the progress line ([`progress`]).

pub mod api;
pub mod crowd;
pub mod http_client;
pub mod load;
pub mod order_poster;
pub mod progress;
pub mod tls_target;
pub mod transport;
