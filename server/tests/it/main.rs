//! The server's integration tests, one test binary (one link of the server
//! and its dependencies, not one per file): each module one subject, against
//! a real server on SQLite and PostgreSQL. `cargo test -p server --test it
//! MODULE` runs one. The browser tests are their own binary (`e2e_browser`):
//! they need the built app and Chromium.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod capture;
mod gate;
mod mcp;
mod memory;
mod processes;
mod python;
mod s3;
mod service;
mod timeline;
mod watch;
