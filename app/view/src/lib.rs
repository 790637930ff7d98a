//! The dashboard's pure view logic: what the app's pages and canvases
//! compute without touching the DOM (table sorting and filtering, paging,
//! query strings, axis ticks, the timeline's view, zoom, pan and fetch
//! plan, colours). It depends on the JSON contract only, so `cargo test`
//! checks it on the host in seconds, with no second (host) build of Leptos;
//! the app re-exports both modules under their old paths.

pub mod logic;
pub mod timeline;
