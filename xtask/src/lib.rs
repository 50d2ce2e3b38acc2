//! Library part of `cargo xtask`: what a test must be able to call.
//!
//! - [`browserbase`]: the scripted run behind `cargo xtask e2e --backend
//!   browserbase` (create a hosted session over the REST API, run the
//!   dialog-bridge scenarios through [`tool_surface::Tools`] on its
//!   `connectUrl`, release the session, report a table). Its API base URL
//!   is a parameter, so `tests/browserbase_fake.rs` runs the same code
//!   against a loopback fake of the API in front of a local Chromium.

pub mod browserbase;
