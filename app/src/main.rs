//! The app's entry point: Trunk builds this binary to WASM.

fn main() {
    app::start();
}
