//! The app's pages.

pub mod diff;
pub mod run;
pub mod runs;
pub mod stacked;
pub mod timeline;
