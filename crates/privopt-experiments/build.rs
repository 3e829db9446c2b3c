//! Sets a `cfg(data_NAME)` flag per fetched dataset for the tests (see `build/datasets.rs`).

#[path = "build/datasets.rs"]
mod datasets;

fn main() {
    datasets::emit();
}
