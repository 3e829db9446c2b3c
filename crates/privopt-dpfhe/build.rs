//! Sets a `cfg(data_NAME)` flag per fetched dataset for the tests (see
//! `privopt-data/build/datasets.rs`).

#[path = "../privopt-data/build/datasets.rs"]
mod datasets;

fn main() {
    datasets::emit();
}
